"""The real app under a real pseudo-terminal, fed hostile text every way it comes in: a
shared session file with escape sequences in every field it shows, and a server whose
model ids and error bodies carry them. Not one of them reaches the terminal's bytes."""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import ScriptedModel
from faultserver import FaultServer, Reply
from ptyapp import PtyApp
from realitykit import any_backend
from test_cli_output import HOSTILE

from agentworld_tui.domains import DOMAINS, get_domain
from agentworld_tui.ui.start import first_scenario
from agentworld_tui.world.domain import Scenario
from agentworld_tui.world.sanitize import sanitize
from agentworld_tui.world.session import new_session
from agentworld_tui.world.workspace import Workspace

# What a hostile text would make the terminal do, as the bytes the app must never write.
FORBIDDEN = {
    "window title": b"\x1b]0;",
    "clipboard": b"\x1b]52",
    "8-bit CSI": "\x9b".encode(),
    "8-bit OSC": "\x9d".encode(),
    "right-to-left override": "\u202e".encode(),
    "isolate": "\u2066".encode(),
    "DEL": b"\x7f",
    "NUL": b"\x00",
}


def hostile_session_file(path: Path) -> None:
    terminal = get_domain("terminal")
    scenario = Scenario(
        "evil", f"Title {HOSTILE}", f"About {HOSTILE}", state=f"root@box:/# {HOSTILE}\n"
    )
    session, _ = new_session(terminal, scenario)
    turn = session.begin_turn(terminal.parse_action("ls", scenario))
    session.finish_turn(
        turn,
        observation=f"out {HOSTILE}\nroot@box:/# ",
        reasoning=f"think {HOSTILE}",
        status="interrupted",
        note=f"note {HOSTILE}",
        raw=f"raw {HOSTILE}",
        extraction=f"dropped {HOSTILE}",
    )
    Workspace([session], name=f"Shared {HOSTILE}").save(path)


STYLE = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]")
"""A control sequence that colours or moves the cursor: the text the app draws is
written between them."""


def wait_for_drawn(app: PtyApp, text: str, timeout: float = 120) -> None:
    """Read until ``text`` is drawn after the bytes last sent, whatever styles or cursor
    moves were written between its characters."""
    end = time.monotonic() + timeout
    while text not in STYLE.sub(b"", app.written[app.mark :]).decode("utf-8", "replace"):
        if time.monotonic() > end or app.process.poll() is not None:
            raise AssertionError(f"{text!r} never drawn: {bytes(app.written[-1500:])!r}")
        app.read(0.1)


def run_app(args: list[str], server: FaultServer, size: tuple[int, int]) -> bytes:
    """Start the app on a pty of ``size``, type a command once the session file is open
    and the model ready, wait until the turn's error is drawn, then quit with Ctrl+Q;
    every byte it wrote."""
    with PtyApp(args, size) as app:
        app.wait_for("Opened")
        app.wait_for("ctx 0/")  # the model is ready
        app.send(b"ls\r")
        wait_for_drawn(app, "│ error")  # the status line says the turn ended in an error
        assert server.chat_requests(), "the command never reached the server"
        code = app.quit()
    assert code == 0, bytes(app.written[-2000:])
    return bytes(app.written)


@pytest.mark.parametrize(
    "reply",
    [
        Reply(status=500, error_message=HOSTILE),
        Reply(content=["a", "b"], error_event_after=1, error_message=HOSTILE),
    ],
    ids=["error-reply", "error-event-in-the-stream"],
)
def test_no_hostile_text_reaches_the_terminal(
    isolated_dirs: dict[str, Path], tmp_path: Path, reply: Reply
) -> None:
    shared = tmp_path / "shared.json"
    hostile_session_file(shared)
    models = [{"id": "world-" + HOSTILE.replace("\x00", "")}]  # an argument holds no NUL
    with FaultServer(models=models, default=reply) as server:
        written = run_app(
            ["--session", str(shared), "--server", server.url, "--server-model", models[0]["id"]],
            server,
            (120, 36),
        )
        assert server.chat_requests(), "the command never reached the server"
    for what, sequence in FORBIDDEN.items():
        assert sequence not in written, what
    text = written.decode("utf-8", "replace")
    assert "Title" in text and "evil" in text  # the hostile fields were shown, cleaned
    log = (isolated_dirs["data"] / "agentworld.log").read_bytes()
    for what, sequence in FORBIDDEN.items():
        assert sequence not in log, f"log: {what}"


