"""A sandbox for real commands: a scratch folder seeded from a folder the user names, no
network unless asked, no way to write outside the folder, torn down at the end.

Backends, tried in this order and each probed for real (a small sandbox is opened and a
write outside its folder must fail) before it is chosen:

- ``podman`` / ``docker``: a container of an image the user names (a container needs an
  image holding the twin's tools; the project cannot assume one, so without ``image`` these
  two are skipped). A client without a working engine is detected: the probe runs a
  container.
- ``bwrap`` (bubblewrap): new user, mount, pid, ipc, uts and (unless ``network``) net
  namespaces; the host's system folders bound read-only, a fresh /proc and /dev.
- ``unshare`` (util-linux): the same namespaces made by hand, the same read-only layout,
  entered by ``pivot_root`` (not ``chroot``, which a root inside could leave).

Every command runs inside through ``nsenter`` into the one sandbox (so a check sees the
processes and files the agent left), without any capability (``setpriv``), so the root
inside cannot remount the read-only folders. When the host user is root, the sandbox runs
as an unprivileged user id (``SANDBOX_UID``): the root inside is nobody outside.

Without a working sandbox, ``Sandbox.open`` refuses with one line; ``unsafe_host`` (whose
name says what it does) runs the commands on this machine itself, in the scratch folder.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import select
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal

from agentworld_tui.world.sanitize import one_line

Backend = Literal["podman", "docker", "bwrap", "unshare", "host"]
BackendChoice = Literal["auto", "podman", "docker", "bwrap", "unshare", "host"]
SANDBOX_BACKENDS: tuple[Backend, ...] = ("podman", "docker", "bwrap", "unshare")

SANDBOX_UID = 2_000_000_000
"""The host user id a sandbox runs as when the host user is root (unprivileged: it owns
nothing on the host but the scratch folder)."""
SYSTEM_FOLDERS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
"""The host folders a namespace sandbox sees, read-only; nothing else of the host is there."""
RUN_DIR = "/run/twin"
"""Inside: where the twins keep their sockets (the scratch folder's run/)."""
HOME = "/root"
INSIDE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
START_SECONDS = 20.0
"""How long a sandbox may take to come up."""
KILL_GRACE = 5.0
"""Seconds past a command's own limit before the host side gives up on it."""
CLOSE_SECONDS = 60.0
"""How long a second caller of ``close`` waits for the first to finish."""
MAX_OUTPUT = 1_000_000
"""Bytes of a command's output kept (its start and its end); the rest is counted, not kept."""
MAX_PROCESSES = 4096
"""The most processes the sandbox user may have at once, where it is a user of its own."""


SCRATCH_PREFIX = "agentworld-twin-"
"""Scratch folders are named ``agentworld-twin-<pid>-<random>`` after the process that made
them, so one left by a killed process can be told and removed."""


class SandboxError(Exception):
    """No sandbox could be opened, or it broke; the message is one line."""


@dataclass(frozen=True)
class SandboxOptions:
    """What sandbox to open. ``seed`` is copied (never touched); ``workdir`` is where the
    copy is inside, and where commands start."""

    seed: Path | None = None
    workdir: str = "/work"
    network: bool = False
    backend: BackendChoice = "auto"
    unsafe_host: bool = False
    """Run on this machine itself (in the scratch folder, with its network and its files)
    when no sandbox works; with ``backend="host"``, at once."""
    image: str | None = None
    """The container image for podman and docker."""
    hostname: str = "twin"
    scratch_parent: Path | None = None
    """Where the scratch folder is made (the system's temporary folder by default)."""


@dataclass(frozen=True)
class CommandResult:
    exit_code: int | None
    """None when the command was stopped for time or did not run."""
    output: str
    """stdout and stderr together, decoded; cut in the middle past ``max_output`` bytes."""
    timed_out: bool = False
    truncated: bool = False
    elapsed: float = 0.0


@dataclass(frozen=True)
class BackendProbe:
    backend: Backend
    works: bool
    reason: str
    """Why it does not work (one line); empty when it works."""


class BoundedOutput:
    """The start and the end of a byte stream, at most ``limit`` bytes kept in all."""

    def __init__(self, limit: int = MAX_OUTPUT) -> None:
        self.limit = max(2, limit)
        self._head = bytearray()
        self._tail: deque[bytes] = deque()
        self._tail_size = 0
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        half = self.limit // 2
        room = half - len(self._head)
        if room > 0:
            self._head += chunk[:room]
            chunk = chunk[room:]
        if not chunk:
            return
        self._tail.append(chunk)
        self._tail_size += len(chunk)
        while self._tail and self._tail_size - len(self._tail[0]) >= self.limit - half:
            self._tail_size -= len(self._tail.popleft())

    @property
    def truncated(self) -> bool:
        return self.total > len(self._head) + self._tail_size or self.total > self.limit

    def text(self) -> str:
        tail = b"".join(self._tail)
        keep = self.limit - self.limit // 2
        cut = self.total - len(self._head) - min(len(tail), keep)
        if len(tail) > keep:
            tail = tail[-keep:]
        head = bytes(self._head).decode("utf-8", "replace")
        end = tail.decode("utf-8", "replace")
        if cut > 0:
            return f"{head}\n[... {cut:,} bytes of output cut ...]\n{end}"
        return head + end


def _drain(stream: IO[bytes], into: BoundedOutput) -> None:
    with contextlib.suppress(OSError, ValueError):
        while chunk := stream.read1(65536):  # type: ignore[attr-defined]
            into.add(chunk)


def _one_line(text: str, limit: int = 300) -> str:
    return one_line(text, limit)


def _kill(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(OSError):
        process.kill()
    with contextlib.suppress(subprocess.TimeoutExpired, OSError):
        process.wait(KILL_GRACE)


_names = itertools.count(1)


class Sandbox:
    """An open sandbox. Open with ``Sandbox.open``; always ``close`` (or use ``with``)."""

    def __init__(self, options: SandboxOptions, backend: Backend, scratch: Path) -> None:
        self.options = options
        self.backend: Backend = backend
        self.scratch = scratch
        """The scratch folder on the host (work/, tmp/, home/, run/ in it)."""
        self.workdir = str(scratch / "work") if backend == "host" else options.workdir
        """Where the seeded copy is, as commands inside see it."""
        self.run_dir = str(scratch / "run") if backend == "host" else RUN_DIR
        self.home = str(scratch / "home") if backend == "host" else HOME
        self.drops_root = backend in ("bwrap", "unshare") and os.geteuid() == 0
        self._anchor: subprocess.Popen[bytes] | None = None
        self._anchor_error = ""
        self._target = 0
        self._info = -1
        """Host pid of the process whose namespaces commands enter."""
        self._container = ""
        self._started: list[subprocess.Popen[bytes]] = []
        self._lock = threading.Lock()
        self._closed = False
        self._gone = threading.Event()

    # -- opening -------------------------------------------------------------------------

    @classmethod
    def open(cls, options: SandboxOptions) -> Sandbox:
        """The first backend that works (or the one asked for), seeded and started."""
        if options.seed is not None and not Path(options.seed).is_dir():
            raise SandboxError(
                f"the folder to seed the sandbox from is not a folder: {options.seed}"
            )
        if not options.workdir.startswith("/") or options.workdir.rstrip("/") in (
            "",
            "/proc",
            "/dev",
        ):
            raise SandboxError(
                f"the sandbox's working folder must be an absolute path: {options.workdir!r}"
            )
        backend = choose_backend(options)
        box = cls._make(options, backend)
        try:
            box._start()
        except BaseException:
            box.close()
            raise
        return box

    @classmethod
    def _make(cls, options: SandboxOptions, backend: Backend) -> Sandbox:
        parent = Path(options.scratch_parent or tempfile.gettempdir())
        sweep(parent)
        scratch = Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-", dir=parent))
        box = cls(options, backend, scratch)
        if box.drops_root and not _reachable_by_others(scratch.parent):
            box.close()
            raise SandboxError(
                f"the sandbox user cannot reach {scratch.parent}: every folder above the "
                "scratch folder must be open to others (o+x)"
            )
        try:
            for name in ("work", "tmp", "home", "run", "root"):
                (scratch / name).mkdir(mode=0o755)
            if options.seed is not None:
                _seed(Path(options.seed), scratch / "work")
            if box.drops_root:
                for path in _walk(scratch):
                    os.lchown(path, SANDBOX_UID, SANDBOX_UID)
        except OSError as exc:
            box.close()
            raise SandboxError(
                f"cannot prepare the scratch folder: {_one_line(str(exc))}"
            ) from None
        return box

    def _start(self) -> None:
        if self.backend in ("podman", "docker"):
            self._start_container()
        elif self.backend in ("bwrap", "unshare"):
            self._start_namespaces()

    def _start_container(self) -> None:
        engine = self.backend
        self._container = f"agentworld-twin-{os.getpid()}-{next(_names)}-{self.scratch.name[-8:]}"
        argv = [
            _tool(engine), "run", "-d", "--rm", "--init", "--name", self._container,
            "--hostname", self.options.hostname, "--read-only",
            "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
            "--pids-limit", str(MAX_PROCESSES),
            "-v", f"{self.scratch / 'work'}:{self.options.workdir}:rw",
            "-v", f"{self.scratch / 'tmp'}:/tmp:rw",
            "-v", f"{self.scratch / 'home'}:{HOME}:rw",
            "-v", f"{self.scratch / 'run'}:{RUN_DIR}:rw",
            "-w", self.options.workdir,
        ]  # fmt: skip
        if not self.options.network:
            argv += ["--network", "none"]
        argv += [str(self.options.image), "sleep", "infinity"]
        try:
            done = subprocess.run(argv, capture_output=True, timeout=START_SECONDS * 3, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SandboxError(
                f"{engine} could not start the container: {_one_line(str(exc))}"
            ) from None
        if done.returncode != 0:
            reason = done.stderr.decode("utf-8", "replace") or f"exit status {done.returncode}"
            raise SandboxError(f"{engine} could not start the container: {_one_line(reason)}")

    def _start_namespaces(self) -> None:
        ready = threading.Event()

        def keep() -> None:
            """Start the anchor and wait for it on this thread: the anchor dies with the
            thread that started it (its parent-death signal), so that thread must live as
            long as the sandbox, whichever thread opened it."""
            try:
                self._anchor = self._spawn_anchor()
            except (OSError, SandboxError) as exc:
                self._anchor_error = _one_line(str(exc))
                ready.set()
                return
            ready.set()
            self._anchor.wait()

        threading.Thread(target=keep, name=f"sandbox-{self.scratch.name}", daemon=True).start()
        ready.wait()
        anchor = self._anchor
        if anchor is None:
            raise SandboxError(f"{self.backend} could not start: {self._anchor_error}")
        self._target = self._await_target(anchor)
        self._await_ready(anchor)

    def _spawn_anchor(self) -> subprocess.Popen[bytes]:
        info_r, info_w = os.pipe()
        self._info = info_r
        if self.backend == "bwrap":
            argv = [
                "setpriv", "--pdeathsig", "SIGKILL", "--",
                *self._bwrap_argv(), "--info-fd", str(info_w), "--", "sleep", "infinity",
            ]  # fmt: skip
        else:
            script = Path(__file__).with_name("unshare_root.py").read_text(encoding="utf-8")
            config = {
                "root": str(self.scratch / "root"),
                "system": list(SYSTEM_FOLDERS),
                "binds": [
                    [str(self.scratch / "work"), self.options.workdir],
                    [str(self.scratch / "tmp"), "/tmp"],
                    [str(self.scratch / "home"), HOME],
                    [str(self.scratch / "run"), RUN_DIR],
                ],
                "hostname": self.options.hostname,
            }
            argv = [
                "setpriv", "--pdeathsig", "SIGKILL", "--",
                "unshare", "--user", "--map-root-user", "--mount", "--pid", "--fork",
                "--kill-child=SIGKILL", "--uts", "--ipc",
                *([] if self.options.network else ["--net"]),
                "--", _interpreter(), "-I", "-S", "-c", script, json.dumps(config),
            ]  # fmt: skip
        if self.drops_root:
            argv = ["prlimit", f"--nproc={MAX_PROCESSES}:{MAX_PROCESSES}", "--", *argv]
        try:
            return subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=info_w if self.backend == "unshare" else subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                pass_fds=(info_w,) if self.backend == "bwrap" else (),
                env={"PATH": INSIDE_PATH, "LANG": "C.UTF-8"},
                cwd=self.scratch,
                start_new_session=True,
                user=SANDBOX_UID if self.drops_root else None,
                group=SANDBOX_UID if self.drops_root else None,
                extra_groups=[] if self.drops_root else None,
            )
        finally:
            os.close(info_w)

    def _bwrap_argv(self) -> list[str]:
        argv = [
            "bwrap", "--die-with-parent", "--unshare-user", "--unshare-pid", "--unshare-ipc",
            "--unshare-uts", "--unshare-cgroup-try", "--uid", "0", "--gid", "0",
            "--hostname", self.options.hostname,
        ]  # fmt: skip
        if not self.options.network:
            argv.append("--unshare-net")
        for folder in SYSTEM_FOLDERS:
            if os.path.islink(folder):
                argv += ["--symlink", os.readlink(folder), folder]
            elif os.path.isdir(folder):
                argv += ["--ro-bind", folder, folder]
        argv += ["--proc", "/proc", "--dev", "/dev"]
        argv += ["--bind", str(self.scratch / "work"), self.options.workdir]
        argv += ["--bind", str(self.scratch / "tmp"), "/tmp"]
        argv += ["--bind", str(self.scratch / "home"), HOME]
        argv += ["--bind", str(self.scratch / "run"), RUN_DIR]
        argv += ["--remount-ro", "/", "--chdir", self.options.workdir]
        return argv

    def _await_target(self, anchor: subprocess.Popen[bytes]) -> int:
        """The host pid of the sandbox's first process, once its namespaces are made."""
        deadline = time.monotonic() + START_SECONDS
        data = b""
        try:
            while time.monotonic() < deadline:
                ready, _, _ = select.select([self._info], [], [], 0.05)
                if ready:
                    chunk = os.read(self._info, 65536)
                    data += chunk
                    if self.backend == "bwrap":
                        with contextlib.suppress(ValueError):
                            return int(json.loads(data)["child-pid"])
                    elif b"\n" in data:
                        if not data.startswith(b"ready"):
                            break
                        return _only_child(anchor.pid, deadline)
                    if not chunk:
                        break
                if anchor.poll() is not None:
                    break
        finally:
            os.close(self._info)
        err = b""
        if anchor.stderr is not None:
            with contextlib.suppress(OSError, ValueError):
                _kill(anchor) if anchor.poll() is None else None
                err = anchor.stderr.read(4000)
        reason = err.decode("utf-8", "replace").strip() or (
            "it did not come up in time"
            if anchor.poll() is None
            else f"exit status {anchor.returncode}"
        )
        raise SandboxError(f"{self.backend} could not start: {_one_line(reason)}")

    def _await_ready(self, anchor: subprocess.Popen[bytes]) -> None:
        """Wait until a command can run inside: bubblewrap reports its namespaces before it
        has built the sandbox's root in them."""
        deadline = time.monotonic() + START_SECONDS
        last = ""
        while time.monotonic() < deadline and anchor.poll() is None:
            try:
                done = subprocess.run(
                    self.inside(["true"]),
                    capture_output=True,
                    timeout=START_SECONDS,
                    env={"PATH": INSIDE_PATH, "LANG": "C.UTF-8"},
                    cwd=self.scratch,
                    check=False,
                )
            except (OSError, subprocess.TimeoutExpired) as exc:
                last = str(exc)
            else:
                if done.returncode == 0:
                    return
                last = done.stderr.decode("utf-8", "replace")
            time.sleep(0.01)
        raise SandboxError(f"{self.backend} could not start: {_one_line(last) or 'it ended'}")

    # -- running -------------------------------------------------------------------------

    def inside(
        self, argv: Sequence[str], *, cwd: str | None = None, env: dict[str, str] | None = None
    ) -> list[str]:
        """The host command line that runs ``argv`` inside the sandbox."""
        values = {
            "PATH": INSIDE_PATH,
            "HOME": self.home,
            "LANG": "C.UTF-8",
            "TERM": "xterm-256color",
            "SHELL": "/bin/bash",
            "USER": "root",
            **(env or {}),
        }
        where = cwd or self.workdir
        if self.backend == "host":
            return [
                _tool("env"),
                "-i",
                f"--chdir={where}",
                *(f"{k}={v}" for k, v in values.items()),
                *argv,
            ]
        if self.backend in ("podman", "docker"):
            flags = [item for k, v in values.items() for item in ("-e", f"{k}={v}")]
            return [_tool(self.backend), "exec", "-i", "-w", where, *flags, self._container, *argv]
        enter = [
            _tool("nsenter"), f"--target={self._target}", "--user", "--mount", "--pid", "--uts", "--ipc",
            *([] if self.options.network else ["--net"]),
            "--root", "--setuid=0", "--setgid=0", "--",
            _tool("setpriv"), "--no-new-privs", "--inh-caps=-all", "--ambient-caps=-all", "--bounding-set=-all", "--",
            _tool("env"), "-i", f"--chdir={where}", *(f"{k}={v}" for k, v in values.items()), *argv,
        ]  # fmt: skip
        if self.drops_root:
            enter = [_tool("prlimit"), f"--nproc={MAX_PROCESSES}:{MAX_PROCESSES}", "--", *enter]
        return enter

    def popen(
        self,
        argv: Sequence[str],
        *,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        stdin: int | IO[bytes] | None = subprocess.DEVNULL,
        stdout: int | IO[bytes] | None = subprocess.PIPE,
        stderr: int | IO[bytes] | None = subprocess.STDOUT,
    ) -> subprocess.Popen[bytes]:
        """A process inside the sandbox. Killing the returned host process does not always
        stop what runs inside (``nsenter`` leaves it); ``close`` stops everything."""
        if self._closed:
            raise SandboxError("the sandbox is closed")
        process = subprocess.Popen(
            self.inside(argv, cwd=cwd, env=env),
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            env={"PATH": INSIDE_PATH, "LANG": "C.UTF-8"},
            cwd=self.scratch,
            start_new_session=True,
        )
        with self._lock:
            self._started = [p for p in self._started if p.poll() is None]
            self._started.append(process)
        return process

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float,
        input: bytes | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        max_output: int = MAX_OUTPUT,
    ) -> CommandResult:
        """Run ``argv`` inside to its end, or stop it (and all it started) after
        ``timeout`` seconds. Never raises for the command's own failures."""
        start = time.monotonic()
        seconds = f"{max(0.1, timeout):.3f}"
        try:
            process = self.popen(
                ["timeout", "-k", "1", seconds, *argv],
                cwd=cwd,
                env=env,
                stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
            )
        except (OSError, SandboxError) as exc:
            return CommandResult(None, f"cannot run the command: {_one_line(str(exc))}")
        output = BoundedOutput(max_output)
        assert process.stdout is not None
        reader = threading.Thread(target=_drain, args=(process.stdout, output), daemon=True)
        reader.start()
        if input is not None:
            threading.Thread(target=_feed, args=(process, input), daemon=True).start()
        try:
            code: int | None = process.wait(timeout + KILL_GRACE)
        except subprocess.TimeoutExpired:
            _kill(process)
            code = None
        reader.join(KILL_GRACE)
        elapsed = time.monotonic() - start
        timed_out = code is None or (code in (124, 137) and elapsed >= timeout)
        return CommandResult(
            None if timed_out else code,
            output.text(),
            timed_out=timed_out,
            truncated=output.truncated,
            elapsed=elapsed,
        )

    def alive(self) -> bool:
        if self._closed:
            return False
        if self.backend in ("bwrap", "unshare"):
            return (
                self._anchor is not None and self._anchor.poll() is None and _exists(self._target)
            )
        if self.backend in ("podman", "docker"):
            try:
                done = subprocess.run(
                    [_tool(self.backend), "inspect", "-f", "{{.State.Running}}", self._container],
                    capture_output=True,
                    timeout=10,
                    check=False,
                )
            except (OSError, subprocess.TimeoutExpired, SandboxError):
                return False
            return done.stdout.strip() == b"true"
        return True

    def namespace(self) -> str:
        """The pid namespace the sandbox's processes live in ("" where there is none of its
        own): no process of it is left after ``close``."""
        if self.backend in ("bwrap", "unshare") and self._target:
            with contextlib.suppress(OSError):
                return os.readlink(f"/proc/{self._target}/ns/pid")
        return ""

    # -- closing -------------------------------------------------------------------------

    def close(self) -> None:
        """Stop everything that runs in the sandbox and remove the scratch folder."""
        with self._lock:
            if self._closed:
                closing = True
            else:
                closing = False
                self._closed = True
                started, self._started = self._started, []
        if closing:
            self._gone.wait(CLOSE_SECONDS)  # closed by another thread: wait for its end
            return
        try:
            self._close(started)
        finally:
            self._gone.set()

    def _close(self, started: list[subprocess.Popen[bytes]]) -> None:
        if self._target:
            with contextlib.suppress(OSError):
                os.kill(self._target, signal.SIGKILL)
        if self._anchor is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._anchor.wait(KILL_GRACE)  # it reaps the first process, then ends
            _kill(self._anchor)
        if self._container:
            with contextlib.suppress(OSError, subprocess.TimeoutExpired, SandboxError):
                subprocess.run(
                    [_tool(self.backend), "rm", "-f", "-t", "0", self._container],
                    capture_output=True,
                    timeout=60,
                    check=False,
                )
        for process in started:
            if self.backend == "host":
                with contextlib.suppress(OSError):
                    os.killpg(process.pid, signal.SIGKILL)
            _kill(process)
        _remove(self.scratch)

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _feed(process: subprocess.Popen[bytes], data: bytes) -> None:
    with contextlib.suppress(OSError, ValueError):
        assert process.stdin is not None
        process.stdin.write(data)
        process.stdin.close()


def _tool(name: str) -> str:
    """A host program, by the user's PATH (then the usual system folders)."""
    found = shutil.which(name, path=os.environ.get("PATH", "") + os.pathsep + INSIDE_PATH)
    if found is None:
        raise SandboxError(f"{name} is not installed")
    return found


def _interpreter() -> str:
    """A Python for the unshare backend's first process: the system's, which the sandbox
    user can run, before this one (which may live in a folder only its owner reads)."""
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.access(candidate, os.X_OK):
            return candidate
    return os.path.realpath(sys.executable)


def sweep(parent: Path) -> list[Path]:
    """Remove the scratch folders in ``parent`` whose process is gone (killed before it
    could close its sandboxes: their processes died with it, their folders did not). Only
    folders this user (or its sandbox user) owns are touched."""
    removed = []
    owners = {os.geteuid(), SANDBOX_UID} if os.geteuid() == 0 else {os.geteuid()}
    with contextlib.suppress(OSError):
        for entry in os.scandir(parent):
            pid, _, rest = entry.name.removeprefix(SCRATCH_PREFIX).partition("-")
            if not entry.name.startswith(SCRATCH_PREFIX) or not pid.isdigit() or not rest:
                continue
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if not stat.S_ISDIR(info.st_mode) or info.st_uid not in owners:
                continue
            if int(pid) == os.getpid() or _exists(int(pid)):
                continue
            _remove(Path(entry.path))
            removed.append(Path(entry.path))
    return removed


def _reachable_by_others(folder: Path) -> bool:
    for part in [folder, *folder.parents]:
        try:
            if not os.stat(part).st_mode & stat.S_IXOTH:
                return False
        except OSError:
            return False
    return True


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _only_child(pid: int, deadline: float) -> int:
    """The one child of ``pid`` (unshare's forked first process)."""
    path = Path(f"/proc/{pid}/task/{pid}/children")
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, ValueError):
            children = path.read_text().split()
            if children:
                return int(children[0])
        time.sleep(0.02)
    raise SandboxError("unshare could not start: its first process cannot be found")


