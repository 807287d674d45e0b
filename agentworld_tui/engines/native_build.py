"""The llama.cpp builds this program runs, and the commands that replace them for this machine.

``pip`` compiles llama-cpp-python for the CPU it is built on (``GGML_NATIVE``). On some
machines that build crashes: a CPU that reports AMX, as many cloud VMs do, gets a build that
multiplies quantized weights with AMX, and its first decode of a batch dies (a segmentation
fault, or "Illegal instruction"). A build made with ``GGML_NATIVE=OFF`` and the CPU's vector
extensions named one by one leaves AMX out and runs. ``rebuild_command`` writes that
command for this CPU, this install (pipx or a plain environment) and this build's version and
GPU backend.

xllamacpp ships prebuilt wheels instead: a CPU wheel on PyPI, built for any CPU with AVX2
(no AVX-512, no AMX), and CUDA, ROCm and Vulkan wheels on its own package indexes.
``xllamacpp_install_command`` writes the command that installs one of them in place of the
one installed; ``xllamacpp_backend`` says which one a build is.

Nothing here imports llama_cpp or xllamacpp: a build's identity is read from its files, so
a crash probe can be looked up without loading the library.
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
XLLAMACPP = "xllamacpp"
APP = "agentworld-tui"
MODULES = {PACKAGE: "llama_cpp", XLLAMACPP: "xllamacpp"}
"""The in-process engines' packages, and the module each is imported as."""
XLLAMACPP_INDEX = "https://xorbitsai.github.io/xllamacpp/whl/"
XLLAMACPP_WHEELS = {
    "CUDA": ("cu128", "cu132"),
    "ROCm": ("rocm-7.2.4", "rocm-6.4.1"),
    "Vulkan": ("vulkan",),
}
"""xllamacpp's GPU wheels: its package index names, for each backend (CUDA 12.8 and 13.2;
ROCm 7.2.4 and 6.4.1)."""
XLLAMACPP_CPU_NEEDS = ("avx2", "fma", "f16c")
"""What xllamacpp's x86 CPU wheel is built for, as /proc/cpuinfo names it."""

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


def version(package: str = PACKAGE) -> str:
    """The installed version of an engine's package ("" when it is not installed)."""
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return ""


def library_files(package: str = PACKAGE) -> list[Path]:
    """The shared libraries of an engine's installed package (its native build), those a
    wheel vendors beside it included."""
    module = MODULES[package]
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return []
    if spec is None or spec.origin is None:
        return []
    folder = Path(spec.origin).parent
    found: list[Path] = []
    for pattern in ("*.so*", "*.dylib", "*.dll"):
        found += folder.glob(f"lib/{pattern}")
        found += folder.glob(pattern)
        found += folder.parent.glob(f"{module}.libs/{pattern}")
    return sorted(set(found))


@functools.cache
def build_identity(package: str = PACKAGE) -> str:
    """A key that changes when an engine's package is reinstalled or rebuilt: its name and
    version and the size and time of each of its libraries. Read once: a process keeps the
    build it loaded first, whatever is installed later."""
    seed = version() if package == PACKAGE else f"{package}\0{version(package)}"
    digest = hashlib.sha256(seed.encode())
    for path in library_files(package):
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


# -- xllamacpp's wheels ---------------------------------------------------------------------------
def xllamacpp_backend(system_info: str, devices: tuple[str, ...] = ()) -> str:
    """The GPU backend of an xllamacpp build ("" for its CPU wheel), from its system info or
    the names of the devices it found (CUDA0, ROCm0, Vulkan0...)."""
    found = gpu_backend(system_info)
    if found:
        return found
    for name in devices:
        for backend in (*XLLAMACPP_WHEELS, "Metal"):
            if name.upper().startswith(backend.upper()):
                return backend
        if name.upper().startswith("HIP"):
            return "ROCm"
    return ""


def xllamacpp_install_command(wheel: str = "") -> str:
    """The command that installs xllamacpp's wheel ``wheel`` (an index name such as cu128;
    "": the CPU wheel from PyPI, at the version installed now) in place of the one there."""
    installed = version(XLLAMACPP)
    if not wheel:
        package = f"{XLLAMACPP}=={installed}" if installed else XLLAMACPP
        return f"{install_prefix()} install --force-reinstall --no-deps {package}"
    return (
        f"{install_prefix()} install --force-reinstall --no-deps --index-url "
        f"{XLLAMACPP_INDEX}{wheel} {XLLAMACPP}"
    )


def xllamacpp_cpu_lacks(flags: frozenset[str] | None = None) -> list[str]:
    """What xllamacpp's x86 CPU wheel needs and this CPU does not report (empty where it
    is not known: not x86, or no /proc/cpuinfo)."""
    cpu = cpu_flags() if flags is None else flags
    if not cpu or platform.machine().lower() not in ("x86_64", "amd64"):
        return []
    return [flag for flag in XLLAMACPP_CPU_NEEDS if flag not in cpu]


def gpu_devices() -> list[str]:
    """The GPU backends whose devices this machine has (their driver's files), without
    loading any library: where a GPU wheel could run."""
    found = []
    if Path("/dev/nvidia0").exists() or Path("/proc/driver/nvidia").exists():
        found.append("CUDA")
    if Path("/dev/kfd").exists():
        found.append("ROCm")
    return found