# Alt+digit as terminals send it: ESC then the digit (tmux, xterm, GNOME Terminal, Konsole,
# Alacritty, macOS Terminal with Option as Meta), the CSI u form of the kitty keyboard
# protocol (kitty, WezTerm, foot, Ghostty), and xterm's modifyOtherKeys form (xterm, and
# tmux with extended-keys on).
ALT_DIGIT = {
    "esc-digit": lambda digit: b"\x1b%d" % digit,
    "csi-u": lambda digit: b"\x1b[%d;3u" % (ord("0") + digit),
    "modify-other-keys": lambda digit: b"\x1b[27;3;%d~" % (ord("0") + digit),
}
# What Textual made of ESC+digit: macOS Option characters, typed into the command line.
OPTION_CHARACTERS = "¡™£¢∞§¶•ªº"


@pytest.mark.parametrize("form", list(ALT_DIGIT))
def test_alt_digit_switches_tabs_in_the_terminals_people_use(
    scripted_model: ScriptedModel, form: str
) -> None:
    model = scripted_model("x</think><predicted_observation>$ </predicted_observation>")
    titles = [first_scenario(name).title for name in DOMAINS]
    with PtyApp(["--model", str(model)]) as app:
        app.wait_for("type a command")
        for digit in [*range(2, len(titles) + 1), 1]:
            app.send(ALT_DIGIT[form](digit))
            app.wait_for(titles[digit - 1][:20], timeout=10, after=app.mark)
        assert app.quit() == 0
    shown = app.written.decode("utf-8", "replace")
    assert not set(OPTION_CHARACTERS) & set(shown)


# -- every tab, fed hostile text by a shared session file and by an agent over Ctrl+B ---------
CLEAN = sanitize(HOSTILE)
"""What the hostile text is once sanitized: only its harmless letters."""
NO_NUL = HOSTILE.replace("\x00", "")
PREDICTED = "PREDICTED-OK"


def hostile_actions(tag: str) -> dict[str, str]:
    """An action for each domain whose text holds the hostile text after ``tag``."""
    return {
        "terminal": f"ls {tag}{HOSTILE}",
        "web": f"fill('a15', '{tag}{NO_NUL}')",
        "android": json.dumps({"action": "type", "text": tag + HOSTILE}),
        "search": json.dumps({"name": "web_search", "arguments": {"query": tag + HOSTILE}}),
        "swe": json.dumps({"name": "execute_bash", "arguments": {"command": tag + HOSTILE}}),
        "os": f"print(1)  # {tag}{NO_NUL}",
    }


