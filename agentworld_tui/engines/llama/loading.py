"""Loading a model into llama-cpp-python in this process, and its trial before that.

The load passes the same arguments as the crash trial's child process (``engines.probe``),
keeps llama.cpp's own messages off the screen the app draws on, and leaves llama-cpp-python's
chat-template compiler out (prompts are rendered by ``engines.template``, within bounds).
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agentworld_tui.engines.base import EngineError, ErrorKind, ProgressCallback
from agentworld_tui.engines.probe import CrashProbe, ProbeOutcome, Trial, crash_message
from agentworld_tui.engines.threads import physical_cores

native_log = logging.getLogger("agentworld.llama_cpp")

# ggml_log_level: NONE 0, DEBUG 1, INFO 2, WARN 3, ERROR 4, CONT 5 (continues the last one).
_LEVELS = {1: logging.DEBUG, 2: logging.INFO, 3: logging.WARNING, 4: logging.ERROR}
_log_callback: Any = None
_LOADING = threading.Lock()


def route_native_logs() -> None:
    """Send llama.cpp's and ggml's own messages to the log file, never to the screen."""
    global _log_callback
    import llama_cpp

    if _log_callback is not None:
        return

    @llama_cpp.llama_log_callback  # type: ignore[untyped-decorator]
    def _callback(level: int, text: bytes, _user: ctypes.c_void_p) -> None:
        message = text.decode("utf-8", "replace").rstrip()
        if message:
            native_log.log(_LEVELS.get(level, logging.DEBUG), "%s", message)

    _log_callback = _callback
    llama_cpp.llama_log_set(_callback, ctypes.c_void_p(0))


class _StderrToLog(io.TextIOBase):
    def write(self, text: str) -> int:
        if text.strip():
            native_log.debug("%s", text.rstrip())
        return len(text)


class _UnusedChatFormatter:
    """Stands in for llama-cpp-python's ``Jinja2ChatFormatter`` while a model loads.

    ``Llama()`` compiles every chat template in the file for its own chat API, which the
    engine never calls (prompts are rendered by ``engines.template``, within bounds), and
    Jinja's compiler folds constant expressions: ``{{ '' | center(300000000) }}`` would
    build its string at load, unbounded. This formatter compiles nothing; a call of the
    chat API it stands behind says why it is not there.
    """

    def __init__(self, *args: object, **kwargs: object) -> None:
        pass

    def to_chat_handler(self) -> Any:
        def handler(*args: object, **kwargs: object) -> Any:
            raise RuntimeError("agentworld renders chat prompts itself (engines.template)")

        return handler


@contextlib.contextmanager
def templates_left_uncompiled() -> Iterator[None]:
    import llama_cpp.llama_chat_format as chat_format

    # tests/test_template_bounds.py fails if llama-cpp-python stops looking it up here.
    with _LOADING:  # two engines loading at once must not restore each other's stand-in
        real = chat_format.Jinja2ChatFormatter
        chat_format.Jinja2ChatFormatter = _UnusedChatFormatter  # type: ignore[assignment,misc]
        try:
            yield
        finally:
            chat_format.Jinja2ChatFormatter = real  # type: ignore[misc]


def llama_arguments(
    model_path: Path, *, n_ctx: int, gpu_layers: int, threads: int, n_batch: int
) -> dict[str, Any]:
    """``llama_cpp.Llama``'s arguments, the same for the engine and its trial (``probe``).

    verbose=True because verbose=False points the process's stdout and stderr at
    /dev/null while loading, which would blank the running app's own screen; the native
    log goes to the log file instead, and Python-side prints are caught by the caller.
    """
    return {
        "model_path": str(model_path),
        "n_ctx": n_ctx,
        "n_gpu_layers": gpu_layers,
        "n_threads": threads,
        "n_threads_batch": threads,
        "n_batch": n_batch,
        "use_mmap": True,
        "verbose": True,
    }


def placement(gpu_layers: int, threads: int) -> tuple[int, int]:
    """The GPU layers and threads llama.cpp is given for these settings (-1 and 0: as many
    as this build and machine have)."""
    import llama_cpp

    if gpu_layers < 0:
        gpu_layers = -1 if llama_cpp.llama_supports_gpu_offload() else 0
    return gpu_layers, threads or physical_cores()


def system_info() -> str:
    """llama.cpp's line about what this build uses (CPU features, backends)."""
    import llama_cpp

    info = llama_cpp.llama_print_system_info()
    return info.decode("utf-8", "replace") if isinstance(info, bytes) else str(info)


def crash_error(model_path: Path, outcome: ProbeOutcome, name: str = "") -> EngineError:
    """The error of a model whose trial crashed, with the fix for this machine (``name``
    says which model, else its file's name)."""
    message = crash_message(name or model_path.name, outcome, system_info())
    return EngineError(message, ErrorKind.CRASHED)


def try_first(probe: CrashProbe, trial: Trial, say: ProgressCallback) -> None:
    """Run the model's first decode in a child process unless it passed before; raises
    EngineError (``ErrorKind.CRASHED``) when llama.cpp crashed there."""
    outcome = probe.first_decode(trial, say)
    if outcome.crashed:
        raise crash_error(trial.model_path, outcome)


def open_model(model_path: Path, *, n_ctx: int, gpu_layers: int, threads: int, n_batch: int) -> Any:
    """The model loaded by llama-cpp-python, its prints sent to the log; EngineError when
    llama.cpp refuses the file or the context."""
    import llama_cpp

    arguments = llama_arguments(
        model_path, n_ctx=n_ctx, gpu_layers=gpu_layers, threads=threads, n_batch=n_batch
    )
    try:
        with contextlib.redirect_stderr(_StderrToLog()), templates_left_uncompiled():
            return llama_cpp.Llama(**arguments)
    except (ValueError, RuntimeError, OSError) as exc:
        raise EngineError(load_failure(model_path, str(exc), n_ctx)) from exc


def load_failure(model_path: Path, detail: str, n_ctx: int) -> str:
    text = f"could not load {model_path.name}: {detail}"
    if "context" in detail.lower():
        text += f" (context {n_ctx}; try a smaller --ctx)"
    else:
        text += (
            ". The file may be truncated, or its architecture may be newer than this "
            "llama.cpp build (see the log file; `agentworld doctor` shows the build)."
        )
    return text
