"""The real app driven with Pilot, on scripted tiny models running in the real llama.cpp."""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ggufgen import write_scripted_model
from textual import events
from textual.geometry import Region
from textual.widget import Widget
from textual.widgets import ContentSwitcher, Input, Static

from agentworld_tui.config import Settings
from agentworld_tui.domains import DOMAINS
from agentworld_tui.ui import app as app_module
from agentworld_tui.ui.app import AgentWorldApp
from agentworld_tui.ui.panes.base import DomainPane
from agentworld_tui.ui.widgets.status_bar import StatusBar

LS_SCRIPT = (
    "checking the cwd</think><predicted_observation>user@devbox:~/project$ ls\n"
    "README.md  src\nuser@devbox:~/project$</predicted_observation>"
)


def long_reasoning(pieces: int) -> list[str]:
    """Distinct pieces: a long reasoning, then a short answer."""
    words = [f"step{i:05d} " for i in range(pieces)]
    return [
        *words,
        "</think>",
        "<predicted_observation>",
        "done\n",
        "$ ",
        "</predicted_observation>",
    ]


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTWORLD_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("AGENTWORLD_DATA_DIR", str(tmp_path / "data"))


@pytest.fixture(scope="module")
def ls_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_scripted_model(tmp_path_factory.mktemp("m") / "ls.gguf", LS_SCRIPT)


@pytest.fixture(scope="module")
def long_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_scripted_model(tmp_path_factory.mktemp("m") / "long.gguf", long_reasoning(2000))


def make_app(
    model: Path | None, app_class: type[AgentWorldApp] = AgentWorldApp, **generation: object
) -> AgentWorldApp:
    settings = Settings()
    settings.model.threads = 2
    if model is not None:
        settings.model.path = str(model)
    for key, value in generation.items():
        setattr(settings.generation, key, value)
    return app_class(settings, offer_models=False)


async def wait_for(pilot: object, condition: Callable[[], bool], timeout: float = 60) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        if loop.time() > deadline:
            raise AssertionError("condition not met in time")
        await pilot.pause(0.02)  # type: ignore[attr-defined]


def pane(app: AgentWorldApp) -> DomainPane:
    active = app.active_pane
    assert active is not None
    return active


def turn_done(app: AgentWorldApp) -> Callable[[], bool]:
    """The active tab has a turn and is not generating."""
    return lambda: bool(pane(app).session.turns) and not pane(app).busy


async def test_command_streams_into_terminal_and_reasoning(ls_model: Path) -> None:
    app = make_app(ls_model)
    async with app.run_test(size=(120, 36)) as pilot:
        await asyncio.wait_for(app.model_ready.wait(), 30)
        await pilot.press(*"ls", "enter")
        await wait_for(pilot, turn_done(app))
        terminal = pane(app)
        assert terminal.screen_view.text.splitlines() == [
            "user@devbox:~/project$ ls",
            "README.md  src",
            "user@devbox:~/project$",
        ]
        assert terminal.reasoning.view.text == "checking the cwd"
        turn = terminal.session.turns[0]
        assert turn.status == "complete"
        assert turn.action.payload == [{"keystrokes": "ls\n", "duration": 1.0}]
        status = app.query_one(StatusBar).render_line(0).text  # the line as drawn
        assert "ls.gguf" in status and "CPU" in status and "ctx" in status


async def test_control_keys_and_queued_entries_form_one_action(ls_model: Path) -> None:
    app = make_app(ls_model)
    async with app.run_test(size=(120, 36)) as pilot:
        await asyncio.wait_for(app.model_ready.wait(), 30)
        await pilot.press(*"vim notes.txt", "f2", *"ihello", "ctrl+c")
        await wait_for(pilot, turn_done(app))
        payload = pane(app).session.turns[0].action.payload
        assert [e["keystrokes"] for e in payload] == ["vim notes.txt\n", "ihello\n", "C-c"]
        await pilot.press("f5")
        await wait_for(pilot, lambda: len(pane(app).session.turns) == 2 and not pane(app).busy)
        wait_entry = pane(app).session.turns[1].action.payload
        assert wait_entry == [{"keystrokes": "", "duration": 5.0}]


def reasoning_title(app: AgentWorldApp) -> str:
    return str(pane(app).reasoning.query_one("#reasoning-title", Static).render())


