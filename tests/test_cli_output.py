"""What the command line writes is sanitized in one place: every byte that reaches stdout,
stderr or agentworld.log is checked, with the real ``agentworld`` command (in a pipe and
under a pseudo-terminal) against a hostile OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import io
import json
import logging
import os
import pty
import select
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest
from faultserver import FaultServer, Reply

from agentworld_tui.world.sanitize import (
    SanitizingFormatter,
    SanitizingWriter,
    safe_json,
    sanitize_output,
)

BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
HOSTILE = (
    "\x1b]0;pwned title\x07\x1b]52;c;ZWNobyBvd25lZA==\x07\x1b[2J\x1b[31mred"
    "\x9b1;31m\x9d0;c1 title\x9c\u202eevil\u2066\x7fdel\x00nul\x08\x0bend"
)


def harmful(text: str, allowed: str = "\n\t") -> list[str]:
    """The characters in ``text`` that a terminal would act on, or that change the reading
    order (every C0 and C1 control but ``allowed``, DEL, bidi marks, line separators)."""
    return sorted(
        {
            ch
            for ch in text
            if ch not in allowed
            and (unicodedata.category(ch) == "Cc" or ch in BIDI or ch in "\u2028\u2029")
        }
    )


def agentworld(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "agentworld_tui", *args],
        capture_output=True,
        timeout=120,
        check=False,
    )


def clean_bytes(data: bytes, allowed: str = "\n\t") -> str:
    text = data.decode("utf-8")  # the bytes are UTF-8, C1 controls encoded included
    assert harmful(text, allowed) == [], text
    assert "\x1b" not in text and "\x9b" not in text and "\x9d" not in text
    return text


OBSERVATION = "<predicted_observation>\nfine\n</predicted_observation>"


@pytest.mark.parametrize(
    ("reply", "shown"),
    [
        (Reply(status=500, error_message=HOSTILE), "500"),
        (Reply(status=400, error_message=HOSTILE), "400"),
        (Reply(status=401, error_message=HOSTILE), "401"),
        (Reply(content=["x"], error_event_after=1, error_message=HOSTILE), "evil"),
    ],
)
def test_a_server_s_error_text_reaches_stderr_and_the_log_clean(
    reply: Reply, shown: str, isolated_dirs: dict[str, Path]
) -> None:
    with FaultServer(default=reply) as server:
        done = agentworld("predict", "--server", server.url, "--log-level", "DEBUG", "ls")
    assert done.returncode != 0
    err = clean_bytes(done.stderr)
    assert err.startswith("agentworld: ") and shown in err
    assert "Traceback" not in err
    clean_bytes((isolated_dirs["data"] / "agentworld.log").read_bytes())


def test_model_ids_from_the_server_reach_stderr_clean(isolated_dirs: dict[str, Path]) -> None:
    hostile = HOSTILE.replace("\x00", "")  # a command line cannot hold a NUL
    models = [{"id": f"model-{hostile}"}, {"id": f"other-{HOSTILE}"}]
    with FaultServer(models=models, default=Reply(content=[OBSERVATION])) as server:
        done = agentworld("predict", "--server", server.url, "--log-level", "DEBUG", "ls")
        picked = agentworld(
            *("predict", "--server", server.url, "--server-model", f"model-{hostile}"),
            *("--log-level", "DEBUG", "ls"),
        )
    assert done.returncode != 0
    err = clean_bytes(done.stderr)
    assert "model-" in err and "other-" in err  # both ids are listed, cleaned
    assert picked.returncode == 0, picked.stderr
    assert clean_bytes(picked.stdout) == "fine\n"
    clean_bytes((isolated_dirs["data"] / "agentworld.log").read_bytes())


def test_json_output_escapes_what_a_terminal_acts_on_and_loses_nothing() -> None:
    text = f"caf\u00e9 \u4e16\u754c {HOSTILE} \U0001f600 \u2028line"
    reply = Reply(
        reasoning=[f"think {HOSTILE}"],
        content=[f"<predicted_observation>\n{text}\n</predicted_observation>"],
    )
    with FaultServer(default=reply) as server:
        done = agentworld("predict", "--server", server.url, "--json", "ls")
    assert done.returncode == 0, done.stderr
    out = clean_bytes(done.stdout)
    assert "café 世界" in out and "😀" in out  # readable text stays as it is
    assert "\\u009b" in out and "\\u202e" in out and "\\u007f" in out
    data = json.loads(out)
    assert data["observation"] == text  # lossless: every character comes back
    assert data["reasoning"] == f"think {HOSTILE}"


def run_in_pty(*args: str) -> tuple[int, bytes]:
    """Run ``agentworld`` with a pseudo-terminal as its stdin, stdout and stderr, as a
    user's terminal would be; returns the exit code and every byte it wrote."""
    master, slave = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "agentworld_tui", *args],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        close_fds=True,
    )
    os.close(slave)
    written = bytearray()
    try:
        while True:
            ready, _, _ = select.select([master], [], [], 120)
            if not ready:
                raise AssertionError(f"no output for 120 s; so far: {bytes(written)!r}")
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the other end is closed
                break
            if not chunk:
                break
            written += chunk
    finally:
        os.close(master)
        code = process.wait(timeout=60)
    return code, bytes(written)


