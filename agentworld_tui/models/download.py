"""Fetching a catalog entry from the Hugging Face Hub into the huggingface-hub cache.

``huggingface-hub`` lists the repository (with each file's recorded size and LFS sha256),
resolves each file's download location and maps the Hub's errors; the bytes are then read
here, because the library's own download neither keeps a partial file across runs nor checks
the sha256. Each file goes to ``blobs/<sha256>.incomplete``, is hashed as it arrives (after
re-reading what an earlier run left), and only a file whose digest matches the Hub's record
is renamed into place and linked into the snapshot. A mismatch deletes the partial file.

Every value of the listing that becomes part of a path (file names, digests, the commit) is
checked first (``listing``), and every path is checked to stay inside the cache, through no
link, before anything is written: a lying Hub gets a one-line refusal, with nothing written.

``pull(entry, progress, cancel)`` is the one call the app and the command line use; it runs
in the caller's thread (the app runs it in a worker and sets ``cancel`` to stop it).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal
from urllib.parse import urlsplit

from agentworld_tui.models.cache import (
    PARTIAL_SUFFIX,
    OutsideCacheError,
    check_inside,
    find_local,
    hub_cache_dir,
    link_into_snapshot,
    repo_folder,
)
from agentworld_tui.models.catalog import CatalogEntry
from agentworld_tui.models.listing import (
    ListingError,
    checked_blob_id,
    checked_commit,
    checked_path,
    checked_sha256,
    checked_size,
    shown,
)
from agentworld_tui.models.quant import QuantNotFoundError, choose_files
from agentworld_tui.world.sanitize import sanitize

if TYPE_CHECKING:
    from huggingface_hub.hf_api import ModelInfo, RepoSibling

DEFAULT_ENDPOINT = "https://huggingface.co"
CHUNK_BYTES = 1 << 20
DISK_MARGIN_BYTES = 256 << 20
"""Room left free after a download, so the disk is not filled to the last byte."""
MAX_STALLED_RETRIES = 5

Phase = Literal["check", "download", "done"]


@dataclass(frozen=True)
class PullProgress:
    """Where a pull stands, for a progress bar. ``done``/``total`` count all files."""

    phase: Phase
    """check: re-reading an earlier partial file; download: receiving; done: all verified."""
    file: str
    file_index: int
    """1-based position of ``file`` among ``file_count`` files (split parts)."""
    file_count: int
    done: int
    total: int
    speed: float
    """Bytes per second over the last few seconds; 0 before any byte arrived."""
    eta: float | None
    """Seconds left at the current speed; None when unknown."""

    @property
    def fraction(self) -> float:
        return self.done / self.total if self.total else 0.0


ProgressCallback = Callable[[PullProgress], None]
"""Called in the pulling thread once per received chunk; keep it quick."""


class DownloadError(Exception):
    """A pull that cannot go on; the message is one line for the user.

    Messages quote the Hub (file names, error text), so they are sanitized here, once, for
    every place that shows them.
    """

    def __init__(self, message: str) -> None:
        super().__init__(sanitize(message).replace("\n", " "))


class NoNetworkError(DownloadError):
    pass


class RepoAccessError(DownloadError):
    """The repository is missing, private or gated, or the file is gone."""


class DiskSpaceError(DownloadError):
    pass


class VerificationError(DownloadError):
    pass


class DownloadCancelled(DownloadError):
    pass


class UnsafeListingError(DownloadError):
    """The Hub's listing has a value that cannot safely name a file, or cannot be read."""


class CacheLinkError(DownloadError):
    """A link inside the cache would take a write out of it."""


@dataclass(frozen=True)
class RemoteFile:
    path: str
    size: int
    sha256: str
    """The LFS sha256 the Hub recorded; empty for a small file kept in git."""
    blob_id: str
    """The git blob id (sha1 of the git object); the cache names non-LFS blobs by it."""

    @property
    def etag(self) -> str:
        return self.sha256 or self.blob_id


@dataclass(frozen=True)
class DownloadPlan:
    entry: CatalogEntry
    commit: str
    files: tuple[RemoteFile, ...]
    total_bytes: int
    needed_bytes: int
    """Bytes still to fetch: the total less finished blobs and partial files."""
    free_bytes: int
    cache_dir: Path