async def test_escape_stops_and_retry_keeps_the_earlier_answer(long_model: Path) -> None:
    app = make_app(long_model)
    async with app.run_test(size=(120, 36)) as pilot:
        await asyncio.wait_for(app.model_ready.wait(), 30)
        await pilot.press(*"make", "enter")
        await wait_for(pilot, lambda: pane(app).status.reasoning_tokens > 0)
        await pilot.press("escape")
        await wait_for(pilot, lambda: not pane(app).busy)
        turn = pane(app).session.turns[0]
        assert turn.status == "interrupted"
        assert turn.reasoning.startswith("step00000")
        first = turn.reasoning
        assert "[stopped by you]" in pane(app).screen_view.text
        assert "tokens" in reasoning_title(app)  # the count is written when a turn ends
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: pane(app).busy and pane(app).status.reasoning_tokens > 0)
        assert reasoning_title(app) == "Reasoning"  # not the last turn's count
        assert turn.attempts[0]["status"] == "interrupted"
        assert turn.attempts[0]["reasoning"] == first
        assert "[stopped by you]" not in pane(app).screen_view.text  # the retry redraws
        await pilot.press("escape")
        await wait_for(pilot, lambda: not pane(app).busy)
        assert turn.status == "interrupted" and turn.reasoning.startswith("step00000")


async def test_a_streaming_tab_keeps_its_width_and_a_steady_cursor(long_model: Path) -> None:
    """Nothing moves or blinks while a turn streams, apart from what the model writes."""
    app = make_app(long_model)
    async with app.run_test(size=(120, 36)) as pilot:
        await asyncio.wait_for(app.model_ready.wait(), 30)
        await asyncio.wait_for(app.tabs_ready.wait(), 30)
        tab = app.tabs().get_tab("tab-terminal")
        editor = pane(app).query_one(Input)
        idle_width = tab.region.width
        assert editor.cursor_blink
        await pilot.press(*"make", "enter")
        await wait_for(pilot, lambda: pane(app).status.reasoning_tokens > 0)
        await pilot.pause()
        assert "●" in str(tab.label)
        assert "Terminal ●" in drawn(tab)
        assert tab.region.width == idle_width
        assert not editor.cursor_blink
        await pilot.press("escape")
        await wait_for(pilot, lambda: not pane(app).busy)
        await pilot.pause()
        assert "●" not in str(tab.label) and "●" not in drawn(tab)
        assert tab.region.width == idle_width
        assert editor.cursor_blink


def drawn(widget: Widget) -> str:
    """The text a widget draws now."""
    return "".join(strip.text for strip in widget.render_lines(Region(0, 0, *widget.outer_size)))


async def test_a_turn_lays_nothing_out(ls_model: Path) -> None:
    """Starting and ending a turn change a tab's label, the scenario line and the action's
    error line, none of which changes size: the screen is not laid out again (a layout
    of this screen costs the main thread several milliseconds and queues a message for
    every widget). The command is sent as Enter sends it, without the command line
    emptying itself (an Input lays itself out as its text's width changes, as it does at
    every key typed)."""
    from agentworld_tui.domains.terminal import command

    app = make_app(ls_model)
    async with app.run_test(size=(120, 36)) as pilot:
        await asyncio.wait_for(app.model_ready.wait(), 30)
        await asyncio.wait_for(app.tabs_ready.wait(), 30)
        await pilot.pause()
        screen = app.screen
        layouts = 0
        refresh_layout = screen._refresh_layout

        def counted(*args: Any, **kwargs: Any) -> None:
            nonlocal layouts
            layouts += 1
            refresh_layout(*args, **kwargs)

        screen._refresh_layout = counted  # type: ignore[method-assign]
        tab = pane(app)
        assert tab.send(tab.domain.make_action([command("ls")], tab.session.scenario))
        await wait_for(pilot, turn_done(app))
        await pilot.pause()
        assert pane(app).screen_view.text.splitlines()[-2] == "README.md  src"
        assert layouts == 0


async def test_frames_thin_out_while_the_main_thread_is_busy() -> None:
    """The gap between frames follows the main thread's share of a core since the last
    frame: far above UI_SHARE it widens to the slowest pace, idle it narrows back to the
    fastest."""
    import time

    from agentworld_tui.ui import frames as base

    def next_gap(tab: DomainPane, busy: float, idle: float) -> float:
        until = time.thread_time() + busy
        while time.thread_time() < until:  # the main thread at work
            pass
        time.sleep(idle)
        tab.frames._next_frame = 0.0  # due now
        assert tab.frames._frame_due()
        return tab.frames._gap

    import gc

    # A collection of the test process's objects is main-thread time too: one in an idle
    # step (CI saw it) slows the gap's way back to the fastest pace.
    gc.disable()
    try:
        app = make_app(None)
        async with app.run_test(size=(120, 36)):
            tab = pane(app)
            tab.frames._last_frame = None
            assert next_gap(tab, 0, 0) == base.FRAME_SECONDS  # the first frame measures nothing
            gaps = [next_gap(tab, 0.02, 0.02) for _ in range(3)]  # about half a core
            assert gaps[0] > base.FRAME_SECONDS
            assert gaps[-1] == base.MAX_FRAME_SECONDS
            gaps = [next_gap(tab, 0, 0.3) for _ in range(3)]  # idle
            # Back at (or, with a stray fraction of a millisecond in its 1/30 s, next to) the
            # fastest pace.
            assert gaps[-1] < 1.5 * base.FRAME_SECONDS
            next_gap(tab, 0.02, 0.02)
            assert tab.frames._gap > base.FRAME_SECONDS
            # A model on a server takes nothing from this machine: its turns' frames come at
            # full pace.
            from agentworld_tui.domains.terminal import command
            from agentworld_tui.engines.remote import RemoteEngine

            await asyncio.wait_for(app.tabs_ready.wait(), 30)
            app.simulator.queue.engine, app.simulator.engine_error = (
                RemoteEngine("http://127.0.0.1:9"),
                "",
            )
            assert tab.frames._local
            assert tab.send(
                tab.domain.make_action([command("ls")], tab.session.scenario)
            )  # (the queue has none)
            assert not tab.frames._local
            next_gap(tab, 0.02, 0.02)
            tab.frames._next_frame = 0.0
            now = time.monotonic()
            assert tab.frames._frame_due()
            assert tab.frames._next_frame - now < base.MAX_FRAME_SECONDS / 2  # FRAME_SECONDS ahead
    finally:
        gc.enable()


