"""Every use of Textual's private API, fenced in one module.

The app leans on a few of Textual's internals where its public API has no cheap way to
say the same thing: drawing a widget without the messages a refresh sends, a start that
lays the screen out and restyles it once, a tab's label changed without a layout, the
context a loop callback runs in, and Alt+digit read as terminals send it (``read_keys_as_sent``).
Each piece says what it relies on
(``RELIES_ON``); ``check()`` looks for all of it, and tests/test_textual_private.py runs it,
so a Textual release that moves any of it fails a test, not the app. pyproject pins
Textual to the range these were checked against.

One piece is the app's own drawing, kept for what it saves while text streams: the
scrollbar LineView draws into its rows (``scrollbar``). For measurement only,
``AGENTWORLD_RENDER_OFF=scrollbar`` (read once, at import; a comma-separated list) switches
it off, for Textual's own vertical scrollbar. (Two more, the main screen's own update clock
and rows handed to the screen again unchanged, were measured so and removed: issue 28.)
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterable, Iterator
from typing import Any

from rich.segment import Segment
from textual import events
from textual._xterm_parser import XTermParser
from textual.color import Color
from textual.content import Content
from textual.dom import NoScreen
from textual.filter import LineFilter
from textual.geometry import Region, Size
from textual.message import Message
from textual.message_pump import MessagePump
from textual.screen import Screen
from textual.scroll_view import ScrollView
from textual.widget import Widget
from textual.widgets import Static, Tab, TabbedContent, TabPane

from agentworld_tui.world.sanitize import cell_safe, cell_unsafe

RENDER_PIECES = ("scrollbar",)


def _render_off(value: str) -> frozenset[str]:
    off = frozenset(name.strip() for name in value.split(",") if name.strip())
    if unknown := off - set(RENDER_PIECES):
        raise ValueError(
            f"AGENTWORLD_RENDER_OFF: no render piece {', '.join(sorted(unknown))} "
            f"(there are {', '.join(RENDER_PIECES)})"
        )
    return off


RENDER_OFF = _render_off(os.environ.get("AGENTWORLD_RENDER_OFF", ""))
"""The custom render pieces switched off for a measurement (see the module's doc)."""


def render_on(piece: str) -> bool:
    """Whether the custom render piece ``piece`` (one of ``RENDER_PIECES``) is on."""
    assert piece in RENDER_PIECES, piece
    return piece not in RENDER_OFF


RELIES_ON: dict[str, str] = {
    "Widget._pruning": "closing(): a widget being removed skips mounts of its children",
    "Widget._closing": "repaint(): a closing widget is not drawn",
    "Widget._layout_cache": "repaint(): what a refresh clears",
    "Widget._set_dirty": "repaint(): what a refresh marks",
    "Widget._rich_style_cache": "repaint(): what a refresh clears",
    "Screen._dirty_widgets": "repaint(): the widgets the next screen update draws",
    "Screen._compositor": "repaint() and laid_out_at(): the screen's map and size",
    "Screen._update_timer": "repaint(): the timer a screen's updates run on",
    "Screen._on_resize": "QuietStartScreen: a resize to the laid-out size is skipped",
    "Screen._on_screen_resume": "QuietStartScreen: the first resume restyles nothing",
    "Tab._label": "relabel(): a tab's label without a layout",
    "MessagePump._context": "within(): run a loop callback as the widget's handlers run",
    "Widget._anchor_released": "scroll_to_end_now(): what scroll_to releases",
    "Widget._scroll_update": "scroll_update(): scrollbars after a virtual size set quietly",
    "Widget._check_disabled": "disabled(): whether a widget or an ancestor is disabled",
    "ScrollView.watch_scroll_y": "scroll_to_end_now(): what setting scroll_y triggers",
    "App._context": "within(): the active app for a loop callback",
    "XTermParser._sequence_to_key_events": "read_keys_as_sent(): where a key's bytes are read",
    "TabbedContent._on_tab_pane_focused": "SteadyTabs: the tab follows a focus into it",
    "App.get_line_filters": "SafeCells: every line every widget draws passes these filters",
}


def closing(node: Widget) -> bool:
    """Whether ``node`` is being removed or its app is closing: Textual then skips mounts,
    so a container composed meanwhile may lack some of its parts."""
    return node._pruning or not node.is_attached


@contextlib.contextmanager
def within(widget: Widget) -> Iterator[None]:
    """Make ``widget`` and its app the active ones for code the event loop runs itself
    (outside it, every lookup of ``widget.app`` walks up the widget tree)."""
    with widget.app._context(), widget._context():
        yield


def _raise(error: Exception) -> None:
    raise error


def raise_in_handler(node: MessagePump, error: Exception) -> None:
    """Raise ``error`` again in one of ``node``'s handlers, for a callback the event loop
    ran itself: Textual then ends the app with it, as for an error in any handler (the
    loop alone would only log it)."""
    node.call_next(_raise, error)


def scroll_to_end_now(view: ScrollView, end: float) -> None:
    """What ``scroll_to(y=end, animate=False, immediate=True)`` does (any scroll animation
    stopped, the anchor released, the view repainted), without Textual's reactive
    machinery (three reactive sets, each validated and watched) at every frame."""
    animator = view.app.animator
    animator.force_stop_animation(view, "scroll_x")
    animator.force_stop_animation(view, "scroll_y")
    view._anchor_released = True
    old = view.scroll_y
    view.set_reactive(ScrollView.scroll_target_y, end)
    view.set_reactive(ScrollView.scroll_y, end)
    view.watch_scroll_y(old, end)


def scroll_update(view: ScrollView, virtual_size: Size) -> None:
    """Scrollbars and offsets for a virtual size set without a layout."""
    view._scroll_update(virtual_size)


def disabled(widget: Widget) -> bool:
    return widget._check_disabled()


class DirtyRows(ScrollView):
    """A scroll view told of the regions Textual marks for repaint (``rows_dirtied``)."""

    def _set_dirty(self, *regions: Region) -> None:
        super()._set_dirty(*regions)
        self.rows_dirtied(regions)

    def rows_dirtied(self, regions: tuple[Region, ...]) -> None:
        """Every region marked (none: the whole view)."""


def relabel(tab: Tab, label: str) -> None:
    """A new label of the same width: the tab is drawn again, without the layout of the
    whole screen (and the message to every widget that it brings) that ``Tab.label``
    asks for, twice a turn."""
    tab._label = Content(label)
    Static.update(tab, tab._label, layout=False)


def repaint(widget: Widget, *regions: Region) -> None:
    """``widget.refresh(*regions)`` (a repaint, no layout) without its messages.

    Textual's goes through three: a prompt to the widget, whose idle handler sends the
    screen an update, whose handler prompts the screen, whose idle handler starts the
    screen's update. Each is a wake-up of a task on the main thread, for every widget that
    changes in a frame (a row of streamed text, the status line). This does what those
    handlers do, at once: the screen's next update draws the widget, and widgets that
    change in the same frame join the same update instead of one each as their messages
    come in."""
    try:
        screen = widget.screen
    except NoScreen:
        screen = None
    if (
        screen is None
        or not widget.is_mounted
        or widget._closing
        or not widget.display
        or screen not in screen._compositor  # not laid out yet: Textual would drop it
    ):
        Widget.refresh(widget, *regions)
        return
    widget._layout_cache.clear()
    widget._set_dirty(*regions)
    widget.clear_cached_dimensions()
    widget._rich_style_cache.clear()
    screen._dirty_widgets.add(widget)
    screen._update_timer.resume()


class QuietStartScreen(Screen[None]):
    """A screen that restyles nothing on its first resume and lays nothing out for a
    resize to the size it has: work Textual does at start for nothing."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._resumed = False

    def _on_screen_resume(self, event: events.ScreenResume) -> None:
        """The first resume, at start, restyles nothing: every widget was styled as it was
        mounted, and styling them all again was 3% of the work to the first frame. Later
        resumes (after a screen above closes) restyle as Textual does."""
        if not self._resumed:
            self._resumed = True
            event.refresh_styles = False

    async def _on_resize(self, event: events.Resize) -> None:
        """A resize to the size the screen is laid out at lays nothing out again. At start
        Textual sends three (the app's, and two the screen sends itself after its layouts),
        each a full layout of every widget (2% of the work to the first frame); a layout
        that is due for another reason still comes with the next refresh."""
        if event.size == self._compositor.size:
            event.stop()
            event.prevent_default()  # Screen's own handler would lay the screen out


class SafeCells(LineFilter):
    """The last line of defence for untrusted text: every line any widget draws loses the
    characters a terminal acts on (``world.sanitize.cell_safe``) before it is written, so
    a widget handed text that missed ``sanitize`` still cannot move the cursor, set the
    title or the clipboard, or reorder the line. (Textual's filters are its own API for
    colour; the app adds this one through ``App.get_line_filters``.)"""

    def apply(self, segments: list[Segment], background: Color) -> list[Segment]:
        if not cell_unsafe("".join([segment.text for segment in segments])):
            return segments
        return [
            segment
            if segment.control or not cell_unsafe(segment.text)
            else Segment(cell_safe(segment.text), segment.style)
            for segment in segments
        ]


class SteadyTabs(TabbedContent):
    """Tabs that a focus never switches: only a key, a click or the app does. Textual
    shows the tab a widget is focused in, and a focus can land in a hidden tab late (a
    focus asked for before a tab key arrives after it; the focus of a widget that hides
    handed to a sibling hidden with it), which switched back to the tab just left. Such
    a focus is told as ``FocusStrayed`` instead, for the app to focus the tab on show."""

    class FocusStrayed(Message):
        """A widget of a hidden tab took the focus."""

    def _on_tab_pane_focused(self, event: TabPane.Focused) -> None:
        if event.tab_pane.id != self.active:
            event.stop()
            event.prevent_default()  # TabbedContent's own handler would switch the tab
            self.post_message(self.FocusStrayed())


_MODIFY_OTHER_KEYS = re.compile(r"\x1b\[27;(\d+);(\d+)~")


def as_csi_u(sequence: str) -> str:
    """A key's bytes in the CSI u form Textual reads with its modifiers, where Textual
    misreads another form: ESC then a digit, which is Alt+digit from tmux, xterm and most
    terminals (Textual takes it for a macOS Option character, Alt+2 typing ``™``), and
    xterm's modifyOtherKeys form ``CSI 27;mods;code ~`` (tmux with extended-keys, which
    Textual reads as the bare key)."""
    if len(sequence) == 2 and sequence[0] == "\x1b" and sequence[1].isdigit():
        return f"\x1b[{ord(sequence[1])};3u"
    if match := _MODIFY_OTHER_KEYS.fullmatch(sequence):
        modifiers, code = match.groups()
        return f"\x1b[{code};{modifiers}u"
    return sequence


def read_keys_as_sent() -> None:
    """Have Textual's terminal parser read keys with ``as_csi_u`` (once; every driver's
    parser, the browser's included)."""
    original = XTermParser._sequence_to_key_events
    if getattr(original, "reads_keys_as_sent", False):
        return

    def sequence_to_key_events(
        self: XTermParser, sequence: str, alt: bool = False
    ) -> Iterable[events.Key]:
        return original(self, as_csi_u(sequence), alt)

    sequence_to_key_events.reads_keys_as_sent = True  # type: ignore[attr-defined]
    XTermParser._sequence_to_key_events = sequence_to_key_events  # type: ignore[method-assign]


def check() -> list[str]:
    """What this module relies on and the installed Textual lacks (empty when all is there)."""
    from textual.app import App
    from textual.scroll_view import ScrollView

    owners: dict[str, Any] = {
        "ScrollView": ScrollView,
        "Widget": Widget,
        "MessagePump": MessagePump,
        "App": App,
        "Screen": Screen,
        "Tab": Tab,
        "XTermParser": XTermParser,
        "TabbedContent": TabbedContent,
    }
    missing: list[str] = []
    for name in RELIES_ON:
        owner, _, attribute = name.rpartition(".")
        cls = owners[owner]
        if not hasattr(cls, attribute) and attribute not in _instance_attributes(cls):
            missing.append(name)
    return missing


def _instance_attributes(cls: type) -> set[str]:
    """Attribute names a class's own code uses (read from its methods' code, without
    building one): where it sets what it keeps on its instances."""
    names: set[str] = set()
    for klass in cls.__mro__:
        for member in vars(klass).values():
            function = member.fget if isinstance(member, property) else member
            code = getattr(function, "__code__", None)
            if code is not None:
                names.update(code.co_names)
    return names