def hub_endpoint() -> str:
    """``HF_ENDPOINT`` as set now (huggingface-hub itself reads it once, when imported)."""
    return (os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def is_offline() -> bool:
    from huggingface_hub import constants

    flag = os.environ.get("HF_HUB_OFFLINE", "")
    return constants.is_offline_mode() or flag.strip().upper() in ("1", "ON", "YES", "TRUE")


def plan_download(
    entry: CatalogEntry, *, endpoint: str | None = None, token: str | bool | None = None
) -> DownloadPlan:
    """List the repository and work out which files to fetch and whether they fit on disk."""
    from huggingface_hub import HfApi

    endpoint = endpoint or hub_endpoint()
    if is_offline():
        raise NoNetworkError(
            f"{entry.name} is not downloaded and the Hub is switched off (HF_HUB_OFFLINE is set)"
        )
    api = HfApi(endpoint=endpoint, token=token)
    with _unreadable_listing(entry, endpoint), _hub_errors(entry, endpoint):
        info = api.model_info(entry.repo, files_metadata=True)
    try:
        commit, files = _checked_files(info, entry)
    except ListingError as exc:
        raise UnsafeListingError(
            f"the listing of {entry.repo} from {endpoint} cannot be used: {exc}; "
            "nothing was downloaded"
        ) from None
    cache_dir = hub_cache_dir()
    blobs = repo_folder(entry.repo, cache_dir) / "blobs"
    needed = 0
    for remote in files:
        blob = blobs / remote.etag
        if blob.exists():
            continue
        partial = _size_of(blobs / (remote.etag + PARTIAL_SUFFIX))
        needed += remote.size - (partial if partial <= remote.size else 0)
    return DownloadPlan(
        entry=entry,
        commit=commit,
        files=tuple(files),
        total_bytes=sum(f.size for f in files),
        needed_bytes=needed,
        free_bytes=_free_bytes(repo_folder(entry.repo, cache_dir)),
        cache_dir=cache_dir,
    )


def _checked_files(info: ModelInfo, entry: CatalogEntry) -> tuple[str, list[RemoteFile]]:
    """The commit and the chosen files, every value that names a file checked."""
    siblings: dict[str, RepoSibling] = {}
    for sibling in info.siblings or []:
        if not isinstance(sibling.rfilename, str):
            raise ListingError(f"a file name {shown(sibling.rfilename)} is not text")
        siblings[sibling.rfilename] = sibling
    try:
        chosen = choose_files(siblings, entry.quant, entry.repo)
    except QuantNotFoundError as exc:
        raise RepoAccessError(str(exc)) from None
    commit = checked_commit(info.sha)
    files: list[RemoteFile] = []
    for path in chosen.paths:
        checked_path(path)
        sibling = siblings[path]
        lfs = sibling.lfs
        if lfs is not None:
            size = checked_size(lfs.size, path)
            remote = RemoteFile(path, size, sha256=checked_sha256(lfs.sha256, path), blob_id="")
        else:
            size = checked_size(sibling.size, path)
            remote = RemoteFile(
                path, size, sha256="", blob_id=checked_blob_id(sibling.blob_id, path)
            )
        files.append(remote)
    return commit, files


@contextlib.contextmanager
def _unreadable_listing(entry: CatalogEntry, endpoint: str) -> Iterator[None]:
    """huggingface-hub's own parsing of a malformed answer, as a one-line refusal."""
    try:
        yield
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise UnsafeListingError(
            f"the listing of {entry.repo} from {endpoint} cannot be read "
            f"({type(exc).__name__}); nothing was downloaded"
        ) from None


def check_disk_room(plan: DownloadPlan) -> None:
    if plan.needed_bytes + DISK_MARGIN_BYTES > plan.free_bytes:
        raise DiskSpaceError(
            f"not enough disk space for {plan.entry.name}: it needs "
            f"{format_bytes(plan.needed_bytes)} more and {plan.cache_dir} has "
            f"{format_bytes(plan.free_bytes)} free; free some space or point HF_HOME elsewhere"
        )


def pull(
    entry: CatalogEntry,
    progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
    *,
    endpoint: str | None = None,
    token: str | bool | None = None,
) -> Path:
    """Make sure the entry is downloaded and verified; return the path for llama.cpp.

    An entry already in the cache is returned at once, without the network (so an offline
    machine works). Raises DownloadError (or a subclass) with a one-line message.
    """
    found = find_local(entry)
    if found is not None:
        return found.first
    plan = plan_download(entry, endpoint=endpoint, token=token)
    check_disk_room(plan)
    return fetch(plan, progress, cancel, endpoint=endpoint, token=token)


def fetch(
    plan: DownloadPlan,
    progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
    *,
    endpoint: str | None = None,
    token: str | bool | None = None,
) -> Path:
    """Download every file of a plan (resuming partial ones) and link them into the cache."""
    endpoint = endpoint or hub_endpoint()
    folder = repo_folder(plan.entry.repo, plan.cache_dir)
    try:
        check_plan_paths(plan)
    except OutsideCacheError as exc:
        raise CacheLinkError(f"{exc}; nothing was downloaded") from None
    meter = _Meter(plan, progress)
    pointers: list[Path] = []
    for index, remote in enumerate(plan.files, start=1):
        blob = folder / "blobs" / remote.etag
        pointer = folder / "snapshots" / plan.commit / remote.path
        meter.start_file(remote, index)
        with _file_lock(plan, remote):
            if not blob.exists():
                _fetch_file(plan, remote, blob, meter, cancel, endpoint, token)
        meter.finish_file(remote)
        link_into_snapshot(blob, pointer)
        pointers.append(pointer)
    refs = folder / "refs" / "main"
    refs.parent.mkdir(parents=True, exist_ok=True)
    from agentworld_tui.world.store import write_atomic

    write_atomic(refs, plan.commit.encode("ascii"))
    meter.report("done")
    return pointers[0]


def check_plan_paths(plan: DownloadPlan) -> None:
    """Every path a fetch will write, link or lock: inside the cache, through no link.

    An existing link is allowed only where a snapshot pointer is about to be replaced.
    Raises OutsideCacheError.
    """
    root = plan.cache_dir
    folder = repo_folder(plan.entry.repo, root)
    for remote in plan.files:
        blob = folder / "blobs" / remote.etag
        check_inside(root, blob)
        check_inside(root, blob.with_name(blob.name + PARTIAL_SUFFIX))
        check_inside(root, folder / "snapshots" / plan.commit / remote.path, final_link_ok=True)
        check_inside(root, _lock_path(plan, remote))
    check_inside(root, folder / "refs" / "main")


def _lock_path(plan: DownloadPlan, remote: RemoteFile) -> Path:
    folder = repo_folder(plan.entry.repo, plan.cache_dir)
    return plan.cache_dir / ".locks" / folder.name / f"{remote.etag}.lock"


@contextlib.contextmanager
def _file_lock(plan: DownloadPlan, remote: RemoteFile) -> Iterator[None]:
    """One writer per file: the lock huggingface-hub itself takes for the same blob."""
    from filelock import FileLock, Timeout

    path = _lock_path(plan, remote)
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(path), timeout=0)
    try:
        lock.acquire()
    except Timeout:
        raise DownloadError(
            f"{remote.path} is being downloaded by another program (lock {path}); "
            "wait for it or stop it"
        ) from None
    try:
        yield
    finally:
        lock.release()