async def test_a_frame_due_as_the_app_closes_draws_nothing() -> None:
    """The engine's last events can reach a pane as the app quits: a frame that comes
    after its views are gone draws nothing, and raises nothing."""
    import time

    from agentworld_tui.domains.terminal import command
    from agentworld_tui.engines.remote import RemoteEngine

    app = make_app(None)
    async with app.run_test(size=(120, 36)) as pilot:
        await asyncio.wait_for(app.tabs_ready.wait(), 30)
        tab = pane(app)
        app.simulator.queue.engine, app.simulator.engine_error = (
            RemoteEngine("http://127.0.0.1:9"),
            "",
        )
        assert tab.send(
            tab.domain.make_action([command("ls")], tab.session.scenario)
        )  # the queue has no model
        tab.frames._next_frame = time.monotonic() + 3600  # the frame comes after it closed
        run = tab.run
        assert run is not None
        await wait_for(pilot, lambda: run._final is not None)
    assert tab.run is not None
    tab.frames._next_frame = 0.0
    tab.frames._frame()
    assert tab.run is not None  # nothing was drawn


async def test_a_pane_parks_while_the_engine_is_silent_and_the_engine_wakes_it(
    ls_model: Path,
) -> None:
    """While the engine has nothing to hand over (a long prompt, a server before its first
    token) the pane schedules nothing: the main thread sleeps. The engine thread wakes it
    with the next event, which is drawn then."""
    app = make_app(ls_model)
    held, release = threading.Event(), threading.Event()
    async with app.run_test(size=(120, 36)) as pilot:
        await asyncio.wait_for(app.model_ready.wait(), 30)
        assert app.engine is not None
        stream = app.engine.stream

        def silent_first(*args: Any) -> Any:
            held.set()
            release.wait(10)
            yield from stream(*args)

        app.engine.stream = silent_first  # type: ignore[method-assign]
        await pilot.press(*"ls", "enter")
        tab = pane(app)
        await wait_for(pilot, lambda: held.is_set() and tab.frames._parked)
        await pilot.pause(0.3)  # a poll would have come round by now
        assert tab.frames._parked and tab.frames._timer is None
        assert tab.busy and tab.reasoning.view.text == ""
        release.set()
        await wait_for(pilot, turn_done(app))
        assert not tab.frames._parked and tab.frames._timer is None
        assert "README.md" in tab.screen_view.text
        assert tab.reasoning.view.text.strip() == "checking the cwd"


async def test_an_error_in_a_frame_ends_the_app_as_a_handlers_does(ls_model: Path) -> None:
    """A frame runs in the event loop's own callback; its error still reaches Textual, which
    ends the app and raises it (not a line in the loop's log and a pane that stops)."""

    def broken(_update: object) -> None:
        raise RuntimeError("a frame failed")

    app = make_app(ls_model)
    with pytest.raises(RuntimeError, match="a frame failed"):
        async with app.run_test(size=(120, 36)) as pilot:
            await asyncio.wait_for(app.model_ready.wait(), 30)
            tab = pane(app)
            tab.frames._draw = broken  # type: ignore[assignment]
            await pilot.press(*"ls", "enter")
            for _ in range(500):
                if app.return_code is not None:
                    break
                await asyncio.sleep(0.02)
    assert app.return_code == 1


