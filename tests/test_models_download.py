"""Downloads against a real Hub-shaped HTTP server on 127.0.0.1 (tests/hubserver.py)."""

from __future__ import annotations

import hashlib
import os
import socket
import threading
from pathlib import Path

import pytest
from hubserver import HubFile, HubServer

from agentworld_tui.models.cache import find_local, hub_cache_dir, local_path, remove, repo_folder
from agentworld_tui.models.catalog import CatalogEntry
from agentworld_tui.models.download import (
    DiskSpaceError,
    DownloadCancelled,
    DownloadError,
    NoNetworkError,
    PullProgress,
    RepoAccessError,
    VerificationError,
    plan_download,
    pull,
)

REPO = "tester/Tiny-AgentWorld-GGUF"
MB = 1_000_000


def blob(size: int, seed: int) -> bytes:
    """Deterministic bytes that start like a GGUF file."""
    out = bytearray(b"GGUF")
    counter = 0
    while len(out) < size:
        out += hashlib.sha256(f"{seed}-{counter}".encode()).digest()
        counter += 1
    return bytes(out[:size])


@pytest.fixture
def hub(online_hub: HubServer) -> HubServer:
    return online_hub


def entry(quant: str = "Q4_K_M", repo: str = REPO) -> CatalogEntry:
    return CatalogEntry(name=f"tiny-{quant.lower()}", repo=repo, quant=quant, size_gb=0.003)


def cdn_gets(server: HubServer) -> list[str | None]:
    """The Range header of every GET the CDN served (None for a whole-file GET)."""
    return [r.range for r in server.requests if r.origin == "cdn" and r.method == "GET"]


def test_full_download_lands_in_the_hf_cache(hub: HubServer) -> None:
    data = blob(3 * MB, 1)
    other = blob(5000, 2)
    repo = hub.add_repo(
        REPO,
        {
            "README.md": b"# tiny\n",
            "Tiny-Q4_K_M.gguf": data,
            "Tiny-UD-Q4_K_M.gguf": other,
            "mmproj-Q4_K_M.gguf": other,
        },
    )
    seen: list[PullProgress] = []
    path = pull(entry(), seen.append)
    assert path.read_bytes() == data
    sha = hashlib.sha256(data).hexdigest()
    folder = repo_folder(REPO)
    assert folder.parent == hub_cache_dir() == Path(os.environ["HF_HOME"]) / "hub"
    assert path == folder / "snapshots" / repo.commit / "Tiny-Q4_K_M.gguf"
    assert path.is_symlink() and path.resolve() == folder / "blobs" / sha
    assert (folder / "refs" / "main").read_text() == repo.commit
    assert not list((folder / "blobs").glob("*.incomplete"))
    assert local_path(entry()) == path
    # only the chosen file was fetched, and in one piece
    assert cdn_gets(hub) == [None]
    assert next(r.path for r in hub.requests if r.origin == "cdn").startswith(f"/lfs/{sha}")
    # progress: grows, ends at the total, says done
    done = [p.done for p in seen]
    assert done == sorted(done)
    assert seen[-1].phase == "done" and seen[-1].done == seen[-1].total == len(data)
    assert seen[-1].file_count == 1 and seen[-1].fraction == 1.0
    assert any(p.phase == "download" and 0 < p.done < len(data) for p in seen)


def test_already_downloaded_needs_no_network(hub: HubServer) -> None:
    hub.add_repo(REPO, {"Tiny-Q4_K_M.gguf": blob(200_000, 3)})
    first = pull(entry())
    before = len(hub.requests)
    assert pull(entry()) == first
    assert len(hub.requests) == before


