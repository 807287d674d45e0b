"""What the tool-calling panes share (MCP, Search, SWE): a side list of tools, the picked
tool's name and a JSON arguments editor, checked against the tool's input schema before
anything is sent.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Input, Label, OptionList, Static

from agentworld_tui.domains.json_schema import read_json
from agentworld_tui.domains.tool_call import Tool
from agentworld_tui.ui.highlight import highlight
from agentworld_tui.ui.panes.base import DomainPane
from agentworld_tui.ui.widgets.field import Field
from agentworld_tui.ui.widgets.tools.arguments_editor import ArgumentsEditor
from agentworld_tui.ui.widgets.tools.tool_list import ToolList
from agentworld_tui.world.action import Action, ActionError
from agentworld_tui.world.domain import Scenario
from agentworld_tui.world.sanitize import one_line, sanitize
from agentworld_tui.world.session import Turn


class ToolDomain(Protocol):
    """The part of the MCP, Search and SWE domains the pane uses."""

    name: str
    title: str
    lexer: str

    def listed_tools(self, scenario: Scenario) -> list[Tool] | None: ...

    def make_action(self, value: object, scenario: Scenario) -> Action: ...

    def observation_lexer(self, action: Action, observation: str) -> str: ...


class ToolCallPane(DomainPane):
    BINDINGS = [
        Binding("ctrl+s", "send_call", "Send", tooltip="Check and send the tool call", show=False)
    ]
    DEFAULT_CSS = """
    ToolCallPane #call-row { height: 12; }
    ToolCallPane #call { width: 1fr; }
    ToolCallPane #name-row { height: 1; }
    ToolCallPane #name-row Label { width: auto; padding: 0 1; color: $accent; }
    ToolCallPane #tool-name { border: none; height: 1; padding: 0; width: 1fr; }
    ToolCallPane #tool-name.-invalid { color: $error; text-style: bold; }
    ToolCallPane #tool-help { height: auto; max-height: 2; color: $text-muted; padding: 0 1; }
    """

    domain: Any  # a ToolDomain; typed loosely so subclasses may narrow it

    def compose_editor(self) -> ComposeResult:
        with Horizontal(id="call-row", classes="backdrop"):
            yield ToolList(id="tools")
            with Vertical(id="call"):
                with Horizontal(id="name-row"):
                    yield Label("Tool")
                    yield Field(placeholder="pick a tool from the list", id="tool-name")
                yield Static(id="tool-help")
                yield ArgumentsEditor(id="arguments")

    # -- parts --------------------------------------------------------------------------
    @property
    def tool_list(self) -> ToolList:
        return self.query_one("#tools", ToolList)

    @property
    def tool_name(self) -> Input:
        return self.query_one("#tool-name", Input)

    @property
    def arguments(self) -> ArgumentsEditor:
        return self.query_one("#arguments", ArgumentsEditor)

    def focus_editor(self) -> None:
        if self.tool_name.value:
            self.arguments.focus()
        else:
            self.tool_list.focus()

    # -- the tool list --------------------------------------------------------------------
    def show_session(self) -> None:
        super().show_session()
        self.show_tools()

    def show_tools(self) -> None:
        """Fill the side list from the session's scenario (after a load or a new list)."""
        try:
            tools = self.domain.listed_tools(self.session.scenario)
        except ActionError as exc:
            self.show_error(str(exc))
            tools = None
        self.tool_list.set_tools(tools)
        if tools and not self.tool_list.tool(self.tool_name.value):
            self.pick(tools[0].name)

    def pick(self, name: str) -> None:
        """Start a call to ``name``: its skeleton arguments, its description shown."""
        tool = self.tool_list.tool(name)
        self.tool_name.value = name
        if tool is not None:
            self.tool_list.highlighted = self.tool_list.tools.index(tool)
        skeleton = tool.skeleton() if tool is not None else {}
        self.arguments.text = json.dumps(skeleton, ensure_ascii=False, indent=2)
        help_text = Text()
        if tool is not None:
            help_text.append(one_line(tool.description))
            if tool.parameters:
                optional = [p for p in tool.parameters if p not in tool.required]
                if optional:
                    help_text.append("  optional: " + one_line(", ".join(optional)), "italic")
        self.query_one("#tool-help", Static).update(help_text)
        self._mark("")
        self.show_error("")

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if event.option.id is not None:
            self.pick(event.option.id)
            self.arguments.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "tool-name":
            event.stop()
            name = event.value.strip()
            if self.tool_list.tool(name) is not None:
                self.pick(name)
            self.arguments.focus()

    # -- sending ------------------------------------------------------------------------
    def on_arguments_editor_send(self, event: ArgumentsEditor.Send) -> None:
        event.stop()
        self.send_call()

    def build_action(self) -> Action:
        """The call in the editor as a checked action; ActionError says what is wrong."""
        name = self.tool_name.value.strip()
        if not name:
            raise ActionError("pick a tool from the list first", field="name")
        listed = self.tool_list.tool(name)
        name = listed.name if listed is not None else name  # the field shows it sanitized
        text = self.arguments.text.strip() or "{}"
        try:
            arguments = read_json(text)
        except json.JSONDecodeError as exc:
            raise ActionError(
                f"the arguments are not JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})",
                field="arguments",
            ) from None
        if not isinstance(arguments, dict):
            raise ActionError("the arguments must be a JSON object {...}", field="arguments")
        call = {"name": name, "arguments": arguments}
        action: Action = self.domain.make_action(call, self.session.scenario)
        return action

    def action_send_call(self) -> None:
        self.send_call()

    def send_call(self) -> bool:
        try:
            action = self.build_action()
        except ActionError as exc:
            self._mark(exc.field)
            where = f" ({exc.field})" if exc.field and exc.field not in str(exc) else ""
            self.show_error(f"{exc}{where}")
            return False
        self._mark("")
        return self.send(action)

    def _mark(self, field: str) -> None:
        """Outline the field an error is about (the tool name, or the arguments)."""
        self.tool_name.set_class(field == "name", "-invalid")
        self.arguments.set_class(bool(field) and field != "name", "-invalid")

    # -- results ------------------------------------------------------------------------
    def show_echo(self, turn: Turn) -> None:
        """The call, at the end of the output, brought into view (unless the user scrolled
        up to read earlier output)."""
        super().show_echo(turn)
        view = self.screen_view
        if view.follow:
            view.scroll_end(animate=False, immediate=True, x_axis=False)

    def highlight_turn(self, turn: Turn) -> list[Text]:
        text = sanitize(turn.observation)
        return highlight(text, self.domain.observation_lexer(turn.action, text))
