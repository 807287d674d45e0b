"""The unshare backend's first process, run inside its fresh namespaces (never imported:
the sandbox passes this file's text to a Python interpreter, standard library only).

It builds the sandbox's root on a small tmpfs: the host's system folders bound read-only
(every mount under them too, keeping the flags the kernel locked), a fresh /proc with its
writable corners covered, a minimal /dev with its own pty instance, and the scratch
folder's parts bound writable. It enters that root with pivot_root and detaches the host's
(a chroot could be left by the root inside), says "ready" on stdout, then reaps orphans
until it is killed, which ends every process of the sandbox.
"""

from __future__ import annotations

import ctypes
import json
import os
import socket
import subprocess
import sys
import time

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_NOATIME = 1024
MS_NODIRATIME = 2048
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MS_RELATIME = 1 << 21
MNT_DETACH = 2
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
PROC_COVERED = ("sys", "sysrq-trigger", "irq", "bus")

_libc = ctypes.CDLL(None, use_errno=True)


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str = "") -> None:
    done = _libc.mount(
        source.encode() if source else None,
        target.encode(),
        fstype.encode() if fstype else None,
        ctypes.c_ulong(flags),
        data.encode() if data else None,
    )
    if done != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"mount {target}: {os.strerror(error)}")


def remount_read_only(path: str) -> None:
    flags = MS_REMOUNT | MS_BIND | MS_RDONLY
    have = os.statvfs(path).f_flag
    for st_flag, ms_flag in (
        (os.ST_NOSUID, MS_NOSUID),
        (os.ST_NODEV, MS_NODEV),
        (os.ST_NOEXEC, MS_NOEXEC),
        (os.ST_NOATIME, MS_NOATIME),
        (os.ST_NODIRATIME, MS_NODIRATIME),
        (os.ST_RELATIME, MS_RELATIME),
    ):
        if have & st_flag:
            flags |= ms_flag
    mount(None, path, None, flags)


def mounts_under(path: str) -> list[str]:
    found = []
    with open("/proc/self/mountinfo", encoding="utf-8") as info:
        for line in info:
            point = line.split()[4]
            point = point.encode().decode("unicode_escape")  # \040 and the like
            if point == path or point.startswith(path + "/"):
                found.append(point)
    return found


def bind_read_only(source: str, target: str) -> None:
    os.makedirs(target, exist_ok=True)
    mount(source, target, None, MS_BIND | MS_REC)
    for point in mounts_under(target):
        remount_read_only(point)


def build(root: str, config: dict[str, object]) -> None:
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=755,size=16m")
    for folder in config["system"]:  # type: ignore[attr-defined]
        inside = root + folder
        if os.path.islink(folder):
            os.symlink(os.readlink(folder), inside)
        elif os.path.isdir(folder):
            bind_read_only(folder, inside)
    os.makedirs(root + "/proc")
    mount("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    for name in PROC_COVERED:
        path = f"{root}/proc/{name}"
        if os.path.exists(path):
            mount(path, path, None, MS_BIND | MS_REC)
            remount_read_only(path)
    dev = root + "/dev"
    os.makedirs(dev)
    mount("tmpfs", dev, "tmpfs", MS_NOSUID, "mode=755,size=64k")
    for name in DEVICES:
        open(f"{dev}/{name}", "w").close()
        mount(f"/dev/{name}", f"{dev}/{name}", None, MS_BIND)
    os.makedirs(dev + "/pts")
    mount(
        "devpts",
        dev + "/pts",
        "devpts",
        MS_NOSUID | MS_NOEXEC,
        "newinstance,ptmxmode=0666,mode=620",
    )
    os.symlink("pts/ptmx", dev + "/ptmx")
    for name, target in (
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ):
        os.symlink(target, f"{dev}/{name}")
    os.makedirs(dev + "/shm")
    mount("tmpfs", dev + "/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=64m")
    for source, target in config["binds"]:  # type: ignore[attr-defined]
        os.makedirs(root + target, exist_ok=True)
        mount(source, root + target, None, MS_BIND)
    os.makedirs(root + "/.old")
    socket.sethostname(str(config["hostname"]))
    os.chdir(root)
    subprocess.run(["pivot_root", ".", ".old"], check=True)
    os.chdir("/")
    if _libc.umount2(b"/.old", MNT_DETACH) != 0:
        raise OSError(ctypes.get_errno(), "cannot detach the host's root")
    os.rmdir("/.old")
    mount(None, "/", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)


def main() -> None:
    config = json.loads(sys.argv[1])
    try:
        build(str(config["root"]), config)
    except (OSError, subprocess.CalledProcessError) as exc:
        print(f"cannot build the sandbox: {exc}", file=sys.stderr, flush=True)
        sys.exit(1)
    print("ready", flush=True)
    devnull = os.open("/dev/null", os.O_RDWR)
    os.dup2(devnull, 1)
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            time.sleep(0.5)


if __name__ == "__main__":
    main()
