"""Search: web_search, web_extractor and dict_memory calls against a simulated web.

Search results are shown as a numbered list (title, URL, date, snippet) and extracted
pages as Markdown. F2 edits the simulation instruction (target query and reference
answer). A changed instruction applies from the next turn on: each turn carries the
instruction it was sent with, so earlier turns keep theirs, and the session's scenario
records the new one.
"""

from __future__ import annotations

import re

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Static

from agentworld_tui.domains.search import (
    SearchDomain,
    SearchResult,
    search_results,
    simulation_instruction,
    with_simulation,
)
from agentworld_tui.ui.highlight import highlight
from agentworld_tui.ui.panes.tool_call import ToolCallPane
from agentworld_tui.ui.widgets.search.simulation_form import SimulationForm
from agentworld_tui.world.sanitize import one_line, sanitize
from agentworld_tui.world.session import Turn

_HEADING = re.compile(r"^\s{0,3}#{1,6}\s")


def result_lines(result: SearchResult) -> list[Text]:
    """One search result as readable lines: number and title, URL, date, snippet."""
    head = Text(f"{result.number:>2}. ", style="bold")
    head.append(result.title, style="bold")
    lines = [head]
    if result.url:
        lines.append(Text("    " + result.url, style="underline blue"))
    if result.date:
        lines.append(Text("    " + result.date, style="dim"))
    if result.snippet:
        lines.append(Text("    " + result.snippet))
    lines.append(Text())
    return lines


def search_page(observation: str) -> list[Text]:
    """A web_search answer: each block under a heading as a list of results where it has
    numbered results, else as Markdown."""
    blocks: list[list[str]] = [[]]
    for line in observation.split("\n"):
        if _HEADING.match(line) and blocks[-1]:
            blocks.append([])
        blocks[-1].append(line)
    out: list[Text] = []
    for block in blocks:
        results = search_results("\n".join(block))
        if not results:
            out.extend(highlight("\n".join(block), "markdown"))
            continue
        if _HEADING.match(block[0]):
            out.append(Text(block[0].lstrip("# ").strip(), style="bold underline"))
        for result in results:
            out.extend(result_lines(result))
    return out


class SearchPane(ToolCallPane):
    BINDINGS = [
        Binding(
            "f2",
            "edit_simulation",
            "Simulation",
            tooltip="Edit the target query and reference answer sent with every turn",
        )
    ]
    DEFAULT_CSS = """
    SearchPane #simulation-line { height: 1; padding: 0 1; color: $accent; }
    """

    domain: SearchDomain
    wraps_screen = True

    def compose_screen(self) -> ComposeResult:
        yield Static(id="simulation-line")
        yield from super().compose_screen()

    def compose_editor(self) -> ComposeResult:
        form = SimulationForm(id="simulation")
        form.display = False
        yield form
        yield from super().compose_editor()

    @property
    def simulation(self) -> SimulationForm:
        return self.query_one("#simulation", SimulationForm)

    def show_session(self) -> None:
        super().show_session()
        self.show_simulation()

    def show_simulation(self) -> None:
        extras = self.session.scenario.extras
        query = str(extras.get("target_query", "") or "").strip()
        line = Text("Simulation: ", style="bold")
        if query:
            line.append(f"target query “{one_line(query)}” (F2 edits)")
        elif simulation_instruction(self.session.scenario):
            line.append("the scenario's own instruction (F2 replaces it)")
        else:
            line.append("none, the real web (F2 sets a target query and reference answer)")
        self.query_one("#simulation-line", Static).update(line)

    def action_edit_simulation(self) -> None:
        extras = self.session.scenario.extras
        self.simulation.open(
            str(extras.get("target_query", "") or ""), str(extras.get("reference_answer", "") or "")
        )

    def on_simulation_form_applied(self, event: SimulationForm.Applied) -> None:
        """Takes effect from the next turn: actions capture the instruction when sent."""
        event.stop()
        self.session.scenario = with_simulation(
            self.session.scenario, event.target_query, event.reference_answer
        )
        self.simulation.display = False
        self.show_simulation()
        when = "from the next turn on" if self.session.turns else "with every turn"
        done = "set" if simulation_instruction(self.session.scenario) else "removed"
        self.app.notify(f"Simulation instruction {done}: it applies {when}.", timeout=4)
        self.focus_editor()

    def on_simulation_form_closed(self, event: SimulationForm.Closed) -> None:
        event.stop()
        self.focus_editor()

    def highlight_turn(self, turn: Turn) -> list[Text]:
        text = sanitize(turn.observation)
        payload = turn.action.payload if isinstance(turn.action.payload, dict) else {}
        if payload.get("name") == "web_search":
            return search_page(text)
        return highlight(text, self.domain.observation_lexer(turn.action, text))
