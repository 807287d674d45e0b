"""The real app under a real pseudo-terminal, fed hostile text every way it comes in: a
shared session file with escape sequences in every field it shows, and a server whose
model ids and error bodies carry them. Not one of them reaches the terminal's bytes."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest
from conftest import ScriptedModel
from faultserver import FaultServer, Reply
from ptyapp import PtyApp
from test_cli_output import HOSTILE

from agentworld_tui.domains import DOMAINS, get_domain
from agentworld_tui.ui.start import first_scenario
from agentworld_tui.world.domain import Scenario
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


def run_app(args: list[str], server: FaultServer, size: tuple[int, int]) -> bytes:
    """Start the app on a pty of ``size``, type a command once it is up, then quit with
    Ctrl+Q; every byte it wrote."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", size[1], size[0], 0, 0))
    env = dict(os.environ, TERM="xterm-256color", COLUMNS=str(size[0]), LINES=str(size[1]))
    process = subprocess.Popen(
        [sys.executable, "-m", "agentworld_tui", *args],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        close_fds=True,
        env=env,
        start_new_session=True,
    )
    os.close(slave)
    written = bytearray()
    sent: list[bytes] = []
    started = time.monotonic()
    try:
        while True:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:
                    break
                if not chunk:
                    break
                written += chunk
            elapsed = time.monotonic() - started
            if not sent and elapsed > 6:
                sent.append(b"\r")  # answers the question about the shared file, if asked
                os.write(master, b"\r")
            elif len(sent) == 1 and elapsed > 9:
                sent.append(b"ls\r")
                os.write(master, b"ls\r")
            elif len(sent) == 2 and (server.chat_requests() or elapsed > 25):
                time.sleep(2)  # the error is drawn
                sent.append(b"\x11")
                os.write(master, b"\x11")  # Ctrl+Q
            if elapsed > 90:
                raise AssertionError("the app did not quit")
    finally:
        os.close(master)
        code = process.wait(timeout=60)
    assert code == 0, bytes(written[-2000:])
    return bytes(written)


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