def _seed(source: Path, target: Path) -> None:
    """Copy a folder: files, folders and symbolic links (as links, never followed);
    sockets, pipes and devices are left out."""
    source = source.resolve()
    for folder, dirs, files in os.walk(source):
        here = Path(folder)
        there = target / here.relative_to(source)
        for name in [*dirs, *files]:
            src, dst = here / name, there / name
            info = os.lstat(src)
            if stat.S_ISLNK(info.st_mode):
                os.symlink(os.readlink(src), dst)
            elif stat.S_ISDIR(info.st_mode):
                dst.mkdir(mode=stat.S_IMODE(info.st_mode) | 0o700)
            elif stat.S_ISREG(info.st_mode):
                shutil.copy2(src, dst, follow_symlinks=False)
        dirs[:] = [d for d in dirs if (there / d).is_dir() and not (there / d).is_symlink()]


def _walk(root: Path) -> Iterator[str]:
    yield str(root)
    for folder, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            yield os.path.join(folder, name)


def _remove(path: Path) -> None:
    def unlock(func: object, failed: str, exc: object) -> None:
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(failed), 0o700)
            os.chmod(failed, 0o700, follow_symlinks=False)
            if os.path.isdir(failed) and not os.path.islink(failed):
                shutil.rmtree(failed, ignore_errors=True)
            else:
                os.unlink(failed)

    if path.exists():
        shutil.rmtree(path, onerror=unlock)


