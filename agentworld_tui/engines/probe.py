"""A model's first decode, tried in a child process before llama.cpp runs it in ours.

A native crash in llama.cpp (a segmentation fault, an illegal instruction, an abort) cannot
be caught: it ends the process, the app with it, and leaves the terminal in raw mode. The
crash that happens in practice comes the first time a build decodes a batch of a model (see
``native_build``), so before a model is loaded in-process a child process loads it with the
same settings and decodes one batch of several tokens, then two single tokens. A child that
dies of a signal is a crash: the load stops with a message that says what crashed and the
command that rebuilds llama.cpp for this machine (``ErrorKind.CRASHED``), and the app lives
on. A child that reports a Python error (a damaged file, too little memory for the
context) is not a crash: the in-process load says the same, in its own words.

Both in-process engines are guarded so: llama-cpp-python (``LlamaEngine``), and xllamacpp
(``XLlamaEngine``), whose child starts llama.cpp's server engine with the engine's settings
and decodes a short prompt on two slots at once, as many conversations are decoded. Before
it loads the model that child says which build it runs (``INFO_MARK``: its system info and
devices), so the message of a crash names the xllamacpp wheel it was (CPU, CUDA, ROCm,
Vulkan) and the ones to try instead, or the other engine.

A pass is remembered, per engine build (``native_build.build_identity``) and model (its size and
the bytes of its header and tail, so a moved or renamed file is still known), in this
process and in a folder (``cache_dir``, from the settings), so the trial costs one child
process the first time a build meets a model and nothing after. A crash is not remembered:
a rebuild changes the build's identity anyway, and a trial that crashed once is tried again.

``python -m agentworld_tui.engines.probe_child`` is the child.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from agentworld_tui.engines import native_build
from agentworld_tui.engines.base import EngineError, ProgressCallback

log = logging.getLogger("agentworld.probe")

PROBE_CTX = 256
BATCH_TOKENS = 32
"""Tokens decoded at once: several, as a prompt is read (the crash needs two or more)."""
SINGLE_STEPS = 2
"""Single tokens decoded after the batch, as an answer is generated."""
RESULT_MARK = "agentworld-probe-result "
INFO_MARK = "agentworld-probe-build "
"""Begins the line where the child says which build it runs, before it loads the model."""
TRIAL_SLOTS = 2
"""Conversations xllamacpp's trial decodes at once (one batch holds several sequences)."""
HEAD_BYTES = 1 << 20
TAIL_BYTES = 1 << 20
STDERR_KEPT = 4000
"""Characters of the child's error output kept for the log."""
BASE_TIMEOUT_S = 120.0
READ_RATE = 100 << 20
"""Bytes a second a model file is assumed to load at, for the trial's time limit."""
CRASH_SIGNALS = frozenset(
    int(getattr(signal, name))
    for name in ("SIGSEGV", "SIGILL", "SIGBUS", "SIGFPE", "SIGABRT", "SIGSYS", "SIGTRAP")
    if hasattr(signal, name)
)
CHILD = (sys.executable, "-m", "agentworld_tui.engines.probe_child")
"""The child's command line before its one argument (the trial, as JSON)."""
_KILLED = int(getattr(signal, "SIGKILL", 9))
_PASSED: set[str] = set()
"""Trials passed in this process (keys), besides those remembered on disk."""
_PASSED_LOCK = threading.Lock()


def model_identity(path: Path) -> str:
    """A key for a model file's content: its size and the bytes of its head and tail."""
    size = path.stat().st_size
    digest = hashlib.sha256(str(size).encode())
    with path.open("rb") as handle:
        digest.update(handle.read(HEAD_BYTES))
        if size > HEAD_BYTES:
            handle.seek(max(HEAD_BYTES, size - TAIL_BYTES))
            digest.update(handle.read(TAIL_BYTES))
    return digest.hexdigest()[:24]


@dataclass(frozen=True)
class Trial:
    """What the child loads, as the engine would."""

    model_path: Path
    threads: int
    gpu_layers: int
    n_batch: int = 512
    engine: str = native_build.PACKAGE
    """The engine's package: llama-cpp-python or xllamacpp (``native_build.MODULES``)."""

    def key(self) -> str:
        offloaded = "gpu" if self.gpu_layers else "cpu"
        build = native_build.build_identity(self.engine)
        return "-".join((build, model_identity(self.model_path), offloaded))


@dataclass(frozen=True)
class ProbeOutcome:
    """How a trial ended."""

    ok: bool
    """The model loaded and decoded in the child (or did before: ``remembered``)."""
    crashed: bool = False
    """The child died of a signal: llama.cpp would have taken this process down."""
    signal: int = 0
    exit_code: int = 0
    error: str = ""
    """The Python error the child reported (not a crash), or why there is no verdict."""
    remembered: bool = False
    seconds: float = 0.0
    system_info: str = ""
    """What the child's build said of itself before it loaded the model ("" if it did not)."""
    devices: tuple[str, ...] = ()
    """The devices the child's build found (xllamacpp's trial: CPU, CUDA0...)."""

    @property
    def signal_name(self) -> str:
        try:
            return signal.Signals(self.signal).name
        except ValueError:
            return f"signal {self.signal}"