def hostile_workspace(path: Path) -> None:
    """A shared session file with a tab of every domain, each with one turn, and hostile
    text in every field a tab shows: its scenario, the MCP tab's tool names, descriptions
    and parameters, the Search tab's target query, the turn's action and output."""
    sessions = []
    for name in DOMAINS:
        domain = DOMAINS[name]
        base = first_scenario(name)
        extras = dict(base.extras)
        if name == "mcp":
            parameter = "p1" + HOSTILE
            extras["tools"] = [
                {
                    "name": "t1" + HOSTILE,
                    "description": "d1" + HOSTILE,
                    "inputSchema": {
                        "type": "object",
                        "properties": {parameter: {"type": "string"}},
                        "required": [parameter],
                    },
                }
            ]
        if name == "search":
            extras["target_query"] = "q1" + HOSTILE
        scenario = replace(
            base, title=f"{name}-T1{HOSTILE}", description="D1" + HOSTILE, extras=extras
        )
        session, _ = new_session(domain, scenario)
        if name == "mcp":
            call = {"name": "t1" + HOSTILE, "arguments": {"p1" + HOSTILE: "v1" + HOSTILE}}
            action = domain.parse_action(json.dumps(call), scenario)
        else:
            action = domain.parse_action(hostile_actions("k1")[name], scenario)
        turn = session.begin_turn(action)
        session.finish_turn(
            turn, observation="O1" + HOSTILE, reasoning="R1" + HOSTILE, status="complete"
        )
        sessions.append(session)
    Workspace(sessions, name="N1" + HOSTILE).save(path)


def tab_order() -> list[tuple[int, str]]:
    """Every tab's number and domain, the first (shown at start) last: a key for the tab
    on show draws nothing new."""
    tabs = list(enumerate(DOMAINS, 1))
    return [*tabs[1:], tabs[0]]


def assert_shown_clean(written: bytes, *shown: str) -> None:
    """No byte of the hostile text that a terminal acts on was written; where its text was
    shown, it was sanitized whole (a JSON label may show it escaped, as ``\\u001b``); and
    each of ``shown`` was on the screen, so the text did reach it."""
    for what, sequence in FORBIDDEN.items():
        assert sequence not in written, what
    assert b"\x1b[31mred" not in written and b"\x1b[2J\x1b[31m" not in written
    for before in re.findall(rb"(.{5})\]0;pwned", written, re.DOTALL):
        assert before == b"u001b", f"a title sequence's text shown unsanitized: {before!r}"
    for text in shown:
        assert text.encode() in written, text


def test_a_hostile_session_file_reaches_no_tab_raw(
    scripted_model: ScriptedModel, tmp_path: Path
) -> None:
    """Every tab of a shared file shown, and its last turn retried (Ctrl+R draws its
    action again), on a real terminal."""
    shared = tmp_path / "shared.json"
    hostile_workspace(shared)
    model = scripted_model(
        f"x</think><predicted_observation>{PREDICTED}</predicted_observation>",
        n_ctx_train=16384,  # the web page's prompt is longer than 4096 tokens
    )
    with PtyApp(["--session", str(shared), "--model", str(model)]) as app:
        app.wait_for("Opened")
        app.wait_for("ctx 0/")  # the model is loaded
        for number, name in tab_order():
            app.send(b"\x1b%d" % number)
            app.wait_for(f"{name}-T1{CLEAN}", after=app.mark)
            app.send(b"\x12")  # Ctrl+R
            app.wait_for(PREDICTED, after=app.mark)
        assert app.quit() == 0
    shown = [f"k1{CLEAN}", f"t1{CLEAN}", f"q1{CLEAN}", f"O1{CLEAN}"]
    assert_shown_clean(bytes(app.written), *shown)


def agent_call(app: PtyApp, url: str, tool: str, arguments: dict[str, object]) -> None:
    """An agent from the MCP SDK, named with the hostile text, calls ``tool``; the app's
    screen is read meanwhile (a full pty would stop it)."""
    from mcp import Client
    from mcp.types import Implementation

    async def call() -> None:
        info = Implementation(name="c2" + NO_NUL, version="1")
        async with Client(url, client_info=info) as agent:
            await agent.call_tool(tool, arguments)

    thread = threading.Thread(target=asyncio.run, args=(call(),), daemon=True)
    thread.start()
    while thread.is_alive():
        app.read(0.1)
    app.read(0.5)


