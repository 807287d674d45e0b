"""Rows that stay as they are while text streams beside them, handed to the screen again
without being built again.

For every screen update Textual renders each visible widget whose container's area the
update touches, all of its visible lines, through its styling pass: a widget's cached lines
are looked up, filtered and listed one by one, and its colours worked out from its
ancestors, even when none of them changed. The screen itself and the tab bar are such
widgets: neither changes while a view streams, yet every frame of the view rendered them
again, and they cost more than the view's own rows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

from textual._styles_cache import StylesCache

if TYPE_CHECKING:
    from textual.geometry import Region
    from textual.strip import Strip
    from textual.widget import Widget

    W = TypeVar("W", bound=Widget)


class StillRows(StylesCache):
    """A widget's styles cache that also keeps the rows it last handed out, with what they
    were made for (the crop, the widget's size and styles, the line filters), and hands
    them out again while nothing asks for a repaint.

    Textual's own cache keeps each line until the widget is refreshed (``set_dirty`` or
    ``clear``); this one is dropped at the same moments, so it is never staler than the
    lines it was made from."""

    def __init__(self) -> None:
        super().__init__()
        self._kept: tuple[object, list[Strip]] | None = None

    def set_dirty(self, *regions: Region) -> None:
        self._kept = None
        super().set_dirty(*regions)

    def clear(self) -> None:
        self._kept = None
        super().clear()

    def render_widget(self, widget: Widget, crop: Region) -> list[Strip]:
        key = (crop, widget.outer_size, widget.styles._cache_key, *widget.get_line_filters())
        kept = self._kept
        if kept is not None and kept[0] == key:
            return kept[1]
        strips = super().render_widget(widget, crop)
        self._kept = (key, strips)
        return strips


def keep_rows(widget: W) -> W:
    """Give ``widget`` a styles cache that keeps its rows (see ``StillRows``); for widgets
    whose own content does not change while text streams."""
    if not isinstance(widget._styles_cache, StillRows):
        widget._styles_cache = StillRows()
    return widget