def _fetch_file(
    plan: DownloadPlan,
    remote: RemoteFile,
    blob: Path,
    meter: _Meter,
    cancel: threading.Event | None,
    endpoint: str,
    token: str | bool | None,
) -> None:
    import httpx2
    from huggingface_hub import get_hf_file_metadata, get_session, hf_hub_url, hf_raise_for_status
    from huggingface_hub.utils import build_hf_headers  # type: ignore[attr-defined]

    entry = plan.entry
    url = hf_hub_url(entry.repo, remote.path, revision=plan.commit, endpoint=endpoint)
    headers = build_hf_headers(token=token, library_name="agentworld-tui")
    with _hub_errors(entry, endpoint):
        meta = get_hf_file_metadata(url, token=token, endpoint=endpoint)
    location = meta.location or url
    if _origin(location) != _origin(url):
        headers.pop("authorization", None)  # a CDN must not see the Hub token
    partial = blob.with_name(blob.name + PARTIAL_SUFFIX)
    blob.parent.mkdir(parents=True, exist_ok=True)
    digest = _Digest(remote)
    offset = _resume_offset(partial, remote, digest, meter, cancel)
    stalled = 0
    session = get_session()
    timeout = httpx2.Timeout(30.0, connect=15.0)
    while offset < remote.size:
        request_headers = dict(headers)
        if offset:
            request_headers["Range"] = f"bytes={offset}-"
        before = offset
        try:
            with session.stream(
                "GET", location, headers=request_headers, timeout=timeout
            ) as response:
                with _hub_errors(entry, endpoint):
                    hf_raise_for_status(response)
                if offset and response.status_code != 206:
                    offset = 0  # the server ignored the range: start over
                    digest = _Digest(remote)
                    partial.write_bytes(b"")
                with partial.open("ab") as out:
                    for chunk in response.iter_bytes(CHUNK_BYTES):
                        if cancel is not None and cancel.is_set():
                            raise DownloadCancelled(_cancel_message(entry, offset, remote))
                        if offset + len(chunk) > remote.size:
                            partial.unlink(missing_ok=True)
                            raise VerificationError(
                                f"{remote.path} is larger than the {remote.size} bytes the Hub "
                                "recorded; the file was deleted"
                            )
                        out.write(chunk)
                        digest.update(chunk)
                        offset += len(chunk)
                        meter.advance(offset, len(chunk))
        except httpx2.TransportError as exc:
            stalled = 0 if offset > before else stalled + 1
            if stalled >= MAX_STALLED_RETRIES:
                raise NoNetworkError(
                    f"the download of {remote.path} broke off at {format_bytes(offset)} of "
                    f"{format_bytes(remote.size)} ({_reason(exc)}); run the pull again to resume"
                ) from None
            if cancel is not None and cancel.is_set():
                raise DownloadCancelled(_cancel_message(entry, offset, remote)) from None
            time.sleep(0.2 * stalled)
            continue
        if offset < remote.size and offset == before:
            stalled += 1
            if stalled >= MAX_STALLED_RETRIES:
                raise NoNetworkError(
                    f"the Hub stopped sending {remote.path} at {format_bytes(offset)}; run the "
                    "pull again to resume"
                )
    if not digest.matches():
        partial.unlink(missing_ok=True)
        raise VerificationError(
            f"{remote.path} failed verification: its {digest.kind} is {digest.hexdigest()}, "
            f"the Hub recorded {digest.expected}; the damaged file was deleted, pull again"
        )
    os.replace(partial, blob)
    with contextlib.suppress(OSError):
        os.chmod(blob, 0o644)