async def test_a_frame_late_after_a_silence_keeps_the_gap() -> None:
    """A frame that comes late because the engine was silent is measured over the gap it
    was meant to cover: its cost is not thinned out by the silence, so the frames after it
    do not come faster than the main thread's share allows."""
    import time

    from agentworld_tui.ui import frames as base

    app = make_app(None)
    async with app.run_test(size=(120, 36)):
        tab = pane(app)
        tab.frames._gap = base.MAX_FRAME_SECONDS
        frame = base.MAX_FRAME_SECONDS * base.UI_SHARE  # a frame's cost at UI_SHARE
        # The last frame began 2 s ago and cost just that; nothing ran since.
        tab.frames._last_frame = (time.monotonic() - 2.0, time.thread_time() - frame)
        tab.frames._next_frame = 0.0
        assert tab.frames._frame_due()
        assert tab.frames._gap > 0.9 * base.MAX_FRAME_SECONDS  # thinned over 2 s it was 0.39x


async def test_live_counters_are_drawn_with_the_frame_that_changed_them() -> None:
    """A frame that brings new counts updates the status line itself: both go to the screen
    in one update, instead of the status line waiting for a message and a screen update of
    its own after the frame's."""
    from agentworld_tui.simulator import TurnUpdate

    app = make_app(None)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        tab = pane(app)
        status = app.query_one(StatusBar)
        tab.draw(
            TurnUpdate("thinking on", generated=4321, reasoning_tokens=4321, phase="reasoning")
        )
        assert tab.reasoning.view.text == "thinking on"
        shown = status.render_line(0).text  # as drawn, before any message is handled
        assert "4,321 tok" in shown and "reasoning 4,321" in shown


async def test_retry_after_a_finished_turn_completes_again(ls_model: Path) -> None:
    app = make_app(ls_model)
    async with app.run_test(size=(120, 36)) as pilot:
        await asyncio.wait_for(app.model_ready.wait(), 30)
        await pilot.press(*"ls", "enter")
        await wait_for(pilot, turn_done(app))
        turn = pane(app).session.turns[0]
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: bool(turn.attempts) and not pane(app).busy)
        assert turn.status == "complete"
        assert turn.attempts[0]["observation"] == turn.observation
        assert pane(app).screen_view.text.splitlines() == [
            "user@devbox:~/project$ ls",
            "README.md  src",
            "user@devbox:~/project$",
        ]


async def test_answer_now_ends_reasoning_in_the_same_generation(long_model: Path) -> None:
    app = make_app(long_model)
    async with app.run_test(size=(120, 36)) as pilot:
        await asyncio.wait_for(app.model_ready.wait(), 30)
        await pilot.press(*"make", "enter")
        await wait_for(pilot, lambda: pane(app).status.reasoning_tokens > 0)
        await pilot.press("ctrl+g")
        # The reasoning closes and the answer starts in the same generation.
        await wait_for(pilot, lambda: pane(app).status.phase == "answering")
        assert pane(app).status.reasoning_tokens < 2000
        await pilot.press("escape")  # the scripted model would now replay its script
        await wait_for(pilot, lambda: not pane(app).busy)
        turn = pane(app).session.turns[0]
        assert turn.stats["reasoning_tokens"] < 2000
        assert turn.stats["evaluated_prompt_tokens"] == turn.stats["prompt_tokens"]


async def test_history_that_does_not_fit_is_left_out_and_said(tmp_path: Path) -> None:
    answer = "".join(f"line {i:03d} of output\n" for i in range(40))
    model = write_scripted_model(
        tmp_path / "long.gguf",
        f"ok</think><predicted_observation>{answer}$ </predicted_observation>",
        n_ctx_train=4096,
    )
    app = make_app(model, max_tokens=400)
    async with app.run_test(size=(120, 36)) as pilot:
        await asyncio.wait_for(app.model_ready.wait(), 30)
        for command in ("one", "two", "three", "four"):
            await pilot.press(*command, "enter")
            await wait_for(pilot, lambda: not pane(app).busy)
        last = pane(app).session.turns[-1]
        assert last.omitted_turns > 0
        assert pane(app).status.omitted_turns == last.omitted_turns
        assert any("no longer fit" in n.message for n in app._notifications)


async def test_app_without_a_model_explains_how_to_give_one() -> None:
    app = make_app(None)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        text = pane(app).screen_view.text
        assert "agentworld --model PATH.gguf" in text
        await pilot.press(*"ls", "enter")
        await pilot.pause()
        assert not pane(app).session.turns
        error = str(pane(app).query_one("#action-error").render())
        assert "no model configured" in error
        # The other tabs, built after the first frame, start the same way.
        await asyncio.wait_for(app.tabs_ready.wait(), 30)
        panes = app.panes()
        assert [p.domain.name for p in panes] == list(DOMAINS)
        for other in panes:
            assert "agentworld --model PATH.gguf" in other.screen_view.text, other.domain.name


class FirstFrameProbe(AgentWorldApp):
    """Notes which tabs are built when Textual says the first frame is drawn."""

    CSS_PATH = Path(app_module.__file__).with_name("app.tcss")
    built_at_first_frame: list[str]

    def on_ready(self) -> None:
        self.built_at_first_frame = [p.domain.name for p in self.panes()]


