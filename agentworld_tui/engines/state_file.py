"""A conversation's model state on disk, so a later process goes on from it.

``agentworld predict --session FILE`` runs one turn per process: without this, every call
reads the whole history again. The engine writes the state the next turn starts from (the
history up to the generation prompt) beside the session, and the next call restores it
and reads only what is new.

The file is a cache, never trusted blindly. It is used only when its key (the engine and
its llama.cpp build, the model file's identity) is this process's, its tokens are a prefix
of the new prompt, and its bytes hash to what its header says; anything else drops it (a
changed model, another build, an edited history, a damaged or truncated file), and the
prompt is read whole, as without it. It is written atomically (a temporary file renamed
over it), and not at all when the state is larger than its bound.

Layout: ``MAGIC``, the header's length (4 bytes, little-endian), the header (JSON), the
tokens (int32, little-endian), then the engine's state bytes.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import stat
import sys
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Protocol, runtime_checkable

from agentworld_tui.world.store import write_atomic

log = logging.getLogger("agentworld.engine")

MAGIC = b"AWSTATE\x01"
VERSION = 1
MAX_HEADER = 64 << 10
DEFAULT_MAX_BYTES = 1 << 30
"""The largest state kept on disk (a full context of the real model's attention cache and
its recurrent state fit well within it)."""
SUFFIX = ".state"
IDENTITY_BYTES = 1 << 20
"""How much of the model file's start is hashed into its identity (its header and more)."""
_CHUNK = 8 << 20
_TOKEN = 4


def state_path(session: Path) -> Path:
    """Where the model state of the session file ``session`` is kept: beside it."""
    return session.with_name(session.name + SUFFIX)


def model_identity(path: Path) -> dict[str, Any]:
    """What tells one model file from another: its real path, size, modification time and
    a hash of its first MiB. A file replaced, re-downloaded or edited no longer matches."""
    real = Path(os.path.realpath(path))
    found = real.stat()
    digest = hashlib.sha256()
    with real.open("rb") as handle:
        digest.update(handle.read(IDENTITY_BYTES))
    return {
        "path": str(real),
        "size": found.st_size,
        "mtime_ns": found.st_mtime_ns,
        "head_sha256": digest.hexdigest(),
    }


def state_key(build: str, model_path: Path) -> dict[str, Any]:
    """The key a state file must carry to be used: the engine's build and the model."""
    return {"build": build, "model": model_identity(model_path)}


