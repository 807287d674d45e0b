"""A small Hugging Face Hub on 127.0.0.1, for download tests.

It answers the requests huggingface-hub makes, laid out as the real Hub lays them out:

- ``GET /api/models/OWNER/NAME[/revision/REV][?blobs=true]``: repository info with its
  commit (``sha``) and ``siblings`` (with ``size``, ``blobId`` and ``lfs`` when blobs=true);
- ``GET /api/models/OWNER/NAME/tree/REV[/PATH]``: the file tree with LFS oid and size;
- ``HEAD|GET /OWNER/NAME/resolve/REV/PATH``: small git files are served here with their git
  blob id as ETag; LFS files answer ``302`` to a separate CDN origin with ``X-Linked-Etag``
  (the sha256), ``X-Linked-Size`` and ``X-Repo-Commit``;
- errors carry ``X-Error-Code`` (RepoNotFound, GatedRepo, RevisionNotFound, EntryNotFound)
  as huggingface-hub expects.

The CDN (a second listener, another origin) serves LFS bytes with ``Range`` support. Faults
for tests: a file can record a size or sha256 other than its bytes, serve different bytes,
drop the connection after N bytes on its first GET, or stall after N bytes until released.

A lying Hub, for the tests of what a client may trust: the listing can give any string as a
file's name, sha256, blob id or the repository's commit, and add raw sibling objects that
huggingface-hub cannot parse. Because a client normalises ``..`` out of a URL, a repository
added with ``any_path=True`` answers a resolve request that matches no route for the listed
file whose name ends in the requested last segment, so a lying name is still served.
Every request is logged for assertions. Loops are bounded; stalls time out.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import socket
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

STALL_LIMIT_S = 30.0


def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


@dataclass
class HubFile:
    data: bytes
    lfs: bool = True
    recorded_size: int | None = None
    """Size the listing reports (default: the real size)."""
    recorded_sha256: str | None = None
    """sha256 the listing reports (default: the sha256 of ``data``)."""
    serve: bytes | None = None
    """Bytes actually sent (default: ``data``); differing bytes simulate corruption."""
    drop_first_after: int | None = None
    """On the first GET, send this many body bytes, then drop the connection."""
    stall_after: int | None = None
    """On every GET until ``HubServer.release()``, send this many bytes, then wait."""
    recorded_blob_id: str | None = None
    """git blob id the listing reports (default: that of ``data``)."""
    gets: int = 0

    @property
    def size(self) -> int:
        return self.recorded_size if self.recorded_size is not None else len(self.data)

    @property
    def sha256(self) -> str:
        return self.recorded_sha256 or hashlib.sha256(self.data).hexdigest()

    @property
    def body(self) -> bytes:
        return self.serve if self.serve is not None else self.data

    @property
    def blob_id(self) -> str:
        return (
            self.recorded_blob_id if self.recorded_blob_id is not None else git_blob_id(self.data)
        )


@dataclass
class HubRepo:
    repo_id: str
    files: dict[str, HubFile]
    gated: bool = False
    commit: str = ""
    any_path: bool = False
    """Serve a listed file at any URL ending in its last name segment (a lying Hub)."""
    raw_siblings: list[Any] = field(default_factory=list)
    """Sibling objects appended to the listing as they are (malformed ones included)."""

    def __post_init__(self) -> None:
        if not self.commit:
            self.commit = hashlib.sha1(self.repo_id.encode(), usedforsecurity=False).hexdigest()


@dataclass(frozen=True)
class Request:
    origin: str
    """``hub`` or ``cdn``."""
    method: str
    path: str
    range: str | None
    authorized: bool


@dataclass
class _State:
    repos: dict[str, HubRepo] = field(default_factory=dict)
    log: list[Request] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    released: threading.Event = field(default_factory=threading.Event)
    stalled: threading.Event = field(default_factory=threading.Event)
    cdn_url: str = ""

    def lfs_file(self, sha256: str) -> HubFile | None:
        for repo in self.repos.values():
            for hub_file in repo.files.values():
                if hub_file.lfs and hub_file.sha256 == sha256:
                    return hub_file
        return None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "TinyHub/1.0"
    origin = "hub"

    def log_message(self, format: str, *args: Any) -> None:
        return

    @property
    def state(self) -> _State:
        state: _State = self.server.state  # type: ignore[attr-defined]
        return state

    def _record(self) -> None:
        with self.state.lock:
            self.state.log.append(
                Request(
                    self.origin,
                    self.command,
                    self.path,
                    self.headers.get("Range"),
                    "authorization" in {k.lower() for k in self.headers},
                )
            )

    def do_GET(self) -> None:
        self._record()
        self.route()

    def do_HEAD(self) -> None:
        self._record()
        self.route()

    def route(self) -> None:
        raise NotImplementedError

    def send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def send_json(self, payload: Any, headers: dict[str, str] | None = None) -> None:
        body = json.dumps(payload).encode()
        self.send(200, body, {"Content-Type": "application/json", **(headers or {})})

    def error(
        self, status: int, code: str, message: str, extra: dict[str, str] | None = None
    ) -> None:
        body = json.dumps({"error": message}).encode()
        headers = {"X-Error-Code": code, "X-Error-Message": message}
        headers["Content-Type"] = "application/json"
        self.send(status, body, {**headers, **(extra or {})})


class _HubHandler(_Handler):
    origin = "hub"

    def route(self) -> None:
        parts = urlsplit(self.path)
        path = unquote(parts.path)
        query = parse_qs(parts.query)
        api = re.fullmatch(r"/api/models/([^/]+/[^/]+)(?:/(revision|tree)/([^/]+)(/.*)?)?", path)
        if api and self.command == "GET":
            self.api(
                api.group(1), api.group(2), api.group(3), (api.group(4) or "").strip("/"), query
            )
            return
        resolve = re.fullmatch(r"/([^/]+/[^/]+)/resolve/([^/]+)/(.+)", path)
        if resolve:
            self.resolve(resolve.group(1), resolve.group(2), resolve.group(3))
            return
        if not self.resolve_anywhere(path):
            self.send(404, b"not found")

    def resolve_anywhere(self, path: str) -> bool:
        """A lying repository's file asked for at a URL the client normalised."""
        last = path.rsplit("/", 1)[-1]
        for repo in self.state.repos.values():
            if not repo.any_path:
                continue
            for name in repo.files:
                if name.rsplit("/", 1)[-1] == last:
                    self.resolve(repo.repo_id, repo.commit, name)
                    return True
        return False

    def repo(self, repo_id: str) -> HubRepo | None:
        repo = self.state.repos.get(repo_id)
        if repo is None:
            self.error(401, "RepoNotFound", "Repository not found")
        return repo

    def revision_ok(self, repo: HubRepo, revision: str) -> bool:
        if revision in ("main", repo.commit):
            return True
        self.error(404, "RevisionNotFound", f"Invalid rev id: {revision}")
        return False

    def api(
        self,
        repo_id: str,
        kind: str | None,
        revision: str | None,
        sub: str,
        query: dict[str, list[str]],
    ) -> None:
        repo = self.repo(repo_id)
        if repo is None or (revision is not None and not self.revision_ok(repo, revision)):
            return
        if kind == "tree":
            recursive = query.get("recursive", ["false"])[0].lower() == "true"
            self.send_json(self.tree(repo, sub, recursive))
            return
        blobs = query.get("blobs", ["false"])[0].lower() == "true"
        siblings: list[dict[str, Any]] = []
        for path, hub_file in sorted(repo.files.items()):
            sibling: dict[str, Any] = {"rfilename": path}
            if blobs:
                sibling["size"] = hub_file.size
                sibling["blobId"] = hub_file.blob_id
                if hub_file.lfs:
                    sibling["lfs"] = {
                        "sha256": hub_file.sha256,
                        "size": hub_file.size,
                        "pointerSize": 134,
                    }
            siblings.append(sibling)
        siblings.extend(repo.raw_siblings)
        self.send_json(
            {
                "_id": hashlib.md5(repo_id.encode(), usedforsecurity=False).hexdigest()[:24],
                "id": repo_id,
                "modelId": repo_id,
                "author": repo_id.split("/")[0],
                "sha": repo.commit,
                "private": False,
                "gated": "manual" if repo.gated else False,
                "disabled": False,
                "tags": ["gguf"],
                "siblings": siblings,
            }
        )

    def tree(self, repo: HubRepo, sub: str, recursive: bool) -> list[dict[str, Any]]:
        prefix = f"{sub}/" if sub else ""
        items: list[dict[str, Any]] = []
        folders: set[str] = set()
        for path, hub_file in sorted(repo.files.items()):
            if not path.startswith(prefix):
                continue
            rest = path[len(prefix) :]
            if "/" in rest:
                parts = rest.split("/")[:-1]
                depth = len(parts) if recursive else 1
                folders.update(prefix + "/".join(parts[: i + 1]) for i in range(depth))
                if not recursive:
                    continue
            item: dict[str, Any] = {
                "type": "file",
                "oid": git_blob_id(hub_file.data),
                "size": hub_file.size,
                "path": path,
            }
            if hub_file.lfs:
                item["lfs"] = {"oid": hub_file.sha256, "size": hub_file.size, "pointerSize": 134}
            items.append(item)
        for folder in sorted(folders):
            items.append(
                {
                    "type": "directory",
                    "oid": git_blob_id(folder.encode()),
                    "size": 0,
                    "path": folder,
                }
            )
        return items

    def resolve(self, repo_id: str, revision: str, path: str) -> None:
        repo = self.repo(repo_id)
        if repo is None or not self.revision_ok(repo, revision):
            return
        hub_file = repo.files.get(path)
        if hub_file is None and repo.any_path and self.resolve_anywhere(path):
            return
        commit = {"X-Repo-Commit": repo.commit}
        if repo.gated and not self.headers.get("Authorization"):
            self.error(401, "GatedRepo", f"Access to model {repo_id} is restricted.", commit)
            return
        if hub_file is None:
            self.error(404, "EntryNotFound", f"{path} does not exist", commit)
            return
        if not hub_file.lfs:
            self.send(
                200,
                hub_file.body,
                {**commit, "ETag": f'"{git_blob_id(hub_file.data)}"', "Accept-Ranges": "bytes"},
            )
            return
        location = f"{self.state.cdn_url}/lfs/{hub_file.sha256}?name={quote(path.split('/')[-1])}"
        self.send(
            302,
            b"",
            {
                **commit,
                "Location": location,
                "ETag": f'"{git_blob_id(hub_file.data)}"',
                "X-Linked-Etag": f'"{hub_file.sha256}"',
                "X-Linked-Size": str(hub_file.size),
            },
        )