async def test_only_the_first_tab_is_built_before_the_first_frame() -> None:
    app = FirstFrameProbe(make_app(None).settings, offer_models=False)
    async with app.run_test(size=(120, 36)) as pilot:
        await asyncio.wait_for(app.tabs_ready.wait(), 30)
        await pilot.pause()
        assert app.built_at_first_frame == ["terminal"]
        assert len(app.panes()) == len(DOMAINS)


async def test_garbage_collection_is_back_on_once_the_tabs_are_built() -> None:
    """``agentworld`` starts with the cyclic collector off (cli.cmd_app); the app turns it
    back on once every tab is built, with what start-up left alive frozen. An app started
    with the collector on leaves it alone."""
    import gc

    app = FirstFrameProbe(make_app(None).settings, offer_models=False)
    frozen = gc.get_freeze_count()
    gc.disable()
    try:
        async with app.run_test(size=(120, 36)):
            await asyncio.wait_for(app.tabs_ready.wait(), 30)
            assert gc.isenabled()
            assert gc.get_freeze_count() > frozen
        gc.unfreeze()
        async with make_app(None).run_test(size=(120, 36)) as pilot:
            await asyncio.wait_for(pilot.app.tabs_ready.wait(), 30)
            assert gc.isenabled() and gc.get_freeze_count() == 0
    finally:
        gc.unfreeze()
        gc.enable()


def uncovered_cells(container: Widget) -> set[tuple[int, int]]:
    """The cells of a container that none of its displayed children covers."""
    region = container.region
    cells = {(x, y) for x in range(region.x, region.right) for y in range(region.y, region.bottom)}
    for child in container.children:
        if child.display:
            box = child.region
            cells -= {(x, y) for x in range(box.x, box.right) for y in range(box.y, box.bottom)}
    return cells


@pytest.mark.parametrize("closing_at", ["mcp", "search", "os"])
async def test_closing_while_the_other_tabs_are_built_leaves_no_error(closing_at: str) -> None:
    """The app can close while it builds the tabs not shown first (a test that ends at
    once closes it from outside its message loop): a pane removed as it is mounted lacks
    some of its parts, and neither the pane nor the app may reach for them (CI saw
    NoMatches from both)."""
    app = make_app(None)
    new_pane = app.start_up.new_pane
    built: list[str] = []
    reached = asyncio.Event()

    def building(name: str) -> DomainPane:
        built.append(name)
        if name == closing_at:
            reached.set()
        return new_pane(name)

    app.start_up.new_pane = building  # type: ignore[method-assign]
    async with app.run_test(size=(120, 36)):
        await reached.wait()  # and close while that pane is mounted
    assert built[-1] == closing_at  # it closed there, and without an error
    assert not app.tabs_ready.is_set()


def test_quitting_while_the_model_loads_leaves_the_engine_thread_well(ls_model: Path) -> None:
    """The engine thread reports a load's progress and end to the app; after a quit while
    the model loads, the app and its event loop are gone, and those reports must go
    nowhere instead of killing the thread with the closed loop's error."""
    errors: list[BaseException | None] = []
    hook = threading.excepthook
    threading.excepthook = lambda args: errors.append(args.exc_value)
    closed, reported = threading.Event(), threading.Event()
    try:
        app = make_app(ls_model)
        assert app.engine is not None
        load, start_loading = app.engine.load, app.simulator.load

        def slow_load(progress: object) -> None:
            closed.wait(30)  # the app has quit and its loop is closed by now
            load(progress)  # type: ignore[arg-type]

        def loading(on_progress: Any, on_done: Any, **kwargs: Any) -> None:
            def done(error: str | None) -> None:
                on_done(error)  # the app's report, on the engine thread, after it quit
                reported.set()

            start_loading(on_progress, done, **kwargs)

        app.engine.load = slow_load  # type: ignore[method-assign]
        app.simulator.load = loading  # type: ignore[method-assign]

        async def quit_at_once() -> None:
            async with app.run_test(size=(120, 36)):
                pass

        asyncio.run(quit_at_once())
        closed.set()
        reported.wait(30)
    finally:
        threading.excepthook = hook
    assert reported.is_set()
    assert app.engine.loaded
    assert app.simulator.queue._thread.is_alive()  # the worker lives on, waiting for jobs
    assert errors == []


async def test_the_first_frame_shows_the_command_line_focused() -> None:
    """Typing goes to the first tab's command line from the first frame on: the focus is
    there when Textual reports the first frame drawn (Ready), not moved after it."""
    focused_at_first_frame: list[Widget | None] = []

    class Watched(AgentWorldApp):
        CSS_PATH = Path(inspect.getfile(AgentWorldApp)).with_name("app.tcss")

        def on_ready(self) -> None:
            focused_at_first_frame.append(self.focused)

    app = make_app(None, Watched)
    async with app.run_test(size=(120, 36)) as pilot:
        await asyncio.wait_for(app.tabs_ready.wait(), 30)
        assert focused_at_first_frame == [pane(app).query_one(Input)]
        await pilot.press(*"pwd")
        assert pane(app).query_one(Input).value == "pwd"


