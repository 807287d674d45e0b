"""The one place an engine is made, from a spec that says which model and where."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from pathlib import Path

from agentworld_tui.engines.base import Engine, EngineError

ENGINES = ("", "llama-cpp-python", "xllamacpp")
"""The in-process engines a spec may name ("" is llama-cpp-python)."""


@dataclass(frozen=True)
class EngineSpec:
    """A local GGUF file (``model_path``) or an OpenAI-compatible server (``server``, with
    the ``model`` it serves); the rest tunes whichever it is."""

    model_path: str = ""
    server: str = ""
    model: str = ""
    api_key_env: str = ""
    """The environment variable holding the server's API key (the key is never stored)."""
    n_ctx: int = 0
    gpu_layers: int = -1
    threads: int = 0
    idle_timeout: float = 120.0
    """Seconds a server may stay silent in the middle of an answer."""
    engine: str = ""
    """The in-process engine for a model file: "llama-cpp-python" (also when empty) or
    "xllamacpp" (llama.cpp's server engine, ``slots`` conversations at once)."""
    slots: int = 0
    """xllamacpp's parallel slots (0: its default)."""
    probe_cache: str = ""
    """Where a local model's passed crash trials are remembered, for either in-process
    engine (``engines.probe``);
    "" remembers them in this process only."""

    @property
    def given(self) -> bool:
        return bool(self.server or self.model_path)

    def problem(self) -> str:
        """Why this spec cannot make an engine ("" when it can)."""
        if self.server and self.model_path:
            return "give either a server or a model file, not both"
        if self.model and not self.server:
            return "a model name is a model on a server: give the server too"
        if not self.given:
            return "no model configured"
        if self.engine not in ENGINES:
            return f"no engine {self.engine!r}: choose {' or '.join(ENGINES[1:])}"
        return ""


def make_engine(spec: EngineSpec) -> Engine:
    """The engine ``spec`` names; raises EngineError when it names none."""
    problem = spec.problem()
    if problem:
        raise EngineError(problem)
    if spec.server:
        from agentworld_tui.engines.remote import RemoteEngine

        extra: dict[str, float] = {}
        if "idle_timeout" in inspect.signature(RemoteEngine).parameters:
            extra["idle_timeout"] = spec.idle_timeout
        return RemoteEngine(
            spec.server,
            model=spec.model,
            api_key_env=spec.api_key_env,
            n_ctx=spec.n_ctx,
            **extra,
        )
    from agentworld_tui.engines.probe import CrashProbe

    probe = CrashProbe(Path(spec.probe_cache) if spec.probe_cache else None)
    if spec.engine == "xllamacpp":
        from agentworld_tui.engines.xllamacpp import XLlamaEngine

        return XLlamaEngine(
            spec.model_path,
            n_ctx=spec.n_ctx,
            gpu_layers=spec.gpu_layers,
            threads=spec.threads,
            slots=spec.slots,
            probe=probe,
        )
    from agentworld_tui.engines.llama import LlamaEngine  # numpy: only with a model

    return LlamaEngine(
        spec.model_path,
        n_ctx=spec.n_ctx,
        gpu_layers=spec.gpu_layers,
        threads=spec.threads,
        probe=probe,
    )