class _CdnHandler(_Handler):
    origin = "cdn"

    def route(self) -> None:
        match = re.fullmatch(r"/lfs/([0-9a-f]{64})", urlsplit(self.path).path)
        hub_file = self.state.lfs_file(match.group(1)) if match else None
        if hub_file is None:
            self.send(404, b"no such object")
            return
        body = hub_file.body
        start, end = 0, len(body) - 1
        status = 200
        wanted = self.headers.get("Range")
        if wanted:
            found = re.fullmatch(r"bytes=(\d+)-(\d*)", wanted.strip())
            if not found or int(found.group(1)) >= len(body):
                self.send(416, b"", {"Content-Range": f"bytes */{len(body)}"})
                return
            start = int(found.group(1))
            end = min(int(found.group(2)), end) if found.group(2) else end
            status = 206
        payload = body[start : end + 1]
        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("ETag", f'"{hub_file.sha256}"')
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{end}/{len(body)}")
        self.end_headers()
        if self.command == "HEAD":
            return
        with self.state.lock:
            hub_file.gets += 1
            first = hub_file.gets == 1
        cut = None
        if first and hub_file.drop_first_after is not None:
            cut = hub_file.drop_first_after
        if hub_file.stall_after is not None and not self.state.released.is_set():
            self.wfile.write(payload[: hub_file.stall_after])
            self.wfile.flush()
            self.state.stalled.set()
            self.state.released.wait(STALL_LIMIT_S)
            self.close_connection = True
            return
        if cut is not None and cut < len(payload):
            self.wfile.write(payload[:cut])
            self.wfile.flush()
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
            return
        self.wfile.write(payload)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, handler: type[_Handler], state: _State) -> None:
        super().__init__(("127.0.0.1", 0), handler)
        self.state = state


