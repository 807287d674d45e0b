"""The side list of the tools an agent may call; picking one starts a call to it."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from agentworld_tui.domains.tool_call import Tool
from agentworld_tui.world.sanitize import sanitize


class ToolList(OptionList):
    """Tool names (with their required parameters dimmed); Enter or a click picks one."""

    DEFAULT_CSS = """
    ToolList { width: 30; height: 1fr; border: round $primary-darken-2; }
    ToolList:focus { border: round $primary; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, markup=False)
        self.tools: list[Tool] = []
        self.border_title = "Tools"

    def set_tools(self, tools: list[Tool] | None) -> None:
        """Show ``tools``; None means the scenario gives no list (any call goes)."""
        self.tools = list(tools or [])
        self.clear_options()
        for tool in self.tools:
            label = Text(sanitize(tool.name), style="bold")
            if tool.required:
                label.append("  " + sanitize(", ".join(tool.required)), style="dim")
            self.add_option(Option(label, id=tool.name))
        if tools is None:
            self.border_title = "Tools · none given"
            self.border_subtitle = "any call is sent as written"
        else:
            self.border_title = f"Tools · {len(self.tools)}"
            self.border_subtitle = ""

    def tool(self, name: str) -> Tool | None:
        """The tool named ``name``, as listed or as a field shows it (sanitized)."""
        found = next((t for t in self.tools if t.name == name), None)
        return found or next((t for t in self.tools if sanitize(t.name) == name), None)