async def test_the_first_frame_is_styled_as_a_full_restyle_would_style_it() -> None:
    """The main screen skips the restyle of every widget that Textual does as it first
    shows a screen (MainScreen._on_screen_resume): each widget was styled as it was
    mounted. At the first frame, restyling them all changes no style and no cell."""
    seen: dict[str, object] = {}

    class Restyled(AgentWorldApp):
        CSS_PATH = Path(inspect.getfile(AgentWorldApp)).with_name("app.tcss")

        def on_ready(self) -> None:
            nodes = list(self.screen.walk_children(with_self=True))
            seen["styled"] = [dict(node._css_styles.get_rules()) for node in nodes]
            seen["cells"] = self.screen.render_lines(self.screen.outer_size.region)
            self.stylesheet.update_nodes(nodes, animate=False)
            seen["restyled"] = [dict(node._css_styles.get_rules()) for node in nodes]
            seen["cells again"] = self.screen.render_lines(self.screen.outer_size.region)

    app = make_app(None, Restyled)
    async with app.run_test(size=(120, 36)):
        await asyncio.wait_for(app.tabs_ready.wait(), 30)
    assert seen["styled"] == seen["restyled"]
    assert len(seen["styled"]) > 30  # type: ignore[arg-type]
    assert seen["cells"] == seen["cells again"]


async def test_a_resize_to_the_size_laid_out_lays_nothing_out() -> None:
    """Textual sends the screen resizes of the size it already has (three at start); the
    main screen lays itself out again only for a new size."""
    app = make_app(None)
    async with app.run_test(size=(120, 36)) as pilot:
        await asyncio.wait_for(app.tabs_ready.wait(), 30)
        await pilot.pause()
        screen = app.screen
        layouts: list[object] = []
        reflow = screen._compositor.reflow

        def counted(*args: Any, **kwargs: Any) -> Any:
            layouts.append(args[1])
            return reflow(*args, **kwargs)

        screen._compositor.reflow = counted  # type: ignore[method-assign]
        screen.post_message(events.Resize(screen.size, screen.size))
        await pilot.pause()
        assert layouts == []
        await pilot.resize_terminal(100, 30)
        await pilot.pause()
        assert layouts and layouts[-1] == (100, 30)
        assert screen.size == (100, 30)
        assert app.query_one(StatusBar).region.width == 100


async def test_frames_of_the_views_leave_the_one_row_widgets_above_them_alone() -> None:
    """A screen update renders every widget whose container's area it touches: the
    scenario line and the reasoning panel's title sit in one-row containers of their own,
    and the panel's border is a column of its own, so the frames of a streaming view (the
    reasoning, then the answer) do not render them again."""
    app = make_app(None)
    async with app.run_test(size=(120, 36)) as pilot:
        await asyncio.wait_for(app.tabs_ready.wait(), 30)
        terminal = pane(app)
        terminal.line.cursor_blink = False  # as while its tab streams (a blink is a change)
        await pilot.pause()
        rendered: dict[str, int] = {}
        widgets = {
            name: terminal.query_one(f"#{name}")
            for name in (
                "scenario-line",
                "reasoning-title",
                "reasoning-edge",
                "reasoning-view",
                "screen",
            )
        }
        for name, widget in widgets.items():

            def counted(crop: Region, name: str = name, draw: Any = widget.render_lines) -> Any:
                rendered[name] = rendered.get(name, 0) + 1
                return draw(crop)

            widget.render_lines = counted  # type: ignore[method-assign]
        for _ in range(100):  # start-up's last repaints (slow under load) come first
            rendered.clear()
            await pilot.pause(0.02)
            if not rendered:
                break
        assert not rendered, "the app kept repainting with nothing streaming"
        for view in (terminal.reasoning.view, terminal.screen_view):  # as a turn streams
            for step in range(30):
                view.append(f"line {step}\n")
                await pilot.pause()
        assert rendered.get("reasoning-view", 0) >= 10
        assert rendered.get("screen", 0) >= 10
        assert "scenario-line" not in rendered
        assert "reasoning-title" not in rendered
        assert "reasoning-edge" not in rendered


