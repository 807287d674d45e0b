"""The sandbox for real commands, on this machine's bubblewrap and unshare: a seeded copy,
no write outside it (a test tries every way it can), no network unless asked, commands
bounded in time and output, nothing left running after close; without a working sandbox, one
clear line, and the host only when asked by name."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
from realitykit import NAMESPACE_BACKENDS, backend_or_skip, host_listener, leaves_nothing

from agentworld_tui.reality.sandbox import (
    SANDBOX_UID,
    BoundedOutput,
    Sandbox,
    SandboxError,
    SandboxOptions,
    choose_backend,
    clear_probes,
    probe,
)


@pytest.fixture
def seed(tmp_path: Path) -> Path:
    folder = tmp_path / "seed"
    (folder / "src").mkdir(parents=True)
    (folder / "src" / "notes.txt").write_text("hello from the seed\n")
    (folder / "run.sh").write_text("echo ran\n")
    (folder / "run.sh").chmod(0o755)
    return folder


@pytest.fixture(params=NAMESPACE_BACKENDS)
def box(request: pytest.FixtureRequest, seed: Path) -> Sandbox:
    backend = backend_or_skip(request.param)
    opened = Sandbox.open(SandboxOptions(seed=seed, workdir="/app", backend=backend))  # type: ignore[arg-type]
    request.addfinalizer(opened.close)
    return opened


def test_the_sandbox_holds_a_copy_of_the_seed_and_writes_land_only_in_its_folder(
    box: Sandbox, seed: Path
) -> None:
    done = box.run(
        [
            "sh",
            "-c",
            "pwd; cat src/notes.txt; ./run.sh; echo changed > src/notes.txt; echo new > made.txt",
        ],
        timeout=20,
    )
    assert done.exit_code == 0, done.output
    assert done.output.splitlines() == ["/app", "hello from the seed", "ran"]
    assert (box.scratch / "work" / "made.txt").read_text() == "new\n"
    assert (box.scratch / "work" / "src" / "notes.txt").read_text() == "changed\n"
    assert (seed / "src" / "notes.txt").read_text() == "hello from the seed\n"
    assert not (seed / "made.txt").exists()


def test_nothing_outside_the_folder_can_be_written_whatever_is_tried(
    box: Sandbox, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim.txt").write_text("untouched\n")
    (box.scratch / "work" / "escape").symlink_to(outside)
    attempts = [
        f"echo x > {outside}/victim.txt",
        f"echo x > {outside}/new.txt",
        "echo x > escape/victim.txt",
        "echo x > /usr/agentworld-twin-test",
        "echo x > /etc/agentworld-twin-test",
        "echo x > /agentworld-twin-test",
        "mount -o remount,rw /usr && echo x > /usr/agentworld-twin-test",
        "mount -t tmpfs none /usr",
        "unshare -rm sh -c 'mount -o remount,rw /usr && echo x > /usr/agentworld-twin-test'",
        "cd / && mkdir -p jail && chroot jail",
        "echo 1 > /proc/sys/kernel/printk",
        "ls /work /root/.. /home 2>/dev/null | grep -q . && echo x > /home/agentworld-twin-test",
    ]
    for attempt in attempts:
        done = box.run(["sh", "-c", attempt], timeout=20)
        assert done.exit_code != 0, (attempt, done.output)
    assert (outside / "victim.txt").read_text() == "untouched\n"
    assert sorted(p.name for p in outside.iterdir()) == ["victim.txt"]
    for path in ("/usr/agentworld-twin-test", "/etc/agentworld-twin-test", "/agentworld-twin-test"):
        assert not os.path.exists(path)


def test_the_host_s_own_folders_are_not_there(box: Sandbox, tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("host secret\n")
    done = box.run(["sh", "-c", f"cat {tmp_path}/secret.txt; ls /home /srv /work 2>&1"], timeout=20)
    assert "host secret" not in done.output
    assert done.exit_code != 0


def test_the_root_inside_has_no_capability_and_sees_only_its_own_processes(box: Sandbox) -> None:
    script = (
        "id -u; grep CapEff /proc/self/status; ls /proc | grep -c '^[0-9]'; cat /proc/self/uid_map"
    )
    done = box.run(["sh", "-c", script], timeout=20)
    uid, caps, processes, uid_map = done.output.split("\n")[:4]
    assert uid == "0"
    assert caps.split()[1] == "0000000000000000"
    assert int(processes) < 10
    inside, outside, _ = uid_map.split()
    assert inside == "0"
    # the root inside is this user outside or, when this user is root, an unprivileged one
    assert int(outside) == (SANDBOX_UID if os.geteuid() == 0 else os.geteuid())


@pytest.mark.parametrize("backend", NAMESPACE_BACKENDS)
def test_there_is_no_network_unless_it_is_asked_for(backend: str, tmp_path: Path) -> None:
    backend_or_skip(backend)
    with host_listener() as port:
        knock = ["bash", "-c", f"echo hi > /dev/tcp/127.0.0.1/{port}"]
        closed = Sandbox.open(SandboxOptions(backend=backend))  # type: ignore[arg-type]
        try:
            assert closed.run(knock, timeout=20).exit_code != 0
        finally:
            closed.close()
        backend_or_skip(backend)
        if not probe(backend, network=True).works:  # type: ignore[arg-type]
            pytest.skip(f"{backend} with the host's network does not work here")
        opened = Sandbox.open(SandboxOptions(backend=backend, network=True))  # type: ignore[arg-type]
        try:
            done = opened.run(knock, timeout=20)
            assert done.exit_code == 0, done.output
        finally:
            opened.close()


def test_a_command_past_its_time_is_stopped_with_everything_it_started(box: Sandbox) -> None:
    began = time.monotonic()
    done = box.run(["sh", "-c", "sleep 300 & sleep 300 & echo started; wait"], timeout=1)
    assert time.monotonic() - began < 10
    assert done.timed_out and done.exit_code is None
    assert "started" in done.output
    left = box.run(["sh", "-c", "ps -eo args | grep -c '^sleep 300' || true"], timeout=20)
    assert left.output.strip() == "0"


def test_megabytes_of_output_keep_their_start_and_end(box: Sandbox) -> None:
    done = box.run(
        ["sh", "-c", "echo FIRST; yes filler | head -c 20000000; echo; echo LAST"],
        timeout=60,
        max_output=10_000,
    )
    assert done.exit_code == 0
    assert done.truncated
    assert done.output.startswith("FIRST\n")
    assert done.output.rstrip().endswith("LAST")
    assert "bytes of output cut" in done.output
    assert len(done.output) < 10_200


def test_close_leaves_no_process_and_no_folder(box: Sandbox) -> None:
    box.run(["sh", "-c", "nohup sleep 300 >/dev/null 2>&1 &"], timeout=20)
    server = box.popen(["sleep", "300"])
    assert box.alive()
    leaves_nothing(box)
    assert server.wait(10) is not None
    assert not box.alive()


def test_a_sandbox_opened_on_a_passing_thread_outlives_it(seed: Path) -> None:
    import threading

    backend = backend_or_skip("bwrap")
    opened: list[Sandbox] = []
    thread = threading.Thread(
        target=lambda: opened.append(Sandbox.open(SandboxOptions(seed=seed, backend=backend)))  # type: ignore[arg-type]
    )
    thread.start()
    thread.join()
    try:
        time.sleep(0.3)
        assert opened[0].alive()
        assert opened[0].run(["true"], timeout=20).exit_code == 0
    finally:
        leaves_nothing(opened[0])


def test_without_a_working_sandbox_it_refuses_in_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    clear_probes()
    try:
        with pytest.raises(SandboxError) as refused:
            Sandbox.open(SandboxOptions(image="debian:12"))
        message = str(refused.value)
        assert "\n" not in message
        assert "no sandbox works here" in message
        assert "bwrap: bwrap is not installed" in message
        assert "--twin-on-host" in message
    finally:
        monkeypatch.undo()
        clear_probes()


def test_the_host_is_used_only_when_asked_by_name(seed: Path) -> None:
    with pytest.raises(SandboxError, match="unsafe_host"):
        choose_backend(SandboxOptions(backend="host"))
    box = Sandbox.open(SandboxOptions(seed=seed, backend="host", unsafe_host=True))
    try:
        assert box.backend == "host"
        done = box.run(["sh", "-c", "pwd; cat src/notes.txt"], timeout=20)
        assert done.output.splitlines() == [str(box.scratch / "work"), "hello from the seed"]
    finally:
        box.close()
    assert not box.scratch.exists()


def test_a_container_needs_an_engine_that_works_not_just_its_client() -> None:
    for engine in ("docker", "podman"):
        found = probe(engine, image="debian:12")  # type: ignore[arg-type]
        if shutil.which(engine) is None:
            assert found.reason == f"{engine} is not installed"
        elif not found.works:
            assert found.reason, engine
    assert not probe("docker").works  # no image named: the container backends are skipped


def test_the_seed_must_be_a_folder(tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match="not a folder"):
        Sandbox.open(SandboxOptions(seed=tmp_path / "missing"))


def test_bounded_output_keeps_head_and_tail_exactly() -> None:
    kept = BoundedOutput(10)
    for chunk in (b"abc", b"defgh", b"ijklmnop", b"qrst"):
        kept.add(chunk)
    assert kept.total == 20
    assert kept.truncated
    assert kept.text() == "abcde\n[... 10 bytes of output cut ...]\npqrst"
    small = BoundedOutput(10)
    small.add(b"abc")
    assert (small.text(), small.truncated) == ("abc", False)
