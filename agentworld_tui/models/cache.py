"""Models already on disk, in the Hugging Face cache layout.

Downloads go where ``huggingface-hub`` keeps its own (``HF_HUB_CACHE``, else ``HF_HOME/hub``),
so a model fetched with the ``hf`` tool counts as downloaded and the reverse. The layout:
``models--OWNER--NAME/blobs/<sha256>`` holds the bytes, ``snapshots/<commit>/<path>`` links
to them, ``refs/main`` names the newest commit. Only complete, verified files are ever linked
into a snapshot, so finding a file here means it is whole. Reading needs no network.

Nothing here follows a link out of the cache: a snapshot file counts only when it is a
plain file or a link to a blob of its own repository, snapshot folders that are links are
skipped, and a removal deletes links themselves, never what they point to elsewhere. The
cache folder itself may be a link (a cache moved to a bigger disk); below it, writing and
deleting refuse to pass through one (``check_inside``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from agentworld_tui.models.catalog import CatalogEntry
from agentworld_tui.models.quant import (
    ModelFiles,
    QuantNotFoundError,
    choose_files,
    is_model_file,
    tag_matches,
)
from agentworld_tui.world.sanitize import sanitize

PARTIAL_SUFFIX = ".incomplete"


def hub_cache_dir() -> Path:
    """The cache folder, read from the environment now (not when huggingface-hub loaded)."""
    explicit = os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE")
    if explicit:
        return Path(os.path.expandvars(explicit)).expanduser()
    home = os.environ.get("HF_HOME")
    if not home:
        xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        home = os.path.join(xdg, "huggingface")
    return Path(os.path.expandvars(home)).expanduser() / "hub"


def repo_folder(repo: str, cache_dir: Path | None = None) -> Path:
    return (cache_dir or hub_cache_dir()) / ("models--" + repo.replace("/", "--"))


class OutsideCacheError(OSError):
    """A path in the cache that would lead out of it; the message is one line."""


def check_inside(root: Path, path: Path, *, final_link_ok: bool = False) -> None:
    """Refuse a path that is not below ``root`` by name or that passes through a link.

    ``root`` itself may be a link. ``final_link_ok`` allows the last part to be a link,
    for a snapshot pointer about to be replaced (unlinking a link never follows it).
    """
    try:
        parts = path.relative_to(root).parts
    except ValueError:
        parts = ("..",)
    if not parts or any(part in (".", "..") for part in parts):
        raise OutsideCacheError(f"refusing {_shown(path)}: it is not inside the cache {root}")
    current = root
    for index, part in enumerate(parts):
        current = current / part
        if current.is_symlink() and not (final_link_ok and index == len(parts) - 1):
            raise OutsideCacheError(
                f"{_shown(current)} is a symbolic link inside the cache; refusing to follow "
                "it (remove it and try again)"
            )


def _shown(path: Path) -> str:
    return sanitize(str(path)).replace("\n", " ")


@dataclass(frozen=True)
class LocalModel:
    commit: str
    paths: tuple[Path, ...]
    """The snapshot files, split parts in order."""

    @property
    def first(self) -> Path:
        return self.paths[0]

    @property
    def size_bytes(self) -> int:
        return sum(p.stat().st_size for p in self.paths)


def _snapshot_order(folder: Path) -> list[Path]:
    snapshots = folder / "snapshots"
    try:
        found = [p for p in snapshots.iterdir() if p.is_dir() and not p.is_symlink()]
    except OSError:
        return []
    try:
        main = (folder / "refs" / "main").read_text(encoding="utf-8").strip()
    except OSError:
        main = ""
    found.sort(key=lambda p: (p.name != main, -p.stat().st_mtime))
    return found


def _blobs_of(snapshot: Path) -> Path:
    return snapshot.parent.parent / "blobs"


def _target_blob(pointer: Path, blobs: Path) -> Path | None:
    """The blob a snapshot link leads to, when that is a plain file right in ``blobs``."""
    if not pointer.is_symlink():
        return None
    try:
        target = pointer.resolve(strict=True)
        real_blobs = blobs.resolve()
    except (OSError, RuntimeError):
        return None
    if target.parent != real_blobs or not target.is_file():
        return None
    return blobs / target.name


def _walk(snapshot: Path) -> list[Path]:
    """Everything but folders in a snapshot, without entering linked folders."""
    found: list[Path] = []
    for root, dirs, names in os.walk(snapshot):
        found += [Path(root) / name for name in names]
        found += [Path(root) / name for name in dirs if (Path(root) / name).is_symlink()]
    return found


def _is_ours(path: Path, blobs: Path) -> bool:
    """A plain file, or a link to one of the repository's blobs."""
    if path.is_symlink():
        return _target_blob(path, blobs) is not None
    return path.is_file()


