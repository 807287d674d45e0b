"""What this machine can hold: RAM, GPUs and their memory, and the llama.cpp build.

Everything here is read cheaply and never fails: a value that cannot be read is reported as
unknown (0, or no GPU), so the fit estimate can still say something.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
from dataclasses import dataclass

GIB = 1 << 30


@dataclass(frozen=True)
class GPU:
    index: int
    name: str
    total_bytes: int
    free_bytes: int


@dataclass(frozen=True)
class MachineMemory:
    ram_total: int
    """Bytes of RAM; 0 when unknown."""
    ram_available: int
    """Bytes the kernel says can be used now without swapping."""
    gpus: tuple[GPU, ...] = ()
    """Discrete GPUs seen by nvidia-smi; empty when none is visible."""
    unified: bool = False
    """Apple Silicon: the GPU shares the RAM (Metal), there is no separate VRAM."""

    @property
    def vram_total(self) -> int:
        return sum(g.total_bytes for g in self.gpus)

    @property
    def vram_free(self) -> int:
        return sum(g.free_bytes for g in self.gpus)


def parse_meminfo(text: str) -> tuple[int, int]:
    """(total, available) bytes from /proc/meminfo text; 0 for what is missing."""
    values: dict[str, int] = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        fields = rest.split()
        if fields and fields[0].isdigit():
            factor = 1024 if len(fields) > 1 and fields[1].lower() == "kb" else 1
            values[key.strip()] = int(fields[0]) * factor
    total = values.get("MemTotal", 0)
    available = values.get("MemAvailable") or values.get("MemFree", 0)
    return total, available


def ram() -> tuple[int, int]:
    try:
        with open("/proc/meminfo", encoding="ascii", errors="replace") as handle:
            total, available = parse_meminfo(handle.read())
        if total:
            return total, available or total
    except OSError:
        pass
    try:
        page = os.sysconf("SC_PAGE_SIZE")
        total = page * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 0, 0
    try:
        available = page * os.sysconf("SC_AVPHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        available = total
    return total, available


def parse_nvidia_smi(text: str) -> list[GPU]:
    """GPUs from ``nvidia-smi --query-gpu=index,name,memory.total,memory.free
    --format=csv,noheader,nounits`` output (MiB)."""
    gpus: list[GPU] = []
    for line in text.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) < 4:
            continue
        index, name, total, free = fields[0], ",".join(fields[1:-2]), fields[-2], fields[-1]
        if not (index.isdigit() and total.isdigit() and free.isdigit()):
            continue
        gpus.append(GPU(int(index), name, int(total) << 20, int(free) << 20))
    return gpus


def nvidia_gpus(timeout: float = 5.0) -> list[GPU]:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return []
    try:
        done = subprocess.run(
            [
                exe,
                "--query-gpu=index,name,memory.total,memory.free",
                "--format=csv,noheader,nounits",
            ],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return []
    return parse_nvidia_smi(done.stdout) if done.returncode == 0 else []


def is_apple_silicon() -> bool:
    return platform.system() == "Darwin" and platform.machine() in ("arm64", "aarch64")


def machine_memory(*, gpus: bool = True) -> MachineMemory:
    total, available = ram()
    return MachineMemory(
        ram_total=total,
        ram_available=available,
        gpus=tuple(nvidia_gpus()) if gpus else (),
        unified=is_apple_silicon(),
    )


@dataclass(frozen=True)
class LlamaBuild:
    version: str
    gpu_offload: bool
    backends: tuple[str, ...]
    """Backend names from llama.cpp's system info (CPU, CUDA, Metal, Vulkan...)."""
    system_info: str

    @property
    def kind(self) -> str:
        """CUDA, Metal, Vulkan, ROCm, SYCL... or CPU when nothing can take layers."""
        gpu = [b for b in self.backends if b.upper() not in ("CPU", "BLAS")]
        if gpu and self.gpu_offload:
            return "/".join(_BACKEND_NAMES.get(b.upper(), b) for b in gpu)
        return "CPU"


_BACKEND_NAMES = {"MTL": "Metal", "METAL": "Metal", "HIP": "ROCm", "VULKAN": "Vulkan"}


def parse_system_info(text: str) -> tuple[str, ...]:
    """Backend names in llama.cpp's ``NAME : KEY = 1 | ...`` system info line."""
    names = re.findall(r"(?:^|\|)\s*([A-Za-z][A-Za-z0-9_]*)\s:\s", text)
    return tuple(dict.fromkeys(names))


def llama_build() -> LlamaBuild | None:
    """The installed llama-cpp-python and what it was built with; None if missing."""
    try:
        import llama_cpp
    except Exception:  # not installed, or its shared library fails to load
        return None
    info = llama_cpp.llama_print_system_info()
    text = info.decode("utf-8", "replace") if isinstance(info, bytes) else str(info)
    return LlamaBuild(
        version=str(getattr(llama_cpp, "__version__", "?")),
        gpu_offload=bool(llama_cpp.llama_supports_gpu_offload()),
        backends=parse_system_info(text),
        system_info=text.strip(),
    )


def gpu_reinstall_command(
    machine: MachineMemory, version: str = "", *, system: str | None = None
) -> tuple[str, str] | None:
    """(backend, command) to rebuild llama-cpp-python with GPU offload under pipx.

    None when no GPU that llama.cpp could use is in sight.
    """
    system = system or platform.system()
    if system == "Darwin":
        if not machine.unified:
            return None
        backend, flag = "Metal", "-DGGML_METAL=on"
    elif machine.gpus:
        backend, flag = "CUDA", "-DGGML_CUDA=on"
    elif shutil.which("rocminfo") or shutil.which("rocm-smi"):
        backend, flag = "ROCm", "-DGGML_HIP=on"
    elif shutil.which("vulkaninfo"):
        backend, flag = "Vulkan", "-DGGML_VULKAN=on"
    else:
        return None
    package = f"llama-cpp-python=={version}" if version and version != "?" else "llama-cpp-python"
    return backend, (
        f'CMAKE_ARGS="{flag}" pipx runpip agentworld-tui install --force-reinstall '
        f"--no-cache-dir {package}"
    )