def _resume_offset(
    partial: Path,
    remote: RemoteFile,
    digest: _Digest,
    meter: _Meter,
    cancel: threading.Event | None,
) -> int:
    """Feed what an earlier run left to the hash, so the download can continue after it."""
    size = _size_of(partial)
    if size > remote.size:
        partial.unlink()
        return 0
    done = 0
    if not size:
        return 0
    with partial.open("rb") as handle:
        while done < size:
            if cancel is not None and cancel.is_set():
                raise DownloadCancelled(f"cancelled; {remote.path} kept for a later pull")
            block = handle.read(min(CHUNK_BYTES * 8, size - done))
            if not block:
                break
            digest.update(block)
            done += len(block)
            meter.checking(done)
    return done


class _Digest:
    """The Hub's checksum of a file: LFS sha256, or the git blob sha1 for small files."""

    def __init__(self, remote: RemoteFile) -> None:
        if remote.sha256:
            self.kind, self.expected = "sha256", remote.sha256.lower()
            self._hash = hashlib.sha256()
        else:
            self.kind, self.expected = "git blob id", remote.blob_id.lower()
            self._hash = hashlib.sha1(usedforsecurity=False)
            self._hash.update(f"blob {remote.size}\0".encode())

    def update(self, data: bytes) -> None:
        self._hash.update(data)

    def hexdigest(self) -> str:
        return self._hash.hexdigest()

    def matches(self) -> bool:
        return not self.expected or self.hexdigest() == self.expected


