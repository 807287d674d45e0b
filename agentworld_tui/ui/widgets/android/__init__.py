"""Widgets of the Android pane."""
