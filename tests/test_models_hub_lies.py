"""A lying Hub, and links left in the cache, never make a pull or a removal touch a file
outside the cache. Every test runs the real huggingface-hub client against the Hub-shaped
server of tests/hubserver.py, made to lie."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from hubserver import HubFile, HubServer

from agentworld_tui.models.cache import find_local, hub_cache_dir, remove, repo_folder
from agentworld_tui.models.catalog import CatalogEntry
from agentworld_tui.models.download import DownloadError, pull

REPO = "tester/Tiny-AgentWorld-GGUF"
DATA = b"GGUF" + bytes(range(256)) * 40
SHA = hashlib.sha256(DATA).hexdigest()
UP_FROM_BLOBS = "../../../../"
"""From ``HF_HOME/hub/models--OWNER--NAME/blobs`` (or ``.locks/models--...``) to tmp_path."""
UP_FROM_SNAPSHOT = "../../../../../"
"""From ``HF_HOME/hub/models--OWNER--NAME/snapshots/COMMIT`` to tmp_path."""


@pytest.fixture
def hub(online_hub: HubServer) -> HubServer:
    return online_hub


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A user's folder next to the cache, with files a lying Hub would like to reach."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "secret.gguf").write_bytes(b"the user's own model")
    (folder / "victim-Q4_K_M.gguf").write_bytes(b"another model of the user's")
    return folder


def entry(quant: str = "Q4_K_M") -> CatalogEntry:
    return CatalogEntry(name=f"tiny-{quant.lower()}", repo=REPO, quant=quant, size_gb=0.001)


def tree(folder: Path) -> dict[str, tuple[bool, bytes]]:
    """Every entry under ``folder``: whether it is a link, and a regular file's bytes."""
    found: dict[str, tuple[bool, bytes]] = {}
    for root, dirs, names in os.walk(folder):
        for name in [*dirs, *names]:
            path = Path(root) / name
            data = path.read_bytes() if path.is_file() and not path.is_symlink() else b""
            found[path.relative_to(folder).as_posix()] = (path.is_symlink(), data)
    return found


def refused(hub: HubServer, bad: str, quant: str = "Q4_K_M") -> str:
    """Pull, expect a one-line refusal naming ``bad``, and nothing written anywhere."""
    everything = hub_cache_dir().parent.parent
    before = tree(everything)
    with pytest.raises(DownloadError) as info:
        pull(entry(quant))
    message = str(info.value)
    assert "\n" not in message and bad in message
    assert tree(everything) == before
    return message


def earlier_pull(hub: HubServer, files: dict[str, bytes | HubFile]) -> None:
    """An honest pull of another quantization, so the repository's cache folders exist."""
    hub.add_repo(REPO, {"Tiny-Q8_0.gguf": DATA[::-1], **files}, any_path=True)
    pull(entry("Q8_0"))
    assert (repo_folder(REPO) / "blobs").is_dir()


@pytest.mark.parametrize("field", ["lfs.sha256", "blobId"])
def test_a_digest_naming_a_file_outside_is_refused(
    hub: HubServer, outside: Path, field: str
) -> None:
    bad = UP_FROM_BLOBS + "outside/secret.gguf"
    lfs = field == "lfs.sha256"
    lying = HubFile(
        DATA,
        lfs=lfs,
        recorded_sha256=bad if lfs else None,
        recorded_blob_id=None if lfs else bad,
    )
    earlier_pull(hub, {"Tiny-Q4_K_M.gguf": lying})
    assert field in refused(hub, bad)
    assert (outside / "secret.gguf").read_bytes() == b"the user's own model"


def test_a_digest_naming_a_new_folder_outside_is_refused(hub: HubServer, outside: Path) -> None:
    bad = UP_FROM_BLOBS + "outside/made-by-the-hub/x"
    earlier_pull(hub, {"Tiny-Q4_K_M.gguf": HubFile(DATA, recorded_sha256=bad)})
    refused(hub, bad)
    assert not (outside / "made-by-the-hub").exists()


