"""The model in the app: loading it at start, picking another (F3), and what the status
line says about it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text

from agentworld_tui.config import settings_path
from agentworld_tui.engines.base import Engine, EngineError
from agentworld_tui.engines.factory import make_engine
from agentworld_tui.simulator import Simulator, home_on
from agentworld_tui.ui.widgets.status_bar import StatusInfo

if TYPE_CHECKING:
    from agentworld_tui.ui.app import AgentWorldApp


class ModelLoading:
    def __init__(self, app: AgentWorldApp) -> None:
        self.app = app
        self.model = StatusInfo(model="no model")
        """What the status line says of the model (the pane's counters go beside it)."""

    def simulator(self, engine: Engine | None) -> Simulator:
        """The app's simulator, on the configured engine unless one is given."""
        error = ""
        if engine is None:
            try:
                engine = make_engine(self.app.settings.engine_spec())
            except EngineError:
                error = no_model_message()
        if engine is not None:
            self.model = StatusInfo(model=engine.info.name, phase="loading model")
        settings = self.app.settings
        return Simulator(
            engine,
            settings.generation_params(),
            engine_error=error,
            concurrency=settings.server.concurrency,
        )

    def start(self) -> None:
        app = self.app
        app.simulator.home = home_on(asyncio.get_running_loop())
        for problem in app.settings.problems:
            app.notify(problem, title="Settings", severity="warning", timeout=15)
        if app.engine is None:
            self.model.phase = ""
        else:
            app.simulator.load(self._on_engine(self._phase), self._on_engine(self._loaded))

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
        app = self.app
        if app.simulator.loaded and app.tabs_ready.is_set():
            app.model_ready.set()

    # -- picking another model ----------------------------------------------------------
    def pick(self) -> None:
        from agentworld_tui.ui.screens.model_picker import ModelPicker, engine_in_use

        app = self.app
        if app.simulator.any_busy():
            app.notify("Stop the running turn first (Esc).", severity="warning")
            return
        loaded = app.simulator.engine
        model = app.settings.model
        engine = engine_in_use(loaded.info if loaded else None, model.engine, model.slots)
        app.push_screen(ModelPicker(engine=engine), self.use)

    def use(self, path: Path | None) -> None:
        """Load ``path`` in place of the current model and, once it has loaded, remember it
        in the settings (only that key of the settings file changes). A model that fails
        to load (llama.cpp crashed on it in its trial) is never saved: every later start
        would fail."""
        app = self.app
        app.call_after_refresh(app.focus_editor)
        if path is None:
            return
        from agentworld_tui.engines.llama import check_gguf

        try:
            check_gguf(Path(path).expanduser())
        except EngineError as exc:
            app.notify(str(exc), title="Model", severity="error", timeout=15)
            return
        settings = app.settings
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
            app.notify(str(exc), severity="error")
            return
        self.switch(engine, loaded)

    def switch(self, engine: Engine, then: Callable[[str | None], None] | None = None) -> None:
        """Load ``engine`` in place of the current one; ``then`` is told the outcome on
        the app's thread once the status line says it."""
        app = self.app
        app.model_ready.clear()
        self.model = StatusInfo(model=engine.info.name, phase="loading model")

        def loaded(error: str | None) -> None:
            self._loaded(error)
            if then is not None:
                then(error)

        app.simulator.load(self._on_engine(self._phase), self._on_engine(loaded), engine=engine)
        app.show_status()

    def _remember(self) -> None:
        """Only the model's keys of the settings file change; flags given for this run
        are never written."""
        from agentworld_tui.config import SettingsFileError, update_settings_file

        path = self.app.settings.model.path
        try:
            update_settings_file({"model.path": path, "server.url": ""})
        except (SettingsFileError, OSError) as exc:
            self.app.notify(f"The model is used but not saved: {exc}", severity="warning")

    # -- from the engine's thread -------------------------------------------------------
    def _on_engine(self, callback: Callable[..., object]) -> Callable[..., None]:
        """``callback`` run on the app's thread for the engine thread, which can outlive the
        app (a model still loading when it quits): once the app has closed, nothing runs."""
        app = self.app

        def hand_over(*args: object) -> None:
            def run() -> None:
                if app.is_running:
                    callback(*args)

            if app.is_running:
                with contextlib.suppress(RuntimeError):  # it has closed just now
                    app.call_from_thread(run)

        return hand_over

    def _phase(self, message: str) -> None:
        self.model.phase = "" if message == "ready" else message
        self.app.show_status()

    def _loaded(self, error: str | None) -> None:
        app = self.app
        if error:
            self.model.phase = "model failed to load"
            app.notify(error, title="Model", severity="error", timeout=30)
            for pane in app.panes():
                pane.screen_view.append_lines([Text(error, style="bold red")])
        else:
            engine = app.engine
            assert engine is not None
            info = engine.info
            self.model = StatusInfo(model=info.name, where=info.where, n_ctx=info.n_ctx)
            for pane in app.panes():
                if pane.no_model_lines and not pane.busy:
                    pane.no_model_lines = 0
                    pane.show_session()  # the "no model" help goes
            self.maybe_ready()
        app.show_status()


def no_model_message() -> str:
    return (
        "no model configured: pass --model PATH.gguf (or --server URL), or set "
        f"[model] path in {settings_path()}"
    )