# -- choosing a backend ----------------------------------------------------------------

_probed: dict[tuple[str, bool, str], BackendProbe] = {}
_probe_lock = threading.Lock()


def probe(backend: Backend, *, network: bool = False, image: str | None = None) -> BackendProbe:
    """Whether ``backend`` works here: a small sandbox is opened, a file written in its
    folder, and a write outside it must fail. Remembered for the life of the process."""
    key = (backend, network, image or "")
    with _probe_lock:
        if key in _probed:
            return _probed[key]
        found = _probe(backend, network=network, image=image)
        _probed[key] = found
        return found


def _probe(backend: Backend, *, network: bool, image: str | None) -> BackendProbe:
    if backend == "host":
        return BackendProbe(backend, True, "")
    needs = {
        "bwrap": ["bwrap", "nsenter", "setpriv", "prlimit", "env"],
        "unshare": ["unshare", "nsenter", "setpriv", "prlimit", "env", "pivot_root"],
    }
    for tool in needs.get(backend, [backend]):
        if shutil.which(tool, path=os.environ.get("PATH", "")) is None:
            return BackendProbe(backend, False, f"{tool} is not installed")
    if backend in ("podman", "docker"):
        if not image:
            return BackendProbe(backend, False, "no container image was named")
        try:
            info = subprocess.run(
                [_tool(backend), "info"], capture_output=True, timeout=30, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return BackendProbe(
                backend, False, f"its engine does not answer: {_one_line(str(exc))}"
            )
        if info.returncode != 0:
            reason = info.stderr.decode("utf-8", "replace").strip().splitlines()
            return BackendProbe(
                backend,
                False,
                f"its engine does not work: {_one_line(reason[-1] if reason else '')}",
            )
    options = SandboxOptions(workdir="/probe", network=network, backend=backend, image=image)
    try:
        box = Sandbox._make(options, backend)
    except SandboxError as exc:
        return BackendProbe(backend, False, str(exc))
    try:
        box._start()
        script = "echo inside > /probe/written && cat /probe/written && ! touch /usr/.agentworld-probe 2>/dev/null"
        done = box.run(["sh", "-c", script], timeout=START_SECONDS)
        if done.exit_code != 0 or "inside" not in done.output:
            return BackendProbe(
                backend,
                False,
                f"a command in it failed: {_one_line(done.output) or done.exit_code}",
            )
        if (box.scratch / "work" / "written").read_text().strip() != "inside":
            return BackendProbe(backend, False, "its folder is not the scratch folder")
        return BackendProbe(backend, True, "")
    except (SandboxError, OSError) as exc:
        return BackendProbe(backend, False, _one_line(str(exc)))
    finally:
        box.close()


def clear_probes() -> None:
    """Forget what was probed (after installing a backend, or changing PATH)."""
    with _probe_lock:
        _probed.clear()


def probe_backends(*, network: bool = False, image: str | None = None) -> list[BackendProbe]:
    """Every sandbox backend, in the order they are tried, with whether it works here."""
    return [probe(b, network=network, image=image) for b in SANDBOX_BACKENDS]


def choose_backend(options: SandboxOptions) -> Backend:
    """The backend ``options`` ask for, if it works; otherwise one line saying why not."""
    if options.backend == "host":
        if not options.unsafe_host:
            raise SandboxError("running on the host needs unsafe_host (--twin-on-host)")
        return "host"
    wanted = SANDBOX_BACKENDS if options.backend == "auto" else (options.backend,)
    reasons = []
    for backend in wanted:
        found = probe(backend, network=options.network, image=options.image)
        if found.works:
            return backend
        reasons.append(f"{backend}: {found.reason}")
    if options.unsafe_host:
        return "host"
    return _refuse(reasons)


def _refuse(reasons: list[str]) -> Backend:
    raise SandboxError(
        "no sandbox works here ("
        + "; ".join(reasons)
        + "); install bubblewrap, or run on this machine itself with --twin-on-host"
    )