@pytest.mark.parametrize("bad", ["", "0" * 63, "0" * 65, "g" * 64, SHA[:63] + "/", SHA + "\x00"])
def test_a_digest_that_is_not_a_sha256_is_refused(hub: HubServer, outside: Path, bad: str) -> None:
    hub.add_repo(REPO, {}).raw_siblings.append(
        {
            "rfilename": "Tiny-Q4_K_M.gguf",
            "size": len(DATA),
            "blobId": "0" * 40,
            "lfs": {"sha256": bad, "size": len(DATA), "pointerSize": 134},
        }
    )
    message = refused(hub, repr(bad))
    assert "lfs.sha256" in message and "\x00" not in message


@pytest.mark.parametrize(
    "name",
    [
        UP_FROM_SNAPSHOT + "outside/victim-Q4_K_M.gguf",
        "Q4_K_M/../" + UP_FROM_SNAPSHOT + "outside/victim-Q4_K_M.gguf",
        "ABSOLUTE",
        "sub\\..\\..\\victim-Q4_K_M.gguf",
        "C:/victim-Q4_K_M.gguf",
        "sub//victim-Q4_K_M.gguf",
        "./victim-Q4_K_M.gguf",
        "sub/\x00/victim-Q4_K_M.gguf",
        "\x1b]0;owned\x07victim-Q4_K_M.gguf",
        "\u202evictim-Q4_K_M.gguf",
    ],
)
def test_a_file_name_that_leaves_the_snapshot_is_refused(
    hub: HubServer, outside: Path, name: str
) -> None:
    if name == "ABSOLUTE":
        name = str(outside / "victim-Q4_K_M.gguf")
    earlier_pull(hub, {name: DATA})
    message = refused(hub, repr(name)[1:-1][:40])
    assert (outside / "victim-Q4_K_M.gguf").read_bytes() == b"another model of the user's"
    assert "\x1b" not in message and "\x00" not in message and "\u202e" not in message


@pytest.mark.parametrize(
    "commit",
    [
        UP_FROM_SNAPSHOT[:-3] + "outside/made-by-the-hub",
        "ABSOLUTE",
        "main",
        "0" * 39,
        "0" * 41,
        "",
    ],
)
def test_a_commit_that_is_not_a_commit_id_is_refused(
    hub: HubServer, outside: Path, commit: str
) -> None:
    if commit == "ABSOLUTE":
        commit = str(outside / "made-by-the-hub")
    repo = hub.add_repo(REPO, {"Tiny-Q4_K_M.gguf": DATA}, any_path=True)
    repo.commit = commit
    refused(hub, repr(commit)[1:-1][:40] if commit else "commit")


@pytest.mark.parametrize("size", [-1, 1.5, "12", True, 10**30, float("inf")])
def test_a_size_that_is_not_a_byte_count_is_refused(
    hub: HubServer, outside: Path, size: object
) -> None:
    repo = hub.add_repo(REPO, {})
    repo.raw_siblings.append(
        {
            "rfilename": "Tiny-Q4_K_M.gguf",
            "size": size,
            "blobId": "0" * 40,
            "lfs": {"sha256": SHA, "size": size, "pointerSize": 134},
        }
    )
    refused(hub, "size")


@pytest.mark.parametrize(
    "sibling",
    [
        {"size": 3},
        {"rfilename": 7},
        {"rfilename": "Tiny-Q4_K_M.gguf", "lfs": "yes"},
        {"rfilename": "Tiny-Q4_K_M.gguf", "lfs": {"size": 3}},
    ],
)
def test_a_listing_huggingface_hub_cannot_read_is_one_line(
    hub: HubServer, outside: Path, sibling: dict[str, object]
) -> None:
    hub.add_repo(REPO, {"Tiny-Q4_K_M.gguf": DATA}).raw_siblings.append(sibling)
    refused(hub, REPO)


def plant_link(link: Path, target: Path) -> None:
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target)


def test_a_snapshot_linked_out_of_the_cache_is_not_written_through(
    hub: HubServer, outside: Path
) -> None:
    repo = hub.add_repo(REPO, {"victim-Q4_K_M.gguf": DATA})
    snapshot = repo_folder(REPO) / "snapshots" / repo.commit
    plant_link(snapshot, outside)
    before = tree(outside)
    with pytest.raises(DownloadError, match="symbolic link") as info:
        pull(entry())
    assert "\n" not in str(info.value)
    assert tree(outside) == before
    assert not (repo_folder(REPO) / "blobs").exists()


