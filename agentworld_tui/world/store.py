"""Durable files: everything the app saves goes through ``write_atomic``.

A temporary file in the same folder is written, flushed and fsynced, then renamed over the
target, so a crash, a kill or a full disk leaves either the old file or the new one, never
half of one. With ``follow_links`` a symbolic link is written through (the file it points to
is replaced and the link stays a link), as a user who linked a session or settings file
expects; without it the link itself is replaced, which is what a cache that must never write
outside itself wants.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

STALE_SECONDS = 3600.0
"""A temporary file this old was left by a save that was killed (a save takes well under a
second); a younger one may be another running app's save in progress."""
TMP_SUFFIX = ".tmp"


def real_path(path: Path) -> Path:
    """``path`` with every symbolic link followed: the file a write must replace."""
    return Path(os.path.realpath(path))


def write_atomic(
    path: Path, data: bytes | Iterable[bytes | memoryview], *, follow_links: bool = False
) -> None:
    """Replace ``path`` (with ``follow_links``, the file its link points to) with ``data``
    (or its parts, in order: for data too large to join first), keeping the replaced
    file's permissions."""
    if follow_links:
        path = real_path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = _regular_file_mode(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=TMP_SUFFIX, dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            for part in [data] if isinstance(data, bytes) else data:
                handle.write(part)
            handle.flush()
            os.fsync(handle.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def _regular_file_mode(path: Path) -> int | None:
    """The permissions of the regular file at ``path``; None for a new file (which keeps
    mkstemp's owner-only mode) or a link that is being replaced."""
    try:
        found = path.lstat()
    except OSError:
        return None
    return stat.S_IMODE(found.st_mode) if stat.S_ISREG(found.st_mode) else None


def remove_stale_temporaries(folder: Path, older_than: float = STALE_SECONDS) -> list[Path]:
    """Remove the temporary files that killed saves left in ``folder``; return them.

    Only ``write_atomic``'s own names (hidden, ending in ``.tmp``) that were last written
    ``older_than`` seconds ago or more are removed; anything else is left alone.
    """
    removed: list[Path] = []
    limit = time.time() - older_than
    with contextlib.suppress(OSError), os.scandir(folder) as entries:
        for entry in entries:
            name = entry.name
            if not (name.startswith(".") and name.endswith(TMP_SUFFIX) and entry.is_file()):
                continue
            with contextlib.suppress(OSError):
                if entry.stat().st_mtime <= limit:
                    os.unlink(entry.path)
                    removed.append(Path(entry.path))
    return removed
