"""What the reality tests share: which sandbox backends work on this machine (probed for
real), and a look at the processes a sandbox left behind."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from agentworld_tui.reality.sandbox import Sandbox, probe
from agentworld_tui.reality.spec import TwinSpec

NAMESPACE_BACKENDS = ("bwrap", "unshare")


def backend_or_skip(backend: str) -> str:
    """``backend`` when it works here; the test is skipped with the probe's reason when the
    kernel or the machine refuses it (no user namespaces, bubblewrap not installed)."""
    found = probe(backend)  # type: ignore[arg-type]
    if not found.works:
        pytest.skip(f"the {backend} sandbox does not work here: {found.reason}")
    return backend


def any_backend() -> str:
    for backend in NAMESPACE_BACKENDS:
        if probe(backend).works:
            return backend
    pytest.skip("no sandbox works here (neither bubblewrap nor unshare)")


def living_in(namespace: str) -> list[str]:
    """The processes (not zombies) whose pid namespace is ``namespace``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.readlink(f"/proc/{entry}/ns/pid") != namespace:
                continue
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            found.append(entry)
    return found


def leaves_nothing(box: Sandbox) -> None:
    namespace = box.namespace()
    box.close()
    assert not box.scratch.exists()
    if namespace:
        assert living_in(namespace) == []


@contextmanager
def host_listener() -> Iterator[int]:
    """A TCP port on the host's 127.0.0.1 that accepts connections, for network tests."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
                conn.close()
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        thread.join(2)
        server.close()


@contextmanager
def notes_twin_over_http(
    notebook: Path, port_file: Path
) -> Iterator[tuple[TwinSpec, subprocess.Popen[bytes]]]:
    """tests/twinserver.py over streamable HTTP on ``notebook``: its twin spec and process,
    ended (killed if it still runs) afterwards."""
    server = str(Path(__file__).resolve().parent / "twinserver.py")
    process = subprocess.Popen([sys.executable, server, "http", str(notebook), str(port_file)])
    try:
        deadline = time.monotonic() + 60
        while not port_file.exists() or not port_file.read_text():
            assert process.poll() is None, "the twin's server ended"
            assert time.monotonic() < deadline, "the twin's server did not start"
            time.sleep(0.05)
        yield TwinSpec("mcp", url=f"http://127.0.0.1:{port_file.read_text()}/mcp"), process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(10)