def test_a_hostile_agent_over_ctrl_b_reaches_no_tab_raw(scripted_model: ScriptedModel) -> None:
    """Each tab served (Ctrl+B, Y) and called by an agent whose name and arguments carry
    the hostile text."""
    model = scripted_model(
        f"x</think><predicted_observation>{PREDICTED}</predicted_observation>",
        n_ctx_train=16384,  # the web page's prompt is longer than 4096 tokens
    )
    actions = hostile_actions("k2")
    calls: dict[str, tuple[str, dict[str, object]]] = {
        "terminal": ("send_keystrokes", {"keystrokes": f"k2{HOSTILE}\n"}),
        "mcp": ("read_text_file", {"path": "k2" + HOSTILE}),
        "web": ("browser_action", {"action": actions["web"]}),
        "android": ("phone_action", {"action": json.loads(actions["android"])}),
        "search": ("web_search", {"query": "k2" + HOSTILE}),
        "swe": ("execute_bash", {"command": "k2" + HOSTILE}),
        "os": ("run_python", {"code": actions["os"]}),
    }
    titles = [first_scenario(name).title for name in DOMAINS]
    with PtyApp(["--model", str(model)]) as app:
        app.wait_for("ctx 0/")  # the model is loaded
        for number, name in tab_order():
            app.send(b"\x1b%d" % number)
            app.wait_for(titles[number - 1][:20], after=app.mark)
            app.send(b"\x02")  # Ctrl+B
            app.wait_for("Serve (Y)", after=app.mark)
            app.send(b"y")
            at = app.wait_for("/mcp", after=app.mark)
            url = re.findall(rb"http://127\.0\.0\.1:\d+/mcp", bytes(app.written[at - 40 : at + 4]))
            app.send(b"\x1b")
            agent_call(app, url[-1].decode(), *calls[name])
        assert app.quit() == 0
    assert_shown_clean(bytes(app.written), f"k2{CLEAN}", f"c2{CLEAN}")


def test_a_twin_s_hostile_answer_reaches_the_terminal_clean(
    scripted_model: ScriptedModel, tmp_path: Path
) -> None:
    """A SWE tab twinned on the command line with a real sandbox whose repository holds a
    file of hostile text and markup: the real shell's answer, raw in the record, is shown
    beside the prediction cleaned, and the markup as the text it is."""
    backend = any_backend()
    repository = tmp_path / "repo"
    repository.mkdir()
    (repository / "evil.txt").write_text(f"e3{HOSTILE} [bold]m3[/bold]")
    model = scripted_model(
        f"x</think><predicted_observation>{PREDICTED}</predicted_observation>",
        n_ctx_train=16384,
    )
    args = ["--model", str(model), "--tab", "swe", "--twin", backend]
    with PtyApp([*args, "--twin-seed", str(repository)], size=(200, 50)) as app:
        app.wait_for("ctx 0/")  # the model is loaded
        app.wait_for("Twinned with")
        app.send(b"\x01")  # Ctrl+A: the arguments editor's text, to be replaced
        app.send(b'{"command": "cat evil.txt"}')
        app.send(b"\x13")  # Ctrl+S
        app.wait_for("delivered: real", after=app.mark)
        app.read(1)
        assert app.quit() == 0
    assert_shown_clean(bytes(app.written), f"e3{CLEAN}", "[bold]m3[/bold]", PREDICTED)


def test_a_session_file_of_another_domain_opens_on_its_tab(tmp_path: Path) -> None:
    """A session `mcp serve` saved (one MCP tab), opened with --session on a real
    terminal and no model yet: the MCP tab is the one drawn last, and it stays."""
    mcp = get_domain("mcp")
    session, _ = new_session(mcp, first_scenario("mcp"))
    served = tmp_path / "served.json"
    Workspace([session], name="served").save(served)
    titles = [first_scenario(name).title.encode() for name in ("terminal", "mcp")]
    with PtyApp(["--session", str(served)]) as app:
        app.wait_for("Opened")
        app.read(2)
        assert app.quit() == 0
    written = bytes(app.written)
    assert written.rfind(titles[1]) > written.rfind(titles[0])
