"""Widgets shared by the panes whose agents call tools (MCP, Search, SWE)."""