class HubServer:
    """The hub and its CDN, each on a free port of 127.0.0.1, in background threads."""

    def __init__(self) -> None:
        self.state = _State()
        self._hub = _Server(_HubHandler, self.state)
        self._cdn = _Server(_CdnHandler, self.state)
        self.url = f"http://127.0.0.1:{self._hub.server_address[1]}"
        self.state.cdn_url = f"http://127.0.0.1:{self._cdn.server_address[1]}"
        self._threads: list[threading.Thread] = []

    def add_repo(
        self,
        repo_id: str,
        files: dict[str, bytes | HubFile],
        *,
        gated: bool = False,
        commit: str = "",
        any_path: bool = False,
    ) -> HubRepo:
        repo = HubRepo(
            repo_id,
            {
                p: f if isinstance(f, HubFile) else HubFile(f, lfs=p.endswith(".gguf"))
                for p, f in files.items()
            },
            gated=gated,
            commit=commit,
            any_path=any_path,
        )
        self.state.repos[repo_id] = repo
        return repo

    @property
    def requests(self) -> list[Request]:
        with self.state.lock:
            return list(self.state.log)

    def release(self) -> None:
        """Let stalled downloads go on (and stop stalling)."""
        self.state.released.set()

    def wait_stalled(self, timeout: float = 30.0) -> bool:
        return self.state.stalled.wait(timeout)

    def start(self) -> HubServer:
        for server in (self._hub, self._cdn):
            thread = threading.Thread(
                target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True
            )
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self) -> None:
        self.release()
        for server in (self._hub, self._cdn):
            server.shutdown()
            server.server_close()
        for thread in self._threads:
            thread.join(timeout=5)

    def __enter__(self) -> HubServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main() -> None:
    """Serve a demo repository until interrupted (for trying the CLI by hand)."""
    import sys
    import time

    server = HubServer()
    server.add_repo(
        "demo/tiny-GGUF",
        {"README.md": b"# demo\n", "tiny-Q4_K_M.gguf": b"GGUF" + bytes(4096)},
    )
    with server:
        print(f"HF_ENDPOINT={server.url}", file=sys.stderr)
        try:
            while True:
                time.sleep(1)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
