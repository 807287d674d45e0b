"""Shared fixtures: every test runs with its own config and data dirs, offline.

Add fixtures here only when several test files need them; keep each one small.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

TESTS_DIR = Path(__file__).resolve().parent
if str(TESTS_DIR) not in sys.path:
    sys.path.insert(0, str(TESTS_DIR))

from ggufgen import Piece, write_scripted_model  # noqa: E402

import agentworld_tui.domains  # noqa: E402, F401  # registers the shipped domains, as front-ends do

if TYPE_CHECKING:
    from agentworld_tui.engines.llama import LlamaEngine

ScriptedModel = Callable[..., Path]


@pytest.fixture(autouse=True)
def isolated_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """Point the app's config and data dirs at fresh folders, and keep the hub offline."""
    config = tmp_path / "config"
    data = tmp_path / "data"
    monkeypatch.setenv("AGENTWORLD_CONFIG_DIR", str(config))
    monkeypatch.setenv("AGENTWORLD_DATA_DIR", str(data))
    monkeypatch.setenv("AGENTWORLD_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    from agentworld_tui.world import folders

    monkeypatch.setattr(folders, "_user_folder", config)  # as a front-end hands it in
    return {"config": config, "data": data}


@pytest.fixture(autouse=True)
def _logging_as_it_was() -> Iterator[None]:
    """A command run in-process sets up the app's log file (and stops its records from
    propagating); the next test gets the logger as it was."""
    import logging

    logger = logging.getLogger("agentworld")
    handlers, propagate, level = list(logger.handlers), logger.propagate, logger.level
    yield
    for handler in list(logger.handlers):
        if handler not in handlers:
            logger.removeHandler(handler)
            handler.close()
    logger.propagate, logger.level = propagate, level


@pytest.fixture
def scripted_model(tmp_path: Path) -> ScriptedModel:
    """Factory: ``scripted_model(script, **kwargs)`` writes a scripted GGUF into tmp_path.

    Keyword arguments go to ``ggufgen.write_scripted_model`` (arch, chat_template...).
    """
    made = 0

    def make(script: str | Sequence[Piece], name: str = "", **kwargs: object) -> Path:
        nonlocal made
        made += 1
        path = tmp_path / (name or f"scripted-{made}.gguf")
        return write_scripted_model(path, script, **kwargs)  # type: ignore[arg-type]

    return make


@pytest.fixture
def llama_engine() -> Iterator[Callable[..., LlamaEngine]]:
    """Factory: ``llama_engine(path, **kwargs)`` loads a LlamaEngine (n_ctx 2048, one
    thread unless given); every engine made is unloaded at the end of the test."""
    from agentworld_tui.engines.llama import LlamaEngine

    loaded: list[LlamaEngine] = []

    def load(path: Path, **kwargs: Any) -> LlamaEngine:
        kwargs.setdefault("n_ctx", 2048)
        kwargs.setdefault("threads", 1)
        engine = LlamaEngine(path, **kwargs)
        engine.load()
        loaded.append(engine)
        return engine

    yield load
    for engine in loaded:
        engine.unload()


@pytest.fixture
def xllama_engine() -> Iterator[Callable[..., Any]]:
    """Factory: ``xllama_engine(path, **kwargs)`` loads an XLlamaEngine (n_ctx 2048 a slot,
    one thread, two slots unless given); every engine made is unloaded at the end."""
    from agentworld_tui.engines.xllamacpp import XLlamaEngine

    loaded: list[XLlamaEngine] = []

    def load(path: Path, **kwargs: Any) -> XLlamaEngine:
        kwargs.setdefault("n_ctx", 2048)
        kwargs.setdefault("threads", 1)
        kwargs.setdefault("slots", 2)
        engine = XLlamaEngine(path, **kwargs)
        engine.load()
        loaded.append(engine)
        return engine

    yield load
    for engine in loaded:
        engine.unload()


@pytest.fixture
def online_hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Any]:
    """A Hub-shaped server on 127.0.0.1 with huggingface-hub pointed at it and allowed
    online for this test; HF_HOME is a fresh folder."""
    from hubserver import HubServer
    from huggingface_hub import constants

    server = HubServer().start()
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_ENDPOINT", server.url)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    try:
        yield server
    finally:
        server.stop()