async def test_covered_containers_paint_nothing_and_leave_no_gap() -> None:
    """The containers marked ``backdrop`` (app.tcss), and the tabs' switcher, are hidden,
    so a screen update does not paint them, and their children are shown; so that no stale
    cell can show through, their displayed children cover them, in every tab, with the
    reasoning panel shown or folded, at a narrow and a wide size."""
    app = make_app(None)
    async with app.run_test(size=(120, 36)) as pilot:
        await asyncio.wait_for(app.tabs_ready.wait(), 30)
        checked = 0
        for size in ((120, 36), (70, 24)):
            await pilot.resize_terminal(*size)
            for name in DOMAINS:
                app.tabs().active = f"tab-{name}"
                for folded in (False, True):
                    app.active_pane.reasoning.display = not folded
                    await pilot.pause()
                    covered = list(app.screen.query(".backdrop, #tabs > ContentSwitcher"))
                    shown = [
                        w
                        for w in covered
                        if all(a.display for a in w.ancestors_with_self)  # not another tab's
                    ]
                    assert app.active_pane in shown
                    assert app.tabs().query_one(ContentSwitcher) in shown
                    for container in shown:
                        assert not container.visible
                        for child in container.children:
                            assert child.visible != (child in covered)
                    # A hidden container has no region of its own: shown for a moment (the
                    # layout is the same), each must be covered by its children.
                    for container in shown:
                        container.styles.visibility = "visible"
                    await pilot.pause()
                    for container in shown:
                        assert container.region.area > 0
                        assert not uncovered_cells(container), (name, container, size)
                        container.styles.clear_rule("visibility")
                        checked += 1
        assert checked > 8 * len(DOMAINS)


async def test_a_turn_sent_before_every_tab_is_built_is_refused_and_kept(
    ls_model: Path,
) -> None:
    """The start session (resume, --session) may still replace a tab until every tab is
    built: an action sent before then is refused, and stays in the editor."""
    app = make_app(ls_model)
    async with app.run_test(size=(120, 36)) as pilot:
        await asyncio.wait_for(app.model_ready.wait(), 30)
        await asyncio.wait_for(app.tabs_ready.wait(), 30)
        app.tabs_ready.clear()  # as during the first moments after the first frame
        await pilot.press(*"ls", "enter")
        await pilot.pause()
        assert not pane(app).session.turns
        assert "still starting" in str(pane(app).query_one("#action-error").render())
        assert pane(app).query_one(Input).value == "ls"
        app.tabs_ready.set()
        await pilot.press("enter")
        await wait_for(pilot, turn_done(app))


async def test_bad_model_file_is_reported_in_the_app(tmp_path: Path) -> None:
    bogus = tmp_path / "bogus.gguf"
    bogus.write_bytes(b"not a model at all")
    app = make_app(bogus)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: "not a GGUF model file" in pane(app).screen_view.text)
        assert "not a GGUF model file" in app.simulator.engine_error
        await asyncio.wait_for(app.tabs_ready.wait(), 30)
        for other in app.panes():
            assert "not a GGUF model file" in other.screen_view.text, other.domain.name


async def test_hostile_output_is_shown_harmlessly(tmp_path: Path) -> None:
    hostile = "\x1b]0;pwned\x07[bold red]x[/]\x1b[2J"
    model = write_scripted_model(
        tmp_path / "hostile.gguf",
        [
            "think",
            "</think>",
            "<predicted_observation>",
            hostile,
            "\nend",
            "</predicted_observation>",
        ],
    )
    app = make_app(model)
    async with app.run_test(size=(120, 36)) as pilot:
        await asyncio.wait_for(app.model_ready.wait(), 30)
        await pilot.press(*"cat x", "enter")
        await wait_for(pilot, turn_done(app))
        shown = pane(app).screen_view.text
        assert "[bold red]x[/]" in shown  # markup shown literally, never interpreted
        assert "\x1b" not in shown and "\x07" not in shown
        assert pane(app).session.turns[0].observation.startswith("\x1b]0;pwned")


async def test_help_screen_lists_the_bindings(ls_model: Path) -> None:
    app = make_app(ls_model)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("f1")
        await pilot.pause()
        rows = dict(app.screen.keys)  # type: ignore[attr-defined]  # the help's table
        assert rows["Escape"].startswith("Stop generating")
        assert rows["Ctrl+R"].startswith("Ask again") and rows["F2"].startswith("Add the line")
        assert rows["Alt+Right / Ctrl+PageDown"] == "Show the next tab"
        assert app.screen.__class__.__name__ == "HelpScreen"


async def test_turns_are_saved_and_the_session_resumes(ls_model: Path) -> None:
    app = make_app(ls_model)
    async with app.run_test(size=(120, 36)) as pilot:
        await asyncio.wait_for(app.model_ready.wait(), 30)
        await pilot.press(*"ls", "enter")
        await wait_for(pilot, turn_done(app))
        saved = app.workspace.path
        assert saved is not None
        await wait_for(pilot, saved.exists)

    again = make_app(ls_model)
    async with again.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: again.screen.__class__.__name__ == "ConfirmScreen")
        await pilot.click("#yes")
        await wait_for(pilot, lambda: bool(pane(again).session.turns))
        assert pane(again).session.turns[0].observation.endswith("user@devbox:~/project$")
        assert "README.md  src" in pane(again).screen_view.text
        await pilot.press("f6")
        await pilot.pause()
        assert not pane(again).session.turns


