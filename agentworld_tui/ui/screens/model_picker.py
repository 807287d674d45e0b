"""Pick a model from the catalog (or a local file), download it with progress, use it.

Opens by itself on first start when no model is set, with the recommended entry that fits
this machine selected.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, DataTable, Input, Label, ProgressBar, Static

from agentworld_tui.engines.base import EngineInfo
from agentworld_tui.models.cache import local_path
from agentworld_tui.models.catalog import Catalog, CatalogEntry, load_catalog
from agentworld_tui.models.download import DownloadCancelled, DownloadError, PullProgress, pull
from agentworld_tui.models.fit import FitVerdict, estimate_entry_fit, recommend
from agentworld_tui.models.hardware import MachineMemory, machine_memory
from agentworld_tui.ui.widgets.field import Field
from agentworld_tui.ui.widgets.path_suggester import PathSuggester

STATUS_STYLE = {"fits": "green", "tight": "yellow", "does_not_fit": "red"}


def _size(n: float) -> str:
    return f"{n / 1e9:.1f} GB" if n >= 1e9 else f"{n / 1e6:.0f} MB"


def progress_line(p: PullProgress) -> str:
    eta = f", {int(p.eta) // 60}:{int(p.eta) % 60:02d} left" if p.eta is not None else ""
    part = f" (part {p.file_index}/{p.file_count})" if p.file_count > 1 else ""
    return f"{_size(p.done)} of {_size(p.total)} at {_size(p.speed)}/s{eta}{part}"


def engine_in_use(info: EngineInfo | None, setting: str, slots: int = 0) -> str:
    """The in-process engine that runs (or, with none loaded, will run) a model picked here:
    the one loaded, else the one the settings name."""
    if info is not None and info.engine:
        setting, slots = info.engine, info.parallel
    name = setting or "llama-cpp-python"
    return f"{name}, {slots} slots" if slots > 1 else name


class ModelPicker(ModalScreen[Path | None]):
    DEFAULT_CSS = """
    ModelPicker { align: center middle; }
    ModelPicker > Vertical {
        width: 120; max-width: 96%; height: auto; max-height: 94%;
        border: thick $primary; background: $surface; padding: 1 2;
    }
    ModelPicker DataTable { height: auto; max-height: 14; }
    ModelPicker #detail { height: auto; margin: 1 0; }
    ModelPicker #progress-row { height: auto; }
    ModelPicker #picker-error { color: $error; height: auto; }
    ModelPicker #file-row { height: 3; }
    ModelPicker #file-row Input { width: 1fr; }
    ModelPicker .hidden { display: none; }
    """
    BINDINGS = [Binding("escape", "cancel", "Cancel / close")]

    def __init__(
        self,
        catalog: Catalog | None = None,
        machine: MachineMemory | None = None,
        engine: str = "",
    ) -> None:
        """``machine``: the memory to fit models into (default: this machine's);
        ``engine``: the engine that runs the model, said under the title."""
        super().__init__()
        self.engine = engine
        self.catalog = catalog or load_catalog()
        self.machine = machine or machine_memory()
        self.verdicts: dict[str, FitVerdict] = {}
        self.cancel_event: threading.Event | None = None
        self._last_progress = 0.0

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Text("Choose a model · Enter downloads and uses it", style="bold"))
            if self.engine:
                yield Static(
                    Text(f"Engine: {self.engine} ([model] engine in the settings)"), id="engine"
                )
            yield DataTable(id="models", cursor_type="row")
            yield Static(id="detail")
            with Vertical(id="progress-row", classes="hidden"):
                yield ProgressBar(id="progress", show_eta=False)
                yield Label("", id="progress-text")
            yield Static("", id="picker-error")
            with Horizontal(id="file-row"):
                yield Field(
                    placeholder="…or the path of a GGUF file you have (→ completes)",
                    id="file",
                    suggester=PathSuggester(".gguf"),
                )
                yield Button("Use file", id="use-file")

    def on_mount(self) -> None:
        for problem in self.catalog.problems:
            self.notify(problem, severity="warning", timeout=10)
        table = self.query_one(DataTable)
        table.add_columns("Model", "Quant", "Size", "On disk", "Fit here", "About")
        offload = bool(self.machine.gpus) or self.machine.unified
        best = recommend(self.catalog, self.machine, gpu_offload=offload)
        for entry in self.catalog.entries:
            verdict = estimate_entry_fit(
                entry, machine=self.machine, gpu_offload=offload, catalog=self.catalog
            )
            self.verdicts[entry.name] = verdict
            on_disk = "yes" if local_path(entry) is not None else ""
            fit = Text(verdict.status.replace("_", " "), style=STATUS_STYLE[verdict.status])
            name = Text(entry.name + (" ★" if best and entry.name == best.name else ""))
            table.add_row(
                name,
                entry.quant,
                f"{entry.size_gb:g} GB" if entry.size_gb else "?",
                on_disk,
                fit,
                Text(entry.description),
                key=entry.name,
            )
        if best is not None:
            table.move_cursor(row=self.catalog.entries.index(best))
        table.focus()

    def _selected(self) -> CatalogEntry | None:
        table = self.query_one(DataTable)
        if not self.catalog.entries or table.cursor_row < 0:
            return None
        return self.catalog.entries[min(table.cursor_row, len(self.catalog.entries) - 1)]

    def on_data_table_row_highlighted(self) -> None:
        entry = self._selected()
        if entry is None:
            return
        verdict = self.verdicts.get(entry.name)
        text = Text(f"{entry.spec}\n", style="bold")
        if verdict is not None:
            text.append(verdict.summary(), style=STATUS_STYLE[verdict.status])
        if entry.fallback:
            text.append("\nNot trained as a world model: expect lower fidelity.", style="yellow")
        self.query_one("#detail", Static).update(text)

    def on_data_table_row_selected(self) -> None:
        entry = self._selected()
        if entry is not None and self.cancel_event is None:
            self.download(entry)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "use-file":
            self._use_file()

    def on_input_submitted(self) -> None:
        self._use_file()

    def _use_file(self) -> None:
        raw = self.query_one("#file", Input).value.strip()
        path = Path(raw).expanduser()
        if not raw:
            self._error("Type the path of a .gguf file.")
        elif not path.is_file():
            self._error(f"{path} does not exist.")
        else:
            self.dismiss(path)

    def _error(self, message: str) -> None:
        self.query_one("#picker-error", Static).update(Text(message))

    @work(thread=True, exclusive=True, group="download")
    def download(self, entry: CatalogEntry) -> None:
        self.cancel_event = cancel = threading.Event()
        self.app.call_from_thread(self._show_progress, True)
        try:
            path = pull(entry, self._progress, cancel)
        except DownloadCancelled:
            self.app.call_from_thread(self._error, "Download cancelled; Enter resumes it.")
        except DownloadError as exc:
            self.app.call_from_thread(self._error, str(exc))
        except OSError as exc:
            self.app.call_from_thread(self._error, f"download failed: {exc}")
        else:
            self.app.call_from_thread(self.dismiss, path)
            return
        finally:
            self.cancel_event = None
        self.app.call_from_thread(self._show_progress, False)

    def _progress(self, progress: PullProgress) -> None:
        now = time.monotonic()
        if now - self._last_progress < 0.1 and progress.phase != "done":
            return  # called per chunk: the screen needs ten updates a second at most
        self._last_progress = now
        self.app.call_from_thread(self._update_progress, progress)

    def _update_progress(self, progress: PullProgress) -> None:
        bar = self.query_one("#progress", ProgressBar)
        bar.update(total=max(progress.total, 1), progress=progress.done)
        self.query_one("#progress-text", Label).update(progress_line(progress))

    def _show_progress(self, visible: bool) -> None:
        self.query_one("#progress-row").set_class(not visible, "hidden")
        if visible:
            self._error("")

    def action_cancel(self) -> None:
        if self.cancel_event is not None:
            self.cancel_event.set()
        else:
            self.dismiss(None)