@runtime_checkable
class KeepsState(Protocol):
    """An engine that can keep its conversation's state in a file between processes."""

    def keep_state(self, path: Path | None, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        """Restore from ``path`` before the next prompt when it holds a prefix of it, and
        write there the state that prompt's next turn starts from (None: neither)."""


@dataclass(frozen=True)
class SavedState:
    """A state file whose header and tokens were checked; its bytes are checked when read."""

    path: Path
    tokens: list[int]
    offset: int
    size: int
    sha256: str


class StateFile:
    """One state file: read and checked, written atomically, dropped when it cannot serve."""

    def __init__(self, path: Path, key: dict[str, Any], max_bytes: int = DEFAULT_MAX_BYTES):
        self.path = path
        self.key = key
        self.max_bytes = max_bytes

    # -- reading ------------------------------------------------------------------------
    def load(self, prompt: Sequence[int]) -> SavedState | None:
        """The saved state when it is this key's and its tokens begin ``prompt`` (and leave
        at least one of them to read); otherwise the file is dropped and None returned."""
        try:
            found = self.path.lstat()
        except OSError:
            return None
        if not stat.S_ISREG(found.st_mode):
            log.warning("%s is not a regular file; the model state is not read", self.path)
            return None
        why = ""
        try:
            with self.path.open("rb") as handle:
                saved, why = self._read_head(handle, found.st_size)
        except OSError as exc:
            log.warning("cannot read the model state %s: %s", self.path, exc)
            return None
        if saved is not None:
            n = len(saved.tokens)
            if n >= len(prompt) or list(prompt[:n]) != saved.tokens:
                saved, why = None, "the history changed"
        if saved is None:
            self.drop(why)
        return saved

    def _read_head(self, handle: IO[bytes], file_size: int) -> tuple[SavedState | None, str]:
        if handle.read(len(MAGIC)) != MAGIC:
            return None, "not a state file"
        raw = handle.read(4)
        length = int.from_bytes(raw, "little") if len(raw) == 4 else -1
        if not 0 < length <= MAX_HEADER:
            return None, "damaged header"
        try:
            header = json.loads(handle.read(length))
        except ValueError:
            return None, "damaged header"
        if not isinstance(header, dict) or header.get("version") != VERSION:
            return None, "another format"
        if header.get("key") != self.key:
            return None, "another model or llama.cpp build"
        n, size = header.get("tokens"), header.get("state_bytes")
        if not (isinstance(n, int) and isinstance(size, int) and n > 0 and size > 0):
            return None, "damaged header"
        offset = len(MAGIC) + 4 + length + n * _TOKEN
        if offset + size != file_size or size > self.max_bytes:
            return None, "truncated or oversized"
        tokens = array("i")
        tokens.frombytes(handle.read(n * _TOKEN))
        if sys.byteorder != "little":
            tokens.byteswap()
        if hashlib.sha256(tokens.tobytes()).hexdigest() != header.get("tokens_sha256"):
            return None, "damaged tokens"
        digest = header.get("state_sha256")
        if not isinstance(digest, str):
            return None, "damaged header"
        return SavedState(self.path, tokens.tolist(), offset, size, digest), ""

    def read_state(self, saved: SavedState) -> bytearray | None:
        """The state's bytes, checked against their hash (None, and dropped, when not)."""
        data = bytearray(saved.size)
        digest = hashlib.sha256()
        try:
            with saved.path.open("rb") as handle:
                handle.seek(saved.offset)
                view = memoryview(data)
                done = 0
                while done < saved.size:
                    got = handle.readinto(view[done : done + _CHUNK])
                    if not got:
                        break
                    digest.update(view[done : done + got])
                    done += got
        except OSError as exc:
            log.warning("cannot read the model state %s: %s", saved.path, exc)
            return None
        if done != saved.size or digest.hexdigest() != saved.sha256:
            self.drop("damaged state")
            return None
        return data

    def copy_state(self, saved: SavedState, target: Path) -> bool:
        """Write the state's bytes to ``target`` (for an engine that reads a file), checked
        against their hash on the way; False, the copy removed and the file dropped, when
        they do not match."""
        digest = hashlib.sha256()
        left = saved.size
        try:
            with saved.path.open("rb") as source, target.open("wb") as out:
                source.seek(saved.offset)
                while left:
                    chunk = source.read(min(_CHUNK, left))
                    if not chunk:
                        break
                    digest.update(chunk)
                    out.write(chunk)
                    left -= len(chunk)
        except OSError as exc:
            log.warning("cannot copy the model state %s: %s", saved.path, exc)
            with contextlib.suppress(OSError):
                target.unlink()
            return False
        if left or digest.hexdigest() != saved.sha256:
            with contextlib.suppress(OSError):
                target.unlink()
            self.drop("damaged state")
            return False
        return True

    # -- writing ------------------------------------------------------------------------
    def save(self, tokens: Sequence[int], state: Any) -> bool:
        """Replace the file with ``tokens`` and the state (a bytes-like object or the path
        of a file holding it); a state over the bound drops the file instead."""
        source = Path(state) if isinstance(state, (str, Path)) else None
        try:
            size = source.stat().st_size if source is not None else memoryview(state).nbytes
        except OSError as exc:
            log.warning("cannot read the engine's saved state: %s", exc)
            return False
        if size > self.max_bytes or not tokens or not size:
            self.drop(f"a state of {size} bytes is over the bound of {self.max_bytes}")
            return False
        packed = array("i", tokens)
        if sys.byteorder != "little":
            packed.byteswap()
        parts: Iterable[Any] = [memoryview(state)] if source is None else _file_chunks(source)
        digest = hashlib.sha256()
        for part in parts:
            digest.update(part)
        header = json.dumps(
            {
                "version": VERSION,
                "key": self.key,
                "tokens": len(tokens),
                "tokens_sha256": hashlib.sha256(packed.tobytes()).hexdigest(),
                "state_bytes": size,
                "state_sha256": digest.hexdigest(),
            }
        ).encode()
        head = MAGIC + len(header).to_bytes(4, "little") + header + packed.tobytes()
        body = [memoryview(state)] if source is None else _file_chunks(source)
        try:
            write_atomic(self.path, [head, *body])
        except OSError as exc:
            log.warning("cannot write the model state %s: %s", self.path, exc)
            return False
        return True

    def drop(self, why: str = "") -> None:
        """Remove the file (it can no longer serve); a missing file is fine."""
        try:
            found = self.path.lstat()
        except OSError:
            return
        if not stat.S_ISREG(found.st_mode):
            return
        with contextlib.suppress(OSError):
            self.path.unlink()
            log.info("dropped the model state %s%s", self.path, f": {why}" if why else "")


class KeptStateFile:
    """The state file an engine was told to keep (``KeepsState.keep_state``), opened the
    first time a prompt needs it; one whose key cannot be made is given up, with a warning."""

    def __init__(self) -> None:
        self._asked: tuple[Path, int] | None = None
        self._file: StateFile | None = None

    def keep(self, path: Path | None, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self._asked = None if path is None else (path, max_bytes)
        self._file = None

    @property
    def asked(self) -> bool:
        return self._asked is not None

    def open(self, build: str, model_path: Path) -> StateFile | None:
        """The file, for this engine ``build`` and model (None: none asked, or given up)."""
        if self._file is None and self._asked is not None:
            path, max_bytes = self._asked
            try:
                self._file = StateFile(path, state_key(build, model_path), max_bytes)
            except OSError as exc:
                log.warning("no model state file: %s", exc)
                self._asked = None
        return self._file


def _file_chunks(path: Path) -> Iterable[bytes]:
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            yield chunk
