"""Widgets of the Search pane."""
