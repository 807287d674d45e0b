"""The model in the app: loading it at start, picking another (F3), and what the status
line says about it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from rich.text import Text

from agentworld_tui.config import (
    Settings,
    SettingsFileError,
    settings_path,
    update_settings_file,
)
from agentworld_tui.engines.base import Engine, EngineError
from agentworld_tui.engines.factory import make_engine
from agentworld_tui.simulator import Simulator, home_on
from agentworld_tui.ui.host import TabsAndDialogs
from agentworld_tui.ui.widgets.status_bar import StatusInfo


class LoadingHost(TabsAndDialogs, Protocol):
    """What loading a model needs of the host."""

    @property
    def settings(self) -> Settings: ...

    @property
    def simulator(self) -> Simulator: ...

    @property
    def tabs_ready(self) -> asyncio.Event: ...

    @property
    def model_ready(self) -> asyncio.Event: ...

    @property
    def is_running(self) -> bool:
        """False once the app has closed (the engine's thread can outlive it)."""
        ...

    def call_from_thread(self, callback: Callable[[], None]) -> None: ...

    def call_after_refresh(self, callback: Callable[[], None]) -> bool: ...

    def show_status(self) -> None: ...

    def focus_editor(self) -> None: ...


class ModelLoading:
    """F3, and the model's part of the status line."""

    def __init__(self, host: LoadingHost) -> None:
        self.host = host
        self.model = StatusInfo(model="no model")
        """What the status line says of the model (the pane's counters go beside it)."""

    def simulator(self, engine: Engine | None) -> Simulator:
        """The app's simulator, on the configured engine unless one is given."""
        error = ""
        if engine is None:
            try:
                engine = make_engine(self.host.settings.engine_spec())
            except EngineError:
                error = no_model_message()
        if engine is not None:
            self.model = StatusInfo(model=engine.info.name, phase="loading model")
        settings = self.host.settings
        return Simulator(
            engine,
            settings.generation_params(),
            engine_error=error,
            concurrency=settings.server.concurrency,
        )

    def start(self) -> None:
        host = self.host
        host.simulator.home = home_on(asyncio.get_running_loop())
        for problem in host.settings.problems:
            host.notify(problem, title="Settings", severity="warning", timeout=15)
        if host.simulator.engine is None:
            self.model.phase = ""
        else:
            host.simulator.load(self._on_engine(self._phase), self._on_engine(self._loaded))

    def status(self, pane: StatusInfo) -> StatusInfo:
        """The status line: the model's part, then the shown pane's counters."""
        base = self.model
        info = StatusInfo(model=base.model, where=base.where, n_ctx=base.n_ctx, phase=base.phase)
        info.context_used = pane.context_used
        info.generated, info.elapsed = pane.generated, pane.elapsed
        info.tokens_per_second = pane.tokens_per_second
        info.reasoning_tokens, info.reasoning_budget = pane.reasoning_tokens, pane.reasoning_budget
        info.omitted_turns = pane.omitted_turns
        info.phase = base.phase or pane.phase
        if pane.n_ctx:
            info.n_ctx = pane.n_ctx
        return info

    def maybe_ready(self) -> None:
        host = self.host
        if host.simulator.loaded and host.tabs_ready.is_set():
            host.model_ready.set()

    # -- picking another model ----------------------------------------------------------
    def pick(self) -> None:
        from agentworld_tui.ui.screens.model_picker import ModelPicker, engine_in_use

        host = self.host
        if host.simulator.any_busy():
            host.notify("Stop the running turn first (Esc).", severity="warning")
            return
        loaded = host.simulator.engine
        model = host.settings.model
        engine = engine_in_use(loaded.info if loaded else None, model.engine, model.slots)
        host.push_screen(ModelPicker(engine=engine), self.use)

    def use(self, path: Path | None) -> None:
        """Load ``path`` in place of the current model and, once it has loaded, remember it
        in the settings (only that key of the settings file changes). A model that fails
        to load (llama.cpp crashed on it in its trial) is never saved: every later start
        would fail."""
        host = self.host
        host.call_after_refresh(host.focus_editor)
        if path is None:
            return
        from agentworld_tui.engines.model_file import check_gguf

        try:
            check_gguf(Path(path).expanduser())
        except EngineError as exc:
            host.notify(str(exc), title="Model", severity="error", timeout=15)
            return
        settings = host.settings
        before = settings.model.path, settings.server.url
        settings.model.path = str(path)
        settings.server.url = ""

        def loaded(error: str | None) -> None:
            if error is None:
                self._remember()
            else:
                settings.model.path, settings.server.url = before

        try:
            engine = make_engine(settings.engine_spec())
        except EngineError as exc:
            loaded(str(exc))
            host.notify(str(exc), severity="error")
            return
        self.switch(engine, loaded)

    def switch(self, engine: Engine, then: Callable[[str | None], None] | None = None) -> None:
        """Load ``engine`` in place of the current one; ``then`` is told the outcome on
        the app's thread once the status line says it."""
        host = self.host
        host.model_ready.clear()
        self.model = StatusInfo(model=engine.info.name, phase="loading model")

        def loaded(error: str | None) -> None:
            self._loaded(error)
            if then is not None:
                then(error)

        host.simulator.load(self._on_engine(self._phase), self._on_engine(loaded), engine=engine)
        host.show_status()

    def _remember(self) -> None:
        """Only the model's keys of the settings file change; flags given for this run
        are never written."""
        path = self.host.settings.model.path
        try:
            update_settings_file({"model.path": path, "server.url": ""})
        except (SettingsFileError, OSError) as exc:
            self.host.notify(f"The model is used but not saved: {exc}", severity="warning")

    # -- from the engine's thread -------------------------------------------------------
    def _on_engine(self, callback: Callable[..., object]) -> Callable[..., None]:
        """``callback`` run on the app's thread for the engine thread, which can outlive the
        app (a model still loading when it quits): once the app has closed, nothing runs."""
        host = self.host

        def hand_over(*args: object) -> None:
            def run() -> None:
                if host.is_running:
                    callback(*args)

            if host.is_running:
                with contextlib.suppress(RuntimeError):  # it has closed just now
                    host.call_from_thread(run)

        return hand_over

    def _phase(self, message: str) -> None:
        self.model.phase = "" if message == "ready" else message
        self.host.show_status()

    def _loaded(self, error: str | None) -> None:
        host = self.host
        if error:
            self.model.phase = "model failed to load"
            host.notify(error, title="Model", severity="error", timeout=30)
            for pane in host.panes():
                pane.screen_view.append_lines([Text(error, style="bold red")])
        else:
            engine = host.simulator.engine
            assert engine is not None
            info = engine.info
            self.model = StatusInfo(model=info.name, where=info.where, n_ctx=info.n_ctx)
            for pane in host.panes():
                if pane.no_model_lines and not pane.busy:
                    pane.no_model_lines = 0
                    pane.show_session()  # the "no model" help goes
            self.maybe_ready()
        host.show_status()


def no_model_message() -> str:
    return (
        "no model configured: pass --model PATH.gguf (or --server URL), or set "
        f"[model] path in {settings_path()}"
    )
