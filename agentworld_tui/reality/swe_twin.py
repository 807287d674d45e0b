"""The SWE domain's twin: a copy of a repository in a sandbox, its two tools run for real.

``execute_bash`` goes to one bash that lives as long as the twin (its working folder,
variables and background processes persist, as the domain promises); each command is
handed over in a quoted here-document, so no text of it can break the framing, and runs
with stdin from /dev/null. A command past its time limit is stopped with everything the
shell started, and a fresh shell takes over (the observation says so).

``str_replace_editor`` is carried out through commands inside the sandbox (cat, find, a
write through cat), so every path is resolved as the sandbox sees it and nothing outside
it is ever touched; the text edits themselves are done here. Its messages are this
project's own wording, which an agent harness's editor does not share word for word.
"""

from __future__ import annotations

import contextlib
import queue
import re
import secrets
import subprocess
import threading
import time
from dataclasses import replace
from typing import Any

from agentworld_tui.domains.swe import EDITOR, SHELL, TOOL_ALIASES
from agentworld_tui.reality.observation import CheckResult, RealObservation, TwinStatus, failed
from agentworld_tui.reality.sandbox import BoundedOutput, Sandbox, SandboxError, SandboxOptions
from agentworld_tui.reality.terminal_twin import run_check
from agentworld_tui.reality.twin import CHECK_SECONDS
from agentworld_tui.world.action import Action

COMMAND_SECONDS = 120.0
"""A shell command's time limit when the call gives none."""
MAX_COMMAND_SECONDS = 600.0
MAX_OUTPUT = 200_000
"""Bytes of a command's output kept (its start and its end)."""
MAX_FILE = 2_000_000
"""The largest file the editor views or edits."""
SNIPPET_CONTEXT = 4
FILE_SECONDS = 30.0

_VIEW = """\
if [ -d "$1" ]; then
  echo D
  find "$1" -maxdepth 2 -not -path '*/.*' | sort
elif [ -f "$1" ]; then
  echo F
  exec cat -- "$1"
else
  echo N
fi
"""
_WRITE = 'mkdir -p -- "$(dirname -- "$1")" && cat > "$1"'
_CREATE = 'if [ -e "$1" ]; then echo E; exit 0; fi; mkdir -p -- "$(dirname -- "$1")" && cat > "$1" && echo W'


