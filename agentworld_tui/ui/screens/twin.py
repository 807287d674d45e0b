"""Twin a tab with reality: choose the twin of the tab's domain (a sandbox seeded from a
folder for the terminal and SWE; the real server for MCP), the side the agent receives and
the task's check, then start it here, so that a twin that cannot start says why where the
user is looking and nothing changes.

Dismisses with a ``TwinDialogResult``: a started twin (its runner is the caller's to close),
or none to take the tab's twin away; None when cancelled. Web, Android, OS and Search have
no twin: the dialog says so.
"""

from __future__ import annotations

import shlex
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Checkbox, Label, RadioButton, RadioSet, Select, Static

from agentworld_tui.ui.twinning import StartedTwin, TwinChoice, start_twin
from agentworld_tui.ui.widgets.field import Field
from agentworld_tui.ui.widgets.path_suggester import PathSuggester
from agentworld_tui.world.sanitize import sanitize

if TYPE_CHECKING:
    from agentworld_tui.reality.sandbox import BackendChoice
    from agentworld_tui.reality.spec import Deliver

SANDBOX_DOMAINS = ("terminal", "swe")
TWIN_DOMAINS = ("terminal", "swe", "mcp")
"""``reality.TWIN_DOMAINS`` (written out: the dialog opens without loading reality)."""
BACKENDS: tuple[BackendChoice, ...] = ("auto", "bwrap", "unshare", "podman", "docker")
WORKDIRS = {"terminal": "/app", "swe": "/testbed"}
NO_TWIN = {
    "web": "a browser",
    "android": "a phone",
    "os": "a desktop",
    "search": "a search engine",
}
HOST_WARNING = (
    "DANGEROUS: run on this machine itself, unsandboxed: the agent's commands act on your "
    "files, processes and network"
)


@dataclass(frozen=True)
class TwinDialogResult:
    started: StartedTwin | None
    """The twin started: the tab is twinned with it. None: untwin."""