async def test_damaged_session_file_is_refused_and_left_untouched(
    ls_model: Path, tmp_path: Path
) -> None:
    damaged = tmp_path / "shared.json"
    damaged.write_text('{"format": "agentworld-session", "schema": 1, "tabs": [', "utf-8")
    before = damaged.read_bytes()
    settings = Settings()
    settings.model.path, settings.model.threads = str(ls_model), 2
    app = AgentWorldApp(settings, session_file=damaged)
    async with app.run_test(size=(120, 36)) as pilot:
        await asyncio.wait_for(app.model_ready.wait(), 30)
        await pilot.press(*"ls", "enter")
        await wait_for(pilot, turn_done(app))
        assert any("damaged" in n.message for n in app._notifications)
    assert damaged.read_bytes() == before


async def test_thinking_can_be_switched_off_for_one_tab(ls_model: Path) -> None:
    app = make_app(ls_model)
    async with app.run_test(size=(120, 36)) as pilot:
        await asyncio.wait_for(app.model_ready.wait(), 30)
        await pilot.press("f4")
        await pilot.press(*"ls", "enter")
        await wait_for(pilot, turn_done(app))
        turn = pane(app).session.turns[0]
        # With thinking off the template closes the reasoning block in the prompt: the
        # script's text before its stray </think> is set apart, never shown as the answer.
        assert turn.stats["reasoning_tokens"] == 0
        assert "checking the cwd" not in turn.observation and "README.md" in turn.observation
        assert pane(app).turn_params().enable_thinking is False
        assert app.simulator.params.enable_thinking is True


async def test_settings_problems_are_shown_in_the_app(ls_model: Path) -> None:
    app = make_app(ls_model)
    app.settings.problems = ["config.toml: line 3: expected '=' (defaults used)", "[/b] key"]
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        assert any("line 3" in n.message for n in app._notifications)
        assert any(n.message == "[/b] key" for n in app._notifications)  # shown, not markup


def _big_answer_model(path: Path, *, newline: bool) -> Path:
    """An answer of 100 pieces of 10 kB: 100k lines, or one 1 MB line."""
    if newline:
        chunks = ["".join(f"row {i * 1000 + j:06d}\n" for j in range(1000)) for i in range(100)]
    else:
        chunks = [f"<{i:03d}>" + "x" * 9_995 for i in range(100)]
    return write_scripted_model(
        path, ["big", "</think>", "<predicted_observation>", *chunks, "</predicted_observation>"]
    )


@pytest.mark.parametrize("newline", [True, False], ids=["100k-lines", "1MB-line"])
async def test_huge_answers_stay_responsive(tmp_path: Path, newline: bool) -> None:
    app = make_app(_big_answer_model(tmp_path / "big.gguf", newline=newline))
    async with app.run_test(size=(120, 36)) as pilot:
        await asyncio.wait_for(app.model_ready.wait(), 30)
        await pilot.press(*"cat big", "enter")
        await wait_for(pilot, turn_done(app), 120)
        observation = pane(app).session.turns[0].observation
        view = pane(app).screen_view
        if newline:
            assert len(observation.splitlines()) == 100_000
            assert view.line_count >= 100_000
        else:
            assert len(observation) == 1_000_000
            longest = max(len(view.line(i).plain) for i in range(view.line_count))
            assert longest == 1_000_000  # kept whole; only the display is cut
        await pilot.press(*"echo hi")  # the prompt line still takes keys at once
        await pilot.pause()
        assert app.query_one("#keystrokes").value == "echo hi"


async def test_the_palette_lists_every_key_and_runs_a_tab_key() -> None:
    from textual.widgets import OptionList

    app = make_app(None)
    async with app.run_test(size=(120, 36)) as pilot:
        await asyncio.wait_for(app.tabs_ready.wait(), 30)

        async def options(query: str) -> list[str]:
            await pilot.press("ctrl+p")
            await wait_for(pilot, lambda: app.screen.__class__.__name__ == "CommandPalette")
            await pilot.press(*query)
            found = app.screen.query_one(OptionList)
            await wait_for(pilot, lambda: found.option_count > 0)
            await pilot.pause(0.3)
            return [str(found.get_option_at_index(i).prompt) for i in range(found.option_count)]

        shown = await options("screensh")
        assert sum("Screenshot" in o for o in shown) == 1, shown
        await pilot.press("escape")
        assert any("Help" in o for o in await options("help"))
        await pilot.press("escape")
        assert any("Show the Android tab" in o for o in await options("show the andr"))
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.tabs().active == "tab-android")