def test_offline_with_the_model_cached_works(
    hub: HubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from huggingface_hub import constants

    hub.add_repo(REPO, {"Tiny-Q4_K_M.gguf": blob(200_000, 4)})
    path = pull(entry())
    hub.stop()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    assert pull(entry()) == path
    assert local_path(entry()) == path
    with pytest.raises(NoNetworkError, match="HF_HUB_OFFLINE"):
        pull(entry("Q8_0"))


def test_no_network_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from huggingface_hub import constants

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    dead = f"http://127.0.0.1:{closed_port}"
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_ENDPOINT", dead)
    with pytest.raises(NoNetworkError, match=f"cannot reach {dead}"):
        pull(entry())


def test_a_dropped_connection_is_resumed_with_a_range_request(hub: HubServer) -> None:
    data = blob(3 * MB, 5)
    hub.add_repo(REPO, {"Tiny-Q4_K_M.gguf": HubFile(data, drop_first_after=1_200_000)})
    path = pull(entry())
    assert path.read_bytes() == data
    ranges = cdn_gets(hub)
    assert ranges[0] is None and len(ranges) == 2
    assert ranges[1] is not None
    start = int(ranges[1].removeprefix("bytes=").rstrip("-"))
    assert 0 < start <= 1_200_000


def test_a_cancelled_download_resumes_where_it_stopped(hub: HubServer) -> None:
    data = blob(4 * MB, 6)
    hub.add_repo(REPO, {"Tiny-Q4_K_M.gguf": data})
    cancel = threading.Event()

    def stop_after_a_megabyte(progress: PullProgress) -> None:
        if progress.done >= MB:
            cancel.set()

    with pytest.raises(DownloadCancelled, match="pull again to resume"):
        pull(entry(), stop_after_a_megabyte, cancel)
    assert local_path(entry()) is None
    partials = list((repo_folder(REPO) / "blobs").glob("*.incomplete"))
    assert len(partials) == 1
    kept = partials[0].stat().st_size
    assert MB <= kept < len(data)
    assert partials[0].read_bytes() == data[:kept]
    assert plan_download(entry()).needed_bytes == len(data) - kept

    phases: list[str] = []
    path = pull(entry(), lambda p: phases.append(p.phase))
    assert path.read_bytes() == data
    assert cdn_gets(hub)[-1] == f"bytes={kept}-"
    assert "check" in phases  # the kept part was hashed again before continuing
    assert not partials[0].exists()


def test_a_corrupted_download_fails_verification_and_is_not_kept(hub: HubServer) -> None:
    data = blob(2 * MB, 7)
    damaged = bytearray(data)
    damaged[MB] ^= 0xFF
    hub.add_repo(REPO, {"Tiny-Q4_K_M.gguf": HubFile(data, serve=bytes(damaged))})
    with pytest.raises(VerificationError, match="failed verification") as info:
        pull(entry())
    assert hashlib.sha256(data).hexdigest() in str(info.value)
    folder = repo_folder(REPO)
    assert local_path(entry()) is None
    assert not (folder / "blobs" / hashlib.sha256(data).hexdigest()).exists()
    assert not list((folder / "blobs").glob("*.incomplete"))
    assert not list((folder / "snapshots").rglob("*.gguf"))


def test_split_files_download_every_part(hub: HubServer) -> None:
    parts = {f"Q8_0/Tiny-Q8_0-0000{i}-of-00003.gguf": blob(700_000 + i, 10 + i) for i in (1, 2, 3)}
    repo = hub.add_repo(REPO, {**parts, "Tiny-Q4_K_M.gguf": blob(1000, 9)})
    seen: list[PullProgress] = []
    path = pull(entry("Q8_0"), seen.append)
    snapshot = repo_folder(REPO) / "snapshots" / repo.commit
    assert path == snapshot / "Q8_0/Tiny-Q8_0-00001-of-00003.gguf"
    for name, data in parts.items():
        assert (snapshot / name).read_bytes() == data
    assert len(cdn_gets(hub)) == 3
    assert {p.file_index for p in seen} == {1, 2, 3}
    assert seen[-1].done == seen[-1].total == sum(len(d) for d in parts.values())
    found = find_local(entry("Q8_0"))
    assert found is not None and len(found.paths) == 3
    # a part lost from the cache makes the model not downloaded
    (snapshot / "Q8_0/Tiny-Q8_0-00002-of-00003.gguf").unlink()
    assert local_path(entry("Q8_0")) is None


def test_missing_repository(hub: HubServer) -> None:
    with pytest.raises(RepoAccessError, match=f"repository {REPO} was not found"):
        pull(entry())


def test_gated_repository(hub: HubServer) -> None:
    hub.add_repo(REPO, {"Tiny-Q4_K_M.gguf": blob(1000, 11)}, gated=True)
    with pytest.raises(RepoAccessError, match="is gated: accept its terms"):
        pull(entry())
    assert cdn_gets(hub) == []


def test_missing_quantization_names_what_exists(hub: HubServer) -> None:
    hub.add_repo(REPO, {"Tiny-Q4_K_M.gguf": blob(1000, 12), "Tiny-Q8_0.gguf": blob(1000, 13)})
    with pytest.raises(
        RepoAccessError, match=r"matches quantization Q5_K_M; available: Q4_K_M, Q8_0"
    ):
        pull(entry("Q5_K_M"))


def test_disk_room_is_checked_before_any_byte(hub: HubServer) -> None:
    hub.add_repo(REPO, {"Tiny-Q4_K_M.gguf": HubFile(blob(1000, 14), recorded_size=10**15)})
    with pytest.raises(DiskSpaceError, match=r"needs 1000000\.0 GB more"):
        pull(entry())
    assert cdn_gets(hub) == []
    assert not any(r.path.startswith(f"/{REPO}/resolve/") for r in hub.requests)


def test_files_fetched_by_huggingface_hub_itself_count(hub: HubServer) -> None:
    from huggingface_hub import hf_hub_download

    data = blob(50_000, 15)
    hub.add_repo(REPO, {"Tiny-Q4_K_M.gguf": data})
    # the library read HF_HOME when first imported; this test's cache is given explicitly
    fetched = hf_hub_download(REPO, "Tiny-Q4_K_M.gguf", endpoint=hub.url, cache_dir=hub_cache_dir())
    assert local_path(entry()) == Path(fetched)
    assert pull(entry()) == Path(fetched)


def test_remove_deletes_one_quantization_only(hub: HubServer) -> None:
    q4, q8 = blob(300_000, 16), blob(400_000, 17)
    hub.add_repo(REPO, {"Tiny-Q4_K_M.gguf": q4, "Tiny-Q8_0.gguf": q8})
    pull(entry())
    kept = pull(entry("Q8_0"))
    removed = remove(entry())
    assert (removed.files, removed.bytes_freed) == (1, len(q4))
    assert local_path(entry()) is None
    assert local_path(entry("Q8_0")) == kept and kept.read_bytes() == q8
    assert remove(entry()).files == 0
    assert remove(entry("Q8_0")).bytes_freed == len(q8)
    assert not repo_folder(REPO).exists()


def test_a_second_writer_is_refused_while_one_holds_the_file(hub: HubServer) -> None:
    from filelock import FileLock

    data = blob(100_000, 18)
    hub.add_repo(REPO, {"Tiny-Q4_K_M.gguf": data})
    sha = hashlib.sha256(data).hexdigest()
    lock = hub_cache_dir() / ".locks" / repo_folder(REPO).name / f"{sha}.lock"
    lock.parent.mkdir(parents=True)
    with FileLock(str(lock)), pytest.raises(DownloadError, match="another program"):
        pull(entry())
    assert cdn_gets(hub) == []
    assert pull(entry()).read_bytes() == data


def test_the_server_tree_listing_reads_like_the_hub(hub: HubServer) -> None:
    from huggingface_hub import HfApi
    from huggingface_hub.hf_api import RepoFile, RepoFolder

    data = blob(1000, 19)
    hub.add_repo(REPO, {"README.md": b"hi\n", "Q8_0/Tiny-Q8_0.gguf": data})
    api = HfApi(endpoint=hub.url)
    top = {item.path: item for item in api.list_repo_tree(REPO)}
    assert set(top) == {"README.md", "Q8_0"}
    assert isinstance(top["Q8_0"], RepoFolder)
    deep = {item.path: item for item in api.list_repo_tree(REPO, recursive=True)}
    model = deep["Q8_0/Tiny-Q8_0.gguf"]
    assert isinstance(model, RepoFile) and model.lfs is not None
    assert (model.lfs.sha256, model.lfs.size) == (hashlib.sha256(data).hexdigest(), len(data))
    readme = deep["README.md"]
    assert isinstance(readme, RepoFile) and readme.lfs is None and readme.size == 3