class TwinDialog(ModalScreen[TwinDialogResult | None]):
    DEFAULT_CSS = """
    TwinDialog { align: center middle; }
    TwinDialog > Vertical {
        width: 96; max-width: 95%; height: auto; max-height: 95%;
        border: thick $primary; background: $surface; padding: 0 1;
    }
    TwinDialog #twin-form { height: auto; max-height: 24; }
    TwinDialog #twin-title { text-style: bold; }
    TwinDialog .hint { color: $text-muted; height: auto; margin-bottom: 1; }
    TwinDialog .row { height: 1; margin-bottom: 1; }
    TwinDialog .row Label { width: 26; color: $text-muted; }
    TwinDialog .row Field, TwinDialog .row Select { width: 1fr; }
    TwinDialog #twin-current { color: $success; height: auto; margin-bottom: 1; }
    TwinDialog #on-host { color: $error; text-style: bold; }
    TwinDialog RadioSet { height: auto; width: 1fr; }
    TwinDialog #deliver-row { height: 2; }
    TwinDialog Checkbox { height: 1; margin-bottom: 1; }
    TwinDialog #twin-error { color: $error; height: auto; }
    TwinDialog #twin-busy { color: $warning; height: auto; }
    TwinDialog #twin-buttons { height: auto; align-horizontal: right; margin-top: 1; }
    TwinDialog #twin-buttons Button { margin-left: 1; }
    """
    BINDINGS = [
        Binding("escape", "cancel", "Cancel"),
        Binding("ctrl+s", "start", "Start the twin", priority=True),
    ]

    def __init__(self, domain: str, title: str, *, current: str = "") -> None:
        """``current``: the tab's twin now, described ("" when it has none)."""
        super().__init__()
        self.domain = domain
        self.title_text = title
        self.current = current
        self.starting = False
        self.closed = False
        self._shown_error = ""

    @property
    def has_twin(self) -> bool:
        return self.domain in TWIN_DOMAINS

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Text(f"Twin the {self.title_text} tab with reality"), id="twin-title")
            if not self.has_twin:
                what = NO_TWIN.get(self.domain, "its real counterpart")
                yield Static(
                    Text(
                        f"The {self.title_text} tab has no twin: its real counterpart ({what}) "
                        "is not something agentworld drives. It runs in simulation only. "
                        "Twins exist for the Terminal, SWE and MCP tabs."
                    ),
                    id="twin-none",
                )
                with Horizontal(id="twin-buttons"):
                    yield Button("Close", id="cancel", variant="primary")
                return
            with VerticalScroll(id="twin-form"):
                yield Static(
                    Text(
                        "Each action goes to the world model and to the twin at once; the "
                        "tab shows the prediction beside reality, with how far they differ. "
                        "The tab starts afresh (its turns are kept as a saved session)."
                    ),
                    classes="hint",
                )
                if self.current:
                    yield Static(
                        Text(f"Now twinned with {sanitize(self.current)}."), id="twin-current"
                    )
                if self.domain in SANDBOX_DOMAINS:
                    yield from self._sandbox_fields()
                else:
                    yield from self._server_fields()
                with Horizontal(classes="row", id="deliver-row"):
                    yield Label("The agent receives")
                    with RadioSet(id="deliver", compact=True):
                        yield RadioButton("Reality's answer", value=True, id="deliver-real")
                        yield RadioButton("The world model's prediction", id="deliver-sim")
            yield Static(id="twin-busy")
            yield Static(id="twin-error")
            with Horizontal(id="twin-buttons"):
                yield Button("Cancel", id="cancel")
                if self.current:
                    yield Button("Untwin", id="untwin", variant="warning")
                yield Button("Start the twin (Ctrl+S)", id="start", variant="primary")

    def _sandbox_fields(self) -> ComposeResult:
        workdir = WORKDIRS[self.domain]
        with Horizontal(classes="row"):
            yield Label(f"Folder copied to {workdir}")
            yield Field(
                placeholder="~/project (empty: an empty folder)",
                id="seed",
                suggester=PathSuggester(),
                compact=True,
            )
        with Horizontal(classes="row"):
            yield Label("Sandbox")
            yield Select(
                [(b, b) for b in BACKENDS],
                value="auto",
                allow_blank=False,
                id="backend",
                compact=True,
            )
        with Horizontal(classes="row"):
            yield Label("Container image")
            yield Field(
                placeholder="podman or docker only: an image with bash, tmux, coreutils",
                id="image",
                compact=True,
            )
        with Horizontal(classes="row"):
            yield Label("Task check (optional)")
            yield Field(
                placeholder="run in the twin at the end, exit 0 = success: pytest -q",
                id="check",
                compact=True,
            )
        yield Checkbox("Give the sandbox the network (none by default)", id="network", compact=True)
        yield Checkbox(HOST_WARNING, id="on-host", compact=True)

    def _server_fields(self) -> ComposeResult:
        with Horizontal(classes="row"):
            yield Label("Server command (stdio)")
            yield Field(placeholder="python server.py", id="command", compact=True)
        with Horizontal(classes="row"):
            yield Label("or its URL (HTTP)")
            yield Field(placeholder="http://127.0.0.1:8000/mcp", id="url", compact=True)

    def on_mount(self) -> None:
        if not self.has_twin:
            self.query_one("#cancel", Button).focus()
            return
        first = "#seed" if self.domain in SANDBOX_DOMAINS else "#command"
        self.query_one(first, Field).focus()

    # -- reading the form ---------------------------------------------------------------
    def _value(self, name: str) -> str:
        return self.query_one(f"#{name}", Field).value.strip()

    def _checked(self, name: str) -> bool:
        return self.query_one(f"#{name}", Checkbox).value

    def choice(self) -> TwinChoice:
        """The twin the form asks for; ValueError with one line when it cannot be."""
        from agentworld_tui.reality.spec import TwinSpec

        deliver: Deliver = "sim" if self.query_one("#deliver-sim", RadioButton).value else "real"
        if self.domain in SANDBOX_DOMAINS:
            backend = self.query_one("#backend", Select).value
            spec = TwinSpec(
                self.domain,
                seed=self._value("seed"),
                backend=backend if isinstance(backend, str) else "auto",  # type: ignore[arg-type]
                network=self._checked("network"),
                on_host=self._checked("on-host"),
                image=self._value("image"),
            )
            check = self._value("check")
        else:
            try:
                command = tuple(shlex.split(self._value("command")))
            except ValueError as exc:
                raise ValueError(f"the server's command: {exc}") from None
            spec = TwinSpec("mcp", command=command, url=self._value("url"))
            check = ""
        problem = spec.problem()
        if problem:
            raise ValueError(problem)
        return TwinChoice(spec, deliver=deliver, check=check)

    # -- acting -------------------------------------------------------------------------
    def say(self, error: str = "", busy: str = "") -> None:
        self._shown_error = error
        self.query_one("#twin-error", Static).update(Text(sanitize(error)))
        self.query_one("#twin-busy", Static).update(Text(busy))

    def on_checkbox_changed(self, event: Checkbox.Changed) -> None:
        if event.checkbox.id == "on-host":
            backend = self.query_one("#backend", Select)
            if event.value:
                backend.value = "auto"
            backend.disabled = event.value

    def on_button_pressed(self, event: Button.Pressed) -> None:
        button = event.button.id
        if button == "start":
            self.action_start()
        elif button == "untwin":
            self._close(TwinDialogResult(None))
        else:
            self.action_cancel()

    def action_cancel(self) -> None:
        self._close(None)

    def action_start(self) -> None:
        if not self.has_twin or self.starting:
            return
        try:
            choice = self.choice()
        except ValueError as exc:
            self.say(str(exc))
            return
        self.starting = True
        self.query_one("#start", Button).disabled = True
        self.say(busy="Starting the twin… (Esc cancels)")
        threading.Thread(target=self._start, args=(choice,), name="twin-start", daemon=True).start()

    def _start(self, choice: TwinChoice) -> None:
        """On a thread: start the twin, then hand it to the dialog (or close it if the
        dialog is gone)."""
        from agentworld_tui.reality.spec import TwinStartError

        try:
            started = start_twin(choice)
        except TwinStartError as exc:
            self._deliver(None, str(exc))
            return
        except Exception as exc:  # a twin's own bug: said in the dialog, never a traceback
            self._deliver(None, f"the twin did not start: {type(exc).__name__}: {exc}")
            return
        self._deliver(started, "")

    def _deliver(self, started: StartedTwin | None, error: str) -> None:
        try:
            self.app.call_from_thread(self._started, started, error)
        except RuntimeError:  # the app has closed meanwhile
            if started is not None:
                started.runner.close()

    def _started(self, started: StartedTwin | None, error: str) -> None:
        self.starting = False
        if self.closed:
            if started is not None:
                from agentworld_tui.ui.twinning import close_runner

                close_runner(started.runner)
            return
        if started is None:
            self.query_one("#start", Button).disabled = False
            self.say(error)
            return
        self._close(TwinDialogResult(started))

    def _close(self, result: TwinDialogResult | None) -> None:
        self.closed = True
        self.dismiss(result)
