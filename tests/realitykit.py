"""What the reality tests share: which sandbox backends work on this machine (probed for
real), and a look at the processes a sandbox left behind."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from agentworld_tui.reality.sandbox import Sandbox, probe

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
