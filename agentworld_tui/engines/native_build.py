"""The llama.cpp build this program runs, and the command that rebuilds it for this machine.

``pip`` compiles llama-cpp-python for the CPU it is built on (``GGML_NATIVE``). On some
machines that build crashes: a CPU that reports AMX, as many cloud VMs do, gets a build that
multiplies quantized weights with AMX, and its first decode of a batch dies (a segmentation
fault, or "Illegal instruction"). A build made with ``GGML_NATIVE=OFF`` and the CPU's vector
extensions named one by one leaves AMX out and runs. ``rebuild_command`` writes that
command for this CPU, this install (pipx or a plain environment) and this build's version and
GPU backend.

Nothing here imports llama_cpp: the build's identity is read from its files, so a crash
probe can be looked up without loading the library.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.metadata
import importlib.util
import platform
import re
import shlex
import sys
from pathlib import Path

PACKAGE = "llama-cpp-python"
APP = "agentworld-tui"

_REBUILD_FLAGS = (
    ("avx", "GGML_AVX"),
    ("avx2", "GGML_AVX2"),
    ("fma", "GGML_FMA"),
    ("f16c", "GGML_F16C"),
    ("avx512f", "GGML_AVX512"),
    ("avx512_vnni", "GGML_AVX512_VNNI"),
    ("bmi2", "GGML_BMI2"),
)
"""CPU flag (as /proc/cpuinfo names it) and the CMake option that builds for it: the set
the README's rebuild uses, which leaves AMX out."""
_GPU_FLAGS = {"CUDA": "-DGGML_CUDA=on", "Metal": "-DGGML_METAL=on", "Vulkan": "-DGGML_VULKAN=on"}
_GPU_FLAGS["ROCm"] = "-DGGML_HIP=on"


def version() -> str:
    """The installed llama-cpp-python's version ("" when it is not installed)."""
    try:
        return importlib.metadata.version(PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        return ""


def library_files() -> list[Path]:
    """The shared libraries of the installed llama-cpp-python (its native build)."""
    try:
        spec = importlib.util.find_spec("llama_cpp")
    except (ImportError, ValueError):
        return []
    if spec is None or spec.origin is None:
        return []
    folder = Path(spec.origin).parent
    found: list[Path] = []
    for pattern in ("*.so*", "*.dylib", "*.dll"):
        found += folder.glob(f"lib/{pattern}")
        found += folder.glob(pattern)
    return sorted(set(found))


@functools.cache
def build_identity() -> str:
    """A key that changes when llama-cpp-python is reinstalled or rebuilt: its version and
    the size and time of each of its libraries. Read once: a process keeps the build it
    loaded first, whatever is installed later."""
    digest = hashlib.sha256(version().encode())
    for path in library_files():
        with contextlib.suppress(OSError):
            stat = path.stat()
            digest.update(f"\0{path.name}\0{stat.st_size}\0{stat.st_mtime_ns}".encode())
    return digest.hexdigest()[:24]


def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags as Linux reports them (empty elsewhere)."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as handle:
            for line in handle:
                if line.startswith("flags"):
                    return frozenset(line.partition(":")[2].split())
    except OSError:
        pass
    return frozenset()


def amx_flags(flags: frozenset[str] | None = None) -> list[str]:
    """The AMX features the CPU reports (amx_bf16, amx_int8, amx_tile...)."""
    return sorted(f for f in (cpu_flags() if flags is None else flags) if f.startswith("amx"))


def build_uses_amx(system_info: str) -> bool:
    """Whether llama.cpp's system info says the build multiplies with AMX."""
    return bool(re.search(r"\bAMX\w*\s*=\s*1", system_info))


def gpu_backend(system_info: str) -> str:
    """The GPU backend the build was made with ("" for a CPU-only build)."""
    names = {"CUDA": "CUDA", "METAL": "Metal", "MTL": "Metal", "VULKAN": "Vulkan"}
    names["HIP"] = names["ROCM"] = "ROCm"
    for found in re.findall(r"(?:^|\|)\s*([A-Za-z][A-Za-z0-9_]*)\s:\s", system_info):
        backend = names.get(found.upper())
        if backend:
            return backend
    return ""


def install_prefix() -> str:
    """How to run pip for the environment this program runs in."""
    parts = Path(sys.prefix).parts
    if "pipx" in parts and "venvs" in parts:
        return f"pipx runpip {Path(sys.prefix).name}"
    return f"{shlex.quote(sys.executable)} -m pip"


def rebuild_command(system_info: str = "", flags: frozenset[str] | None = None) -> str:
    """The command that rebuilds llama-cpp-python for this machine without ``GGML_NATIVE``:
    the CPU's vector extensions named one by one (no AMX), the same GPU backend and
    version as the build installed now, nothing else reinstalled."""
    cpu = cpu_flags() if flags is None else flags
    cmake = ["-DGGML_NATIVE=OFF"]
    if platform.machine().lower() in ("x86_64", "amd64", "i686", "x86") or cpu & {"avx", "avx2"}:
        cmake += [f"-D{option}=ON" for flag, option in _REBUILD_FLAGS if flag in cpu]
    backend = gpu_backend(system_info)
    if backend in _GPU_FLAGS:
        cmake.append(_GPU_FLAGS[backend])
    installed = version()
    package = f"{PACKAGE}=={installed}" if installed else PACKAGE
    return (
        f'CMAKE_ARGS="{" ".join(cmake)}" {install_prefix()} install --force-reinstall '
        f"--no-deps --no-cache-dir {package}"
    )