class _Meter:
    """Turns bytes received into PullProgress reports (speed over a sliding window).

    The callback runs once per chunk (1 MiB); a UI should batch its redraws.
    """

    WINDOW_S = 5.0

    def __init__(self, plan: DownloadPlan, callback: ProgressCallback | None) -> None:
        self.callback = callback
        self.total = plan.total_bytes
        self.count = len(plan.files)
        self.finished = 0
        self.current = 0
        self.file = ""
        self.index = 0
        self.samples: deque[tuple[float, int]] = deque()
        self.received = 0

    def start_file(self, remote: RemoteFile, index: int) -> None:
        self.file, self.index, self.current = remote.path, index, 0
        self.report("download")

    def finish_file(self, remote: RemoteFile) -> None:
        self.finished += remote.size
        self.current = 0

    def checking(self, done: int) -> None:
        self.current = done
        self.report("check")

    def advance(self, offset: int, received: int) -> None:
        self.current = offset
        self.received += received
        now = time.monotonic()
        self.samples.append((now, self.received))
        while len(self.samples) > 2 and now - self.samples[0][0] > self.WINDOW_S:
            self.samples.popleft()
        self.report("download")

    def speed(self) -> float:
        if len(self.samples) < 2:
            return 0.0
        (t0, b0), (t1, b1) = self.samples[0], self.samples[-1]
        return (b1 - b0) / (t1 - t0) if t1 > t0 else 0.0

    def report(self, phase: Phase) -> None:
        if self.callback is None:
            return
        done = min(self.total, self.finished + self.current)
        speed = self.speed()
        eta = (self.total - done) / speed if speed > 0 else None
        if phase == "done":
            done, eta = self.total, 0.0
        self.callback(
            PullProgress(phase, self.file, self.index, self.count, done, self.total, speed, eta)
        )


@contextlib.contextmanager
def _hub_errors(entry: CatalogEntry, endpoint: str) -> Iterator[None]:
    """Turn huggingface-hub's and the HTTP client's exceptions into one-line messages."""
    import httpx2
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        OfflineModeIsEnabled,
        RemoteEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    try:
        yield
    except GatedRepoError:
        raise RepoAccessError(
            f"{entry.repo} is gated: accept its terms at {endpoint}/{entry.repo} and log in "
            "(hf auth login, or set HF_TOKEN)"
        ) from None
    except RepositoryNotFoundError:
        raise RepoAccessError(
            f"repository {entry.repo} was not found on {endpoint} (if it is private, log in "
            "with hf auth login or set HF_TOKEN)"
        ) from None
    except (RevisionNotFoundError, RemoteEntryNotFoundError):
        raise RepoAccessError(
            f"a file of {entry.repo} disappeared from {endpoint} during the pull; try again"
        ) from None
    except OfflineModeIsEnabled:
        raise NoNetworkError(
            f"{entry.name} is not downloaded and the Hub is switched off (HF_HUB_OFFLINE is set)"
        ) from None
    except HfHubHTTPError as exc:
        status = exc.response.status_code if exc.response is not None else "?"
        raise DownloadError(f"{endpoint} answered HTTP {status} for {entry.repo}") from None
    except (httpx2.ConnectError, httpx2.ConnectTimeout, httpx2.UnsupportedProtocol) as exc:
        raise NoNetworkError(
            f"cannot reach {endpoint} ({_reason(exc)}); check the network"
        ) from None


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text and text[0] else type(exc).__name__


def _cancel_message(entry: CatalogEntry, offset: int, remote: RemoteFile) -> str:
    return (
        f"download of {entry.name} cancelled at {format_bytes(offset)} of "
        f"{format_bytes(remote.size)} ({remote.path}); pull again to resume"
    )


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    return parts.scheme, (parts.hostname or "").lower(), parts.port


def _size_of(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _free_bytes(folder: Path) -> int:
    """Free space where ``folder`` is or will be (its nearest existing parent)."""
    for candidate in (folder, *folder.parents):
        try:
            return shutil.disk_usage(candidate).free
        except OSError:
            continue
    return 0


def format_bytes(count: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if abs(count) < 1000 or unit == "GB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1000
    return f"{count:.1f} GB"


def format_duration(seconds: float | None) -> str:
    if seconds is None:
        return "--:--"
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}:{secs:02d}"