def _files_in(snapshot: Path) -> list[str]:
    blobs = _blobs_of(snapshot)
    return [p.relative_to(snapshot).as_posix() for p in _walk(snapshot) if _is_ours(p, blobs)]


def find_local(entry: CatalogEntry, cache_dir: Path | None = None) -> LocalModel | None:
    """The entry's files in the cache, complete (every split part present), or None."""
    folder = repo_folder(entry.repo, cache_dir)
    for snapshot in _snapshot_order(folder):
        try:
            chosen: ModelFiles = choose_files(_files_in(snapshot), entry.quant)
        except QuantNotFoundError:
            continue
        return LocalModel(snapshot.name, tuple(snapshot / p for p in chosen.paths))
    return None


def local_path(entry: CatalogEntry, cache_dir: Path | None = None) -> Path | None:
    """The GGUF file to give llama.cpp (the first part of a split model), if downloaded."""
    found = find_local(entry, cache_dir)
    return found.first if found else None


def partial_bytes(entry: CatalogEntry, cache_dir: Path | None = None) -> int:
    """Bytes of interrupted downloads in the entry's repository (all quantizations)."""
    blobs = repo_folder(entry.repo, cache_dir) / "blobs"
    try:
        return sum(p.stat().st_size for p in blobs.glob("*" + PARTIAL_SUFFIX))
    except OSError:
        return 0


@dataclass(frozen=True)
class Removal:
    files: int
    bytes_freed: int


def remove(entry: CatalogEntry, cache_dir: Path | None = None) -> Removal:
    """Delete the entry's files from every snapshot, and their blobs once nothing uses them.

    Other quantizations of the same repository stay. When the repository has nothing left,
    its folder goes too (with any interrupted download in it). A snapshot link that leads
    out of the repository's blobs is removed itself, and what it points to stays; a linked
    repository, snapshots or blobs folder raises OutsideCacheError before anything goes.
    """
    root = cache_dir or hub_cache_dir()
    folder = repo_folder(entry.repo, root)
    check_inside(root, folder / "snapshots")
    check_inside(root, folder / "blobs")
    snapshots = _snapshot_order(folder)
    blobs_folder = folder / "blobs"
    doomed: list[Path] = []
    for snapshot in snapshots:
        for path in _walk(snapshot):
            rel = path.relative_to(snapshot).as_posix()
            if is_model_file(rel) and tag_matches(rel, entry.quant):
                doomed.append(path)
    if not doomed:
        return Removal(0, 0)
    blobs = {_target_blob(p, blobs_folder) for p in doomed}
    freed = 0
    for pointer in doomed:
        if not pointer.is_symlink():
            freed += pointer.stat().st_size
        pointer.unlink()
    still_used = {_target_blob(s / rel, blobs_folder) for s in snapshots for rel in _files_in(s)}
    for blob in blobs:
        if blob is not None and blob not in still_used and blob.exists():
            check_inside(root, blob)
            freed += blob.stat().st_size
            blob.unlink()
    for snapshot in snapshots:
        _prune_empty(snapshot)
    if not any(_files_in(s) for s in _snapshot_order(folder)):
        shutil.rmtree(folder, ignore_errors=True)
    return Removal(len(doomed), freed)


def _prune_empty(folder: Path) -> None:
    """Remove folders left empty, deepest first (rmdir refuses a folder that is not)."""
    for root, _dirs, _files in os.walk(folder, topdown=False):
        with contextlib.suppress(OSError):
            Path(root).rmdir()


def link_into_snapshot(blob: Path, pointer: Path) -> None:
    """Link a finished blob into a snapshot as huggingface-hub does (relative symlink).

    Where symlinks are not allowed (some Windows setups) the blob itself moves into the
    snapshot, which is the library's own fallback.
    """
    pointer.parent.mkdir(parents=True, exist_ok=True)
    if pointer.is_symlink() or pointer.exists():
        pointer.unlink()
    try:
        os.symlink(os.path.relpath(blob, pointer.parent), pointer)
    except OSError:
        shutil.move(str(blob), str(pointer))
