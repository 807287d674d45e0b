"""Widgets of the MCP pane."""