def test_a_blobs_folder_linked_out_of_the_cache_is_not_written_through(
    hub: HubServer, outside: Path
) -> None:
    hub.add_repo(REPO, {"Tiny-Q4_K_M.gguf": DATA})
    plant_link(repo_folder(REPO) / "blobs", outside)
    before = tree(outside)
    with pytest.raises(DownloadError, match="symbolic link"):
        pull(entry())
    assert tree(outside) == before
    assert not (repo_folder(REPO) / "snapshots").exists()


def test_a_blob_linked_out_of_the_cache_is_not_taken_as_downloaded(
    hub: HubServer, outside: Path
) -> None:
    """The listing is honest; the blob it names is a link out of the cache."""
    hub.add_repo(REPO, {"Tiny-Q4_K_M.gguf": DATA})
    plant_link(repo_folder(REPO) / "blobs" / SHA, outside / "secret.gguf")
    before = tree(outside)
    with pytest.raises(DownloadError, match="symbolic link"):
        pull(entry())
    assert tree(outside) == before
    assert not (repo_folder(REPO) / "snapshots").exists()


def test_rm_never_deletes_through_a_linked_snapshot(outside: Path) -> None:
    plant_link(repo_folder(REPO) / "snapshots" / ("a" * 40), outside)
    before = tree(outside)
    assert find_local(entry()) is None
    remove(entry())
    assert tree(outside) == before


def test_rm_never_deletes_the_target_of_a_pointer_that_leaves_the_cache(outside: Path) -> None:
    """A snapshot pointer aimed out of the cache, as a lying Hub made one before this check."""
    snapshot = repo_folder(REPO) / "snapshots" / ("b" * 40)
    plant_link(snapshot / "Tiny-Q4_K_M.gguf", outside / "secret.gguf")
    plant_link(snapshot / "Tiny-Q8_0.gguf", Path(os.path.relpath(outside / "x.gguf", snapshot)))
    assert find_local(entry()) is None
    before = tree(outside)
    removed = remove(entry())
    assert tree(outside) == before
    assert removed.files == 1 and removed.bytes_freed == 0
    assert not (snapshot / "Tiny-Q4_K_M.gguf").is_symlink()


def test_rm_never_deletes_through_a_blob_that_is_a_link(hub: HubServer, outside: Path) -> None:
    hub.add_repo(REPO, {"Tiny-Q4_K_M.gguf": DATA})
    path = pull(entry())
    blob = repo_folder(REPO) / "blobs" / SHA
    blob.unlink()
    plant_link(blob, outside / "secret.gguf")
    before = tree(outside)
    assert find_local(entry()) is None
    remove(entry())
    assert tree(outside) == before
    assert not path.is_symlink()


def test_rm_refuses_a_repository_folder_linked_out_of_the_cache(outside: Path) -> None:
    copy = outside / "copy"
    (copy / "snapshots" / ("c" * 40)).mkdir(parents=True)
    (copy / "snapshots" / ("c" * 40) / "Tiny-Q4_K_M.gguf").write_bytes(b"kept")
    plant_link(repo_folder(REPO), copy)
    before = tree(outside)
    with pytest.raises(OSError, match="symbolic link"):
        remove(entry())
    assert tree(outside) == before


def test_an_honest_pull_and_rm_still_work_with_a_linked_cache_root(
    hub: HubServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cache folder that is itself a link (moved to a bigger disk) is the user's choice."""
    real = tmp_path / "big-disk" / "hub"
    real.mkdir(parents=True)
    plant_link(tmp_path / "linked-hub", real)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "linked-hub"))
    hub.add_repo(REPO, {"Tiny-Q4_K_M.gguf": DATA})
    path = pull(entry())
    assert path.read_bytes() == DATA
    assert remove(entry()).bytes_freed == len(DATA)
    assert list(real.iterdir()) in ([], [real / ".locks"])


HOSTILE = "\x1b]0;owned\x07\x1b[2J\u202e\x9b31m"


def test_hub_names_quoted_in_an_error_are_sanitized(hub: HubServer) -> None:
    """An incomplete split file's name reaches the message: without its escapes."""
    hub.add_repo(REPO, {f"{HOSTILE}Tiny-Q8_0-00001-of-00002.gguf": DATA})
    with pytest.raises(DownloadError, match="incomplete") as info:
        pull(entry("Q8_0"))
    message = str(info.value)
    assert "Tiny-Q8_0" in message
    assert not set(message) & set("\x1b\x07\u202e\x9b")
