"""Widgets of the Web pane."""