class CrashProbe:
    """Runs trials in a child process and remembers the passes (see the module's docstring).

    ``command`` is the child's command line before its one argument (the trial as JSON);
    by default ``CHILD``, this module run by the same Python.
    """

    def __init__(
        self,
        cache_dir: Path | None = None,
        *,
        command: Sequence[str] | None = None,
        timeout: float | None = None,
    ) -> None:
        self.cache_dir = cache_dir
        self.command = tuple(command) if command else None
        self.timeout = timeout

    def known(self, key: str) -> bool:
        """Whether the trial with this key passed before."""
        return self._passed(key)

    def check(self, trial: Trial, key: str = "") -> ProbeOutcome:
        """The trial's outcome, from memory when it passed before."""
        key = key or trial.key()
        if self._passed(key):
            return ProbeOutcome(ok=True, remembered=True)
        return self.run(trial, key)

    def run(self, trial: Trial, key: str = "") -> ProbeOutcome:
        """Run the trial now (a pass is remembered)."""
        key = key or trial.key()
        outcome = self._run_child(trial)
        if outcome.ok:
            self._remember(key, trial)
        return outcome

    def first_decode(self, trial: Trial, say: ProgressCallback) -> ProbeOutcome:
        """An engine's trial before its load: from memory when it passed before, else run
        (said through ``say``); EngineError when the model file cannot be read."""
        try:
            key = trial.key()
        except OSError as exc:
            raise EngineError(f"cannot read the model file {trial.model_path}: {exc}") from exc
        if not self.known(key):
            say(f"trying {trial.model_path.name} in a separate process")
        return self.check(trial, key)

    # -- remembering -------------------------------------------------------------------------
    def _record(self, key: str) -> Path | None:
        return self.cache_dir / "llama-probe" / f"{key}.json" if self.cache_dir else None

    def _passed(self, key: str) -> bool:
        with _PASSED_LOCK:
            if key in _PASSED:
                return True
        record = self._record(key)
        if record is None or not record.is_file():
            return False
        with _PASSED_LOCK:
            _PASSED.add(key)
        return True

    def _remember(self, key: str, trial: Trial) -> None:
        with _PASSED_LOCK:
            _PASSED.add(key)
        record = self._record(key)
        if record is None:
            return
        from agentworld_tui.world.store import write_atomic

        note = {
            "model": trial.model_path.name,
            trial.engine.replace("-", "_"): native_build.version(trial.engine),
            "passed": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
        try:
            write_atomic(record, json.dumps(note).encode())
        except OSError as exc:  # not remembered: tried again next time
            log.warning("could not remember the trial of %s: %s", trial.model_path.name, exc)

    # -- the child -----------------------------------------------------------------------------
    def _time_limit(self, trial: Trial) -> float:
        if self.timeout is not None:
            return self.timeout
        with contextlib.suppress(OSError):
            return BASE_TIMEOUT_S + trial.model_path.stat().st_size / READ_RATE
        return BASE_TIMEOUT_S

    def _run_child(self, trial: Trial) -> ProbeOutcome:
        argument = json.dumps(
            {
                "model_path": str(trial.model_path),
                "threads": trial.threads,
                "gpu_layers": trial.gpu_layers,
                "n_batch": trial.n_batch,
                "engine": trial.engine,
            }
        )
        started = time.monotonic()
        limit = self._time_limit(trial)
        try:
            done = subprocess.run(
                [*(self.command or CHILD), argument],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=limit,
                check=False,
                start_new_session=True,  # the terminal's Ctrl+C is ours to handle, not its
            )
        except subprocess.TimeoutExpired:
            log.warning(
                "the trial of %s took more than %.0f s; not judged", trial.model_path, limit
            )
            return ProbeOutcome(ok=False, error=f"the trial took more than {limit:.0f} s")
        except OSError as exc:
            log.warning("could not start the trial of %s: %s", trial.model_path, exc)
            return ProbeOutcome(ok=False, error=f"could not start the trial: {exc}")
        seconds = time.monotonic() - started
        stderr = done.stderr.decode("utf-8", "replace")[-STDERR_KEPT:]
        code = done.returncode
        stdout = done.stdout.decode("utf-8", "replace")
        said = _build_said(stdout)
        died_of = -code if code < 0 else (code - 128 if code > 128 else 0)
        if died_of in CRASH_SIGNALS or died_of == _KILLED:
            log.error(
                "llama.cpp crashed (%s) trying %s; its last output:\n%s",
                died_of,
                trial.model_path,
                stderr,
            )
            return replace(said, crashed=True, signal=died_of, exit_code=code, seconds=seconds)
        result = _marked(stdout, RESULT_MARK)
        if code == 0 and result.get("ok") is True:
            log.info("trial of %s passed in %.1f s", trial.model_path.name, seconds)
            return replace(said, ok=True, seconds=seconds)
        error = str(result.get("error") or f"the trial ended with exit code {code}")
        log.warning("trial of %s failed (%s); its output:\n%s", trial.model_path, error, stderr)
        return replace(said, exit_code=code, error=error, seconds=seconds)


def _build_said(stdout: str) -> ProbeOutcome:
    """An outcome not yet judged, holding what the child said of its build."""
    build = _marked(stdout, INFO_MARK)
    listed = build.get("devices")
    devices = tuple(d for d in listed if isinstance(d, str)) if isinstance(listed, list) else ()
    return ProbeOutcome(ok=False, system_info=str(build.get("system_info", "")), devices=devices)


def _marked(stdout: str, mark: str) -> dict[str, Any]:
    """The JSON object of the child's last line that begins with ``mark`` ({} if none)."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(mark):
            with contextlib.suppress(ValueError):
                value = json.loads(line[len(mark) :])
                if isinstance(value, dict):
                    return value
    return {}


# -- what the user is told ------------------------------------------------------------------------
def crash_message(model_name: str, outcome: ProbeOutcome, system_info: str) -> str:
    """One paragraph: what crashed, that nothing was lost, and the fix for this machine."""
    if outcome.signal == _KILLED:
        return (
            f"llama.cpp was killed (SIGKILL) trying {model_name} in a separate process, most "
            "likely for lack of memory; the model was not loaded. Choose a smaller model or "
            "quantization, a smaller context (--ctx), or free memory."
        )
    what = {"SIGSEGV": "a segmentation fault", "SIGILL": "an illegal instruction"}.get(
        outcome.signal_name, outcome.signal_name
    )
    text = (
        f"llama.cpp crashed ({what}, {outcome.signal_name}) on its first decode of "
        f"{model_name}, tried in a separate process; the model was not loaded. "
    )
    command = native_build.rebuild_command(system_info)
    amx = native_build.amx_flags()
    if amx and native_build.build_uses_amx(system_info):
        text += (
            f"This CPU reports AMX ({', '.join(amx)}) and this llama-cpp-python build, compiled "
            "for the machine it was built on, uses it for quantized models, which crashes "
            f"here. Rebuild it without AMX: {command}"
        )
    else:
        text += (
            "This llama-cpp-python build may use instructions this CPU cannot run; rebuild "
            f"it for this machine: {command} . If it still crashes, the file may be "
            "damaged: download it again."
        )
    return text


SIGNAL_WORDS = {
    "SIGSEGV": "a segmentation fault",
    "SIGILL": "an illegal instruction",
    "SIGABRT": "an abort",
    "SIGBUS": "a bus error",
    "SIGFPE": "an arithmetic error",
}
OTHER_ENGINE = (
    "Or run it with the llama-cpp-python engine (one turn at a time): --engine "
    'llama-cpp-python, or engine = "llama-cpp-python" under [model] in config.toml.'
)


def xllamacpp_crash_message(model_name: str, outcome: ProbeOutcome) -> str:
    """One paragraph for a crash of xllamacpp's trial: what crashed, that nothing was lost,
    and what to do on this machine: another of xllamacpp's wheels, or the other engine."""
    if outcome.signal == _KILLED:
        return (
            f"xllamacpp was killed (SIGKILL) trying {model_name} in a separate process, most "
            "likely for lack of memory; the model was not loaded. Choose a smaller model or "
            "quantization, a smaller context (--ctx) or fewer slots (--slots), or free "
            f"memory. {OTHER_ENGINE}"
        )
    what = SIGNAL_WORDS.get(outcome.signal_name, "")
    said = f"{what}, {outcome.signal_name}" if what else outcome.signal_name
    text = (
        f"llama.cpp in xllamacpp crashed ({said}) on its first decode "
        f"of {model_name}, tried in a separate process; the model was not loaded. "
    )
    install = native_build.xllamacpp_install_command
    backend = native_build.xllamacpp_backend(outcome.system_info, outcome.devices)
    if backend:
        wheels = native_build.XLLAMACPP_WHEELS.get(backend, ())
        others = " or ".join(wheels[1:])
        text += f"This is xllamacpp's {backend} wheel: run the model on the CPU (--gpu-layers 0)"
        if wheels:
            text += (
                f", or install the {backend} wheel that matches this machine's driver: "
                f"{install(wheels[0])}" + (f" (or {others} in its place)" if others else "")
            )
        return f"{text}, or its CPU wheel: {install()} . {OTHER_ENGINE}"
    lacks = native_build.xllamacpp_cpu_lacks()
    if lacks and what == "an illegal instruction":
        return (
            f"{text}xllamacpp's CPU wheel is built for CPUs with AVX2, FMA and F16C, and this "
            f"one lacks {', '.join(lacks).upper()}: xllamacpp cannot run here. {OTHER_ENGINE}"
        )
    text += "This is xllamacpp's CPU wheel"
    gpus = [g for g in native_build.gpu_devices() if g in native_build.XLLAMACPP_WHEELS]
    if gpus:
        wheel = native_build.XLLAMACPP_WHEELS[gpus[0]][0]
        text += f"; this machine has a {gpus[0]} GPU, for which: {install(wheel)}"
    text += (
        f". Reinstall it in case its files are damaged ({install()}); if it still crashes, "
        f"the model file may be damaged: download it again. {OTHER_ENGINE}"
    )
    return text
