"""Web: a browser agent on a page shown as its accessibility tree.

The page is the screen; picking an element (a click on its row, or the arrow keys and
Enter) writes ``click``/``fill``/``select_option`` for it in the action bar. A call naming
an element that is not on the page is refused. Each predicted page replaces the view, and
F2 shows what changed from the page before.
"""

from __future__ import annotations

import re

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Input

from agentworld_tui.domains.web import WebDomain, bid_problem, element_on_line, elements, page_diff
from agentworld_tui.ui.highlight import highlight
from agentworld_tui.ui.panes.base import DomainPane
from agentworld_tui.ui.widgets.web.action_bar import ActionBar
from agentworld_tui.ui.widgets.web.page_view import PageView
from agentworld_tui.world.action import Action, ActionError
from agentworld_tui.world.sanitize import sanitize
from agentworld_tui.world.session import Turn

_NO_ACTION = Action("web", {}, "")
_ELEMENT_HEAD = re.compile(r"^(\s*)(\[[^\]\s]+\])(\s+)([A-Za-z][\w-]*)")


def page_lines(page: str) -> list[Text]:
    """The accessibility tree with element ids and roles picked out, names quoted green."""
    out = []
    for line in page.split("\n"):
        line = line.expandtabs(4)
        text = Text(line)
        match = _ELEMENT_HEAD.match(line)
        if match:
            text.stylize("bold cyan", match.start(2), match.end(2))
            text.stylize("bold", match.start(4), match.end(4))
            rest = match.end(4)
        else:
            rest = 0
        for quoted in _QUOTED.finditer(line, rest):
            text.stylize("green", quoted.start(), quoted.end())
        out.append(text)
    return out


_QUOTED = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"")


class WebPane(DomainPane):
    BINDINGS = [
        Binding("f2", "toggle_diff", "Page diff", tooltip="Show what the last turn changed"),
        Binding("ctrl+s", "send", "Send", tooltip="Send the action", show=False),
    ]

    def action_send(self) -> None:
        self.send_call(self.action_bar.call.value)

    domain: WebDomain

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.showing_diff = False

    def compose_screen(self) -> ComposeResult:
        yield PageView(id="screen")

    def compose_editor(self) -> ComposeResult:
        yield ActionBar(id="action-bar")

    @property
    def page_view(self) -> PageView:
        return self.query_one("#screen", PageView)

    @property
    def action_bar(self) -> ActionBar:
        return self.query_one("#action-bar", ActionBar)

    def focus_editor(self) -> None:
        self.action_bar.call.focus()

    # -- the page -------------------------------------------------------------------------
    def pages(self) -> list[str]:
        """The start page and every predicted page so far, oldest first."""
        shown = [sanitize(t.observation) for t in self.session.turns if t.shown]
        return [sanitize(self.session.scenario.state), *shown]

    @property
    def page(self) -> str:
        return self.pages()[-1]

    def _mark_elements(self) -> None:
        """Let the view pick elements when it shows the current page, and only then."""
        view = self.page_view
        page = self.page
        on_screen = not self.busy and not self.showing_diff
        if on_screen and view.line_count >= len(page.rstrip("\n").split("\n")):
            view.set_elements([e.line for e in elements(page)])
        else:
            view.set_elements([])

    def show_session(self) -> None:
        self.showing_diff = False
        super().show_session()
        self._mark_elements()
        self.action_bar.show_signature("")

    def show_observation(self, turn: Turn) -> None:
        super().show_observation(turn)
        if self.run is None:
            self.showing_diff = False
            self._mark_elements()

    def on_domain_pane_turn_finished(self, event: DomainPane.TurnFinished) -> None:
        self._mark_elements()

    def highlight_observation(self, text: str) -> list[Text]:
        if self.domain.observation_lexer(_NO_ACTION, text) != "text":
            return highlight(text, "html")
        return page_lines(text)

    def highlight_turn(self, turn: Turn) -> list[Text]:
        return self.highlight_observation(sanitize(turn.observation))

    def action_toggle_diff(self) -> None:
        if self.busy:
            return
        view = self.page_view
        pages = self.pages()
        if self.showing_diff:
            self.show_session()
            return
        self.showing_diff = True
        view.clear()
        if len(pages) < 2:
            view.append_lines([Text("No earlier page yet: the diff shows after a turn.", "dim")])
        else:
            diff = page_diff(pages[-2], pages[-1])
            if diff:
                view.append_lines(highlight(diff, "diff"))
            else:
                view.append_lines([Text("The page did not change.", style="dim")])
        view.append_lines([Text("F2 shows the page again.", style="dim italic")])
        self._mark_elements()

    # -- picking and sending ----------------------------------------------------------------
    def on_page_view_picked(self, event: PageView.Picked) -> None:
        event.stop()
        if not self.page_view.element_lines:
            return
        element = element_on_line(self.page, event.line)
        if element is None:
            return
        call = element.action()
        cursor = len(call) - 2 if element.fillable and not element.choosable else None
        self.action_bar.set_call(call, cursor)
        self.show_error("")
        self.focus_editor()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "call":
            event.stop()
            self.send_call(event.value)

    def send_call(self, text: str) -> bool:
        call = self.action_bar.call
        try:
            action = self.domain.parse_action(text, self.session.scenario)
            problem = bid_problem(action, self.page)
            if problem:
                raise ActionError(problem, field="bid")
        except ActionError as exc:
            call.add_class("-invalid")
            self.show_error(str(exc))
            return False
        call.remove_class("-invalid")
        if not self.send(action):
            return False
        self.showing_diff = False
        self.page_view.set_elements([])
        return True