class SweTwin:
    """A repository in a sandbox, with a persistent shell and a file editor."""

    domain = "swe"

    def __init__(self, options: SandboxOptions, *, max_output: int = MAX_OUTPUT) -> None:
        self.options = options
        self.max_output = max_output
        self.sandbox: Sandbox | None = None
        self._shell: subprocess.Popen[bytes] | None = None
        self._chunks: queue.Queue[bytes | None] = queue.Queue()
        self._group = 0
        self._dead = ""
        self._history: dict[str, list[str]] = {}

    # -- the protocol --------------------------------------------------------------------

    def start(self) -> RealObservation:
        began = time.monotonic()
        try:
            self.sandbox = Sandbox.open(self.options)
        except (SandboxError, OSError) as exc:
            self._dead = f"the twin did not start: {exc}"
            return failed(TwinStatus.CRASHED, self._dead, elapsed=time.monotonic() - began)
        problem = self._start_shell()
        if problem:
            self._dead = f"the twin did not start: {problem}"
            self.sandbox.close()
            return failed(TwinStatus.CRASHED, self._dead, elapsed=time.monotonic() - began)
        return RealObservation("", elapsed=time.monotonic() - began)

    def time_limit(self, action: Action) -> float:
        args = _arguments(action)
        return _timeout(args.get("timeout")) + 2 * FILE_SECONDS

    def act(self, action: Action) -> RealObservation:
        began = time.monotonic()
        if self._dead or self.sandbox is None:
            return failed(TwinStatus.CRASHED, self._dead or "the twin was not started")
        payload = action.payload if isinstance(action.payload, dict) else {}
        name = str(payload.get("name", ""))
        args = _arguments(action)
        tool = TOOL_ALIASES.get(name)
        if tool == SHELL:
            seen = self._bash(args)
        elif tool == EDITOR:
            seen = self._edit(args)
        else:
            seen = failed(
                TwinStatus.ERROR,
                f"the SWE twin has no real tool {name!r}: it runs {SHELL} and {EDITOR} "
                "(and the other names agents give them)",
            )
        return _timed(seen, began)

    def check(self, command: str, timeout: float = CHECK_SECONDS) -> CheckResult:
        return run_check(self.sandbox, self._dead, command, timeout)

    def kill(self) -> None:
        self._dead = self._dead or "the twin was stopped"
        if self.sandbox is not None:
            self.sandbox.close()

    def close(self) -> None:
        self._dead = self._dead or "the twin was closed"
        if self._shell is not None and self._shell.stdin is not None:
            with contextlib.suppress(OSError, ValueError):
                self._shell.stdin.close()
        if self.sandbox is not None:
            self.sandbox.close()

    # -- the shell -----------------------------------------------------------------------

    def _start_shell(self) -> str:
        """Start a bash of its own session; "" when it runs, else why not."""
        assert self.sandbox is not None
        self._chunks = queue.Queue()
        try:
            shell = self.sandbox.popen(
                ["setsid", "bash", "--noprofile", "--norc"], stdin=subprocess.PIPE
            )
        except (OSError, SandboxError) as exc:
            return f"cannot start bash: {exc}"
        self._shell = shell
        threading.Thread(target=_pump, args=(shell, self._chunks), daemon=True).start()
        hello = self._run_in_shell('echo "$$"', FILE_SECONDS)
        if hello.status is not TwinStatus.OK or not hello.text.strip().isdigit():
            return f"bash did not answer: {hello.error or hello.text[:200]}"
        self._group = int(hello.text.strip())
        return ""

    def _bash(self, args: dict[str, Any]) -> RealObservation:
        if args.get("restart") is True:
            self._stop_shell()
            problem = self._start_shell()
            if problem:
                self._dead = problem
                return failed(TwinStatus.CRASHED, problem)
            return RealObservation("The shell was restarted.")
        if args.get("is_input") in (True, "true"):
            return failed(
                TwinStatus.ERROR,
                "the twin sends no input to a running command (is_input): every command "
                "runs to its end or its time limit",
            )
        command = args.get("command")
        if isinstance(command, list):
            command = " ".join(str(c) for c in command)
        if not isinstance(command, str) or not command.strip():
            return failed(TwinStatus.ERROR, "execute_bash needs a command")
        return self._run_in_shell(command, _timeout(args.get("timeout")))

    def _run_in_shell(self, command: str, timeout: float) -> RealObservation:
        shell = self._shell
        if shell is None or shell.stdin is None:
            return failed(TwinStatus.CRASHED, "the shell is not running")
        nonce = secrets.token_hex(8)
        end = f"AWT_END_{nonce}"
        marker = f"__AWT_DONE_{nonce}__"
        script = (
            f"eval \"$(cat <<'{end}'\n{command}\n{end}\n)\" < /dev/null 2>&1\n"
            f"printf '\\n{marker}%s\\n' \"$?\"\n"
        )
        try:
            shell.stdin.write(script.encode("utf-8", "surrogateescape"))
            shell.stdin.flush()
        except (OSError, ValueError):
            return self._shell_ended(BoundedOutput(self.max_output))
        found = re.compile(rb"\n" + re.escape(marker.encode()) + rb"(\d+)\n")
        output = BoundedOutput(self.max_output)
        tail = b""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return self._timed_out(output, timeout)
            try:
                chunk = self._chunks.get(timeout=min(left, 0.5))
            except queue.Empty:
                continue
            if chunk is None:
                return self._shell_ended(output)
            output.add(chunk)
            tail = (tail + chunk)[-(len(marker) + 64) :]
            match = found.search(tail)
            if match:
                text = output.text()
                cut = text.rfind("\n" + marker)
                return RealObservation(
                    text[:cut] if cut >= 0 else text, exit_code=int(match.group(1))
                )

    def _timed_out(self, output: BoundedOutput, timeout: float) -> RealObservation:
        self._stop_shell()
        problem = self._start_shell()
        note = "a fresh shell took over (variables and working folder reset)"
        if problem:
            self._dead = f"the shell could not be restarted: {problem}"
            note = self._dead
        return RealObservation(
            output.text(),
            status=TwinStatus.TIMEOUT,
            error=f"the command did not finish within {timeout:g} seconds and was stopped; {note}",
        )

    def _shell_ended(self, output: BoundedOutput) -> RealObservation:
        self._stop_shell()
        problem = (
            self._start_shell()
            if self.sandbox is not None and self.sandbox.alive()
            else "the sandbox ended"
        )
        if problem:
            self._dead = f"the shell ended and could not be restarted: {problem}"
            return failed(TwinStatus.CRASHED, self._dead, text=output.text())
        return failed(
            TwinStatus.ERROR, "the shell ended; a fresh one took over", text=output.text()
        )

    def _stop_shell(self) -> None:
        if self.sandbox is not None and self._group:
            self.sandbox.run(["bash", "-c", f"kill -KILL -- -{self._group}"], timeout=FILE_SECONDS)
        if self._shell is not None:
            with contextlib.suppress(OSError):
                self._shell.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._shell.wait(5)
        self._shell = None
        self._group = 0

    # -- the editor ----------------------------------------------------------------------

    def _edit(self, args: dict[str, Any]) -> RealObservation:
        command = args.get("command")
        path = args.get("path")
        if not isinstance(path, str) or not path.startswith("/"):
            return _tool_error(f"path must be an absolute path, not {path!r}")
        if command == "view":
            return self._view(path, args.get("view_range"))
        if command == "create":
            return self._create(path, str(args.get("file_text", "")))
        if command in ("str_replace", "insert", "undo_edit"):
            return self._change(str(command), path, args)
        return _tool_error(f"unknown editor command {command!r}")

    def _view(self, path: str, view_range: object) -> RealObservation:
        kind, body = self._read(path)
        if kind == "D":
            return RealObservation(
                f"Files and folders in {path}, two levels deep, hidden ones left out:\n{body}"
            )
        if kind != "F":
            return _tool_error(body or f"{path} does not exist")
        lines = body.split("\n")
        if body.endswith("\n"):
            lines.pop()
        first, last = 1, len(lines)
        if isinstance(view_range, list) and len(view_range) == 2:
            first, last = int(view_range[0]), int(view_range[1])
            if last == -1:
                last = len(lines)
            if not 1 <= first <= max(1, len(lines)) or last < first or last > len(lines):
                return _tool_error(
                    f"view_range {view_range} is outside the file's lines 1 to {len(lines)}"
                )
        return RealObservation(_numbered(lines[first - 1 : last], first))

    def _create(self, path: str, text: str) -> RealObservation:
        assert self.sandbox is not None
        done = self.sandbox.run(
            ["sh", "-c", _CREATE, "sh", path], timeout=FILE_SECONDS, input=text.encode("utf-8")
        )
        if done.output.strip() == "E":
            return _tool_error(f"{path} already exists; create writes new files only")
        if done.exit_code != 0 or not done.output.strip().endswith("W"):
            return _tool_error(f"cannot create {path}: {_last_line(done.output)}")
        self._history.setdefault(path, []).append("")
        return RealObservation(f"Created {path}.")

    def _change(self, command: str, path: str, args: dict[str, Any]) -> RealObservation:
        kind, old = self._read(path)
        if kind != "F":
            return _tool_error(old or f"{path} is not a file")
        if "\ufffd" in old:
            return _tool_error(f"{path} is not UTF-8 text; the editor edits text files only")
        if command == "undo_edit":
            history = self._history.get(path)
            if not history:
                return _tool_error(f"no edit of {path} to undo")
            problem = self._write(path, history[-1])
            if problem:
                return _tool_error(problem)
            history.pop()
            return RealObservation(f"Undid the last edit of {path}.")
        if command == "str_replace":
            old_str = str(args.get("old_str", ""))
            new_str = str(args.get("new_str", ""))
            count = old.count(old_str) if old_str else 0
            if count == 0:
                return _tool_error(f"old_str was not found in {path}; nothing was replaced")
            if count > 1:
                where = [
                    old[: m.start()].count("\n") + 1 for m in re.finditer(re.escape(old_str), old)
                ]
                return _tool_error(
                    f"old_str appears {count} times in {path} (lines {', '.join(map(str, where))}); "
                    "it must appear once"
                )
            at = old.index(old_str)
            new = old[:at] + new_str + old[at + len(old_str) :]
            first = old[:at].count("\n") + 1
            changed = new_str.count("\n") + 1
        else:
            line = args.get("insert_line")
            rows = old.splitlines(keepends=True)
            if not isinstance(line, int) or isinstance(line, bool) or not 0 <= line <= len(rows):
                return _tool_error(
                    f"insert_line must be between 0 and {len(rows)}, the file's lines"
                )
            if line == len(rows) and rows and not rows[-1].endswith("\n"):
                rows[-1] += "\n"
            new_str = str(args.get("new_str", ""))
            block = new_str if new_str.endswith("\n") else new_str + "\n"
            new = "".join(rows[:line]) + block + "".join(rows[line:])
            first = line + 1
            changed = block.count("\n")
        problem = self._write(path, new)
        if problem:
            return _tool_error(problem)
        self._history.setdefault(path, []).append(old)
        lines = new.split("\n")
        if new.endswith("\n"):
            lines.pop()
        start = max(1, first - SNIPPET_CONTEXT)
        stop = min(len(lines), first + changed - 1 + SNIPPET_CONTEXT)
        return RealObservation(
            f"Edited {path}. Lines {start} to {stop} now read:\n"
            + _numbered(lines[start - 1 : stop], start)
        )

    def _read(self, path: str) -> tuple[str, str]:
        """("F", text), ("D", listing), or ("", why not)."""
        assert self.sandbox is not None
        done = self.sandbox.run(
            ["sh", "-c", _VIEW, "sh", path], timeout=FILE_SECONDS, max_output=MAX_FILE + 16
        )
        if done.timed_out:
            return "", f"reading {path} did not finish within {FILE_SECONDS:g} seconds"
        kind, _, body = done.output.partition("\n")
        if kind == "N":
            return "", f"{path} does not exist"
        if kind not in ("F", "D") or done.exit_code != 0:
            return "", f"cannot read {path}: {_last_line(done.output)}"
        if done.truncated:
            return "", f"{path} is larger than {MAX_FILE:,} bytes; view it with a shell command"
        return kind, body

    def _write(self, path: str, text: str) -> str:
        assert self.sandbox is not None
        done = self.sandbox.run(
            ["sh", "-c", _WRITE, "sh", path], timeout=FILE_SECONDS, input=text.encode("utf-8")
        )
        return "" if done.exit_code == 0 else f"cannot write {path}: {_last_line(done.output)}"


def _pump(shell: subprocess.Popen[bytes], into: queue.Queue[bytes | None]) -> None:
    assert shell.stdout is not None
    with contextlib.suppress(OSError, ValueError):
        while chunk := shell.stdout.read1(65536):  # type: ignore[attr-defined]
            into.put(chunk)
    into.put(None)


def _arguments(action: Action) -> dict[str, Any]:
    payload = action.payload if isinstance(action.payload, dict) else {}
    args = payload.get("arguments")
    return args if isinstance(args, dict) else {}


def _timeout(value: object) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return min(float(value), MAX_COMMAND_SECONDS)
    return COMMAND_SECONDS


def _numbered(lines: list[str], first: int) -> str:
    return "\n".join(f"{n:6}\t{line}" for n, line in enumerate(lines, first))


def _tool_error(message: str) -> RealObservation:
    return RealObservation(message, tool_error=True)


def _timed(seen: RealObservation, began: float) -> RealObservation:
    return replace(seen, elapsed=time.monotonic() - began)


def _last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return " ".join(lines[-1].split())[:300] if lines else "no output"