def test_a_hostile_server_under_a_real_terminal(isolated_dirs: dict[str, Path]) -> None:
    reply = Reply(
        reasoning=[HOSTILE[:20], HOSTILE[20:]],
        content=[f"<predicted_observation>\n{HOSTILE}\n", "</predicted_observation>"],
    )
    models = [{"id": f"world-{HOSTILE}"}]
    with FaultServer(models=models, default=reply) as server:
        code, written = run_in_pty("predict", "--server", server.url, "--reasoning", "ls")
        assert code == 0, written
        text = clean_bytes(written, allowed="\n\t\r")  # the terminal writes \r\n itself
        assert "evil" in text and "end" in text
        server.default = Reply(status=500, error_message=HOSTILE)
        code, written = run_in_pty("predict", "--server", server.url, "ls")
    assert code != 0
    assert "evil" in clean_bytes(written, allowed="\n\t\r")


def test_a_hostile_models_toml_is_listed_clean(isolated_dirs: dict[str, Path]) -> None:
    config = isolated_dirs["config"]
    config.mkdir(parents=True)
    name = HOSTILE.replace("\x00", "").replace('"', "")
    escaped = json.dumps(name)  # a TOML basic string takes JSON's escapes
    (config / "models.toml").write_text(
        f'[[model]]\nname = {escaped}\nrepo = "a/b"\nquant = "Q4_K_M"\nsize_gb = 1\n'
        f"description = {escaped}\n",
        encoding="utf-8",
    )
    for args in (("models", "list"), ("models", "path", name), ("models", "list", "--json")):
        done = agentworld(*args)
        clean_bytes(done.stdout)
        clean_bytes(done.stderr)


def test_a_bad_argument_is_echoed_clean() -> None:
    done = agentworld("predict", "--domain", HOSTILE.replace("\x00", ""), "ls")
    assert done.returncode == 2
    assert "evil" in clean_bytes(done.stderr)


# -- the pieces -----------------------------------------------------------------------------


def test_sanitize_output_keeps_a_leading_carriage_return_only() -> None:
    assert sanitize_output("\r[###...] 30%") == "\r[###...] 30%"
    assert sanitize_output("\r\x1b]0;x\x07[##] 40%") == "\r[##] 40%"
    assert sanitize_output("a\rb\r\nc") == "a\nb\nc"
    assert sanitize_output("\r\nnext") == "\nnext"
    assert harmful(sanitize_output(HOSTILE)) == []


def test_the_writer_cleans_every_write_and_leaves_the_buffer_alone() -> None:
    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding="utf-8", write_through=True)
    writer = SanitizingWriter(stream)
    print(HOSTILE, file=writer)  # type: ignore[arg-type]
    writer.writelines(["\x1b", "]0;split across writes\x07", "\n"])
    writer.buffer.write(b"\x1b[binary stays]")  # a binary protocol is not touched
    writer.flush()
    written = raw.getvalue()
    before, _, binary = written.partition(b"\x1b")
    assert binary == b"[binary stays]"
    assert harmful(before.decode()) == []
    assert writer.encoding == "utf-8" and writer.isatty() is False


def test_the_log_formatter_cleans_the_message_and_keeps_tracebacks() -> None:
    formatter = SanitizingFormatter("%(levelname)s %(message)s")
    try:
        raise ValueError(HOSTILE)
    except ValueError:
        record = logging.LogRecord(
            "agentworld.test", logging.ERROR, __file__, 1, "got %s", (HOSTILE,), sys.exc_info()
        )
    text = formatter.format(record)
    assert harmful(text) == []
    assert text.startswith("ERROR got ") and "Traceback (most recent call last):\n" in text


def test_safe_json_is_valid_lossless_and_printable() -> None:
    value = {"text": HOSTILE + "\u2029\ud800", "n": [1, 2.5, None, True]}
    text = safe_json(value)
    assert harmful(text) == []
    assert "\\ud800" in text and text.encode("utf-8")  # a lone surrogate is escaped too
    assert json.loads(text) == value
    assert safe_json("caf\u00e9") == '"caf\u00e9"'
