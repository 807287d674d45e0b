"""MCP: call the tools of a simulated MCP server.

The tools come from the scenario, from a pasted list, or from a server's saved
``tools/list`` answer (F2). Picking a tool fills its required arguments; the call is
checked against the tool's input schema before it is sent, and the result is shown as
highlighted JSON, or as text.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding

from agentworld_tui.domains.mcp import McpDomain, with_tools
from agentworld_tui.ui.panes.tool_call import ToolCallPane
from agentworld_tui.ui.widgets.mcp.tool_source import ToolSource
from agentworld_tui.world.session import new_session


class McpPane(ToolCallPane):
    BINDINGS = [Binding("f2", "load_tools", "Load tools", tooltip="Paste or open a tool list")]

    domain: McpDomain

    def compose_editor(self) -> ComposeResult:
        source = ToolSource(id="tool-source")
        source.display = False
        yield source
        yield from super().compose_editor()

    @property
    def tool_source(self) -> ToolSource:
        return self.query_one("#tool-source", ToolSource)

    def action_load_tools(self) -> None:
        if self.busy:
            self.show_error("the model is still working: Esc stops it, then load the tools")
            return
        note = ""
        if self.session.turns:
            note = "Loading a tool list starts this tab afresh (the server changes)."
        self.tool_source.open(note)

    def on_tool_source_loaded(self, event: ToolSource.Loaded) -> None:
        """The server's tools changed: a new session, since the system prompt lists them."""
        event.stop()
        self.tool_source.display = False
        scenario = with_tools(self.session.scenario, event.tools)
        session, problems = new_session(self.domain, scenario)
        for problem in problems:
            self.app.notify(problem, severity="warning", markup=False)
        self.replace_session(session)
        self.app.notify(
            f"{len(event.tools)} tools loaded ({event.source}).", timeout=4, markup=False
        )
        self.tool_list.focus()

    def on_tool_source_closed(self, event: ToolSource.Closed) -> None:
        event.stop()
        self.focus_editor()
