"""SWE: a coding agent works in a repository with a shell and a file editor.

The two tools are the usual pair of software-engineering agents: ``execute_bash`` runs a
command, ``str_replace_editor`` views, creates and edits files; calls under the other names
agents give them (``bash``, ``str_replace_based_edit_tool``...) and bare shell commands are
read too. A scenario may replace them with its own tool list. Every answer must agree with the edits made earlier, so the session
history matters more here than anywhere.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

from agentworld_tui.domains.json_schema import looks_like_json
from agentworld_tui.domains.tool_call import (
    Tool,
    ToolCallDomain,
    call_body,
    check_call,
    tool_call_action,
)
from agentworld_tui.world.action import Action, ActionError
from agentworld_tui.world.domain import Scenario

EDITOR = "str_replace_editor"
SHELL = "execute_bash"

SWE_TOOLS: tuple[Tool, ...] = (
    Tool(
        SHELL,
        "Run a bash command in the repository's container and return its output. "
        "The working directory and environment persist between calls.",
        {
            "type": "object",
            "properties": {
                "command": {"type": "string", "minLength": 1, "description": "The command."},
                "timeout": {"type": "number", "minimum": 0, "description": "Seconds (optional)."},
                "is_input": {
                    "type": ["boolean", "string"],
                    "enum": [True, False, "true", "false"],
                    "description": "true sends command as input to the process still running.",
                },
                "restart": {
                    "type": "boolean",
                    "description": "true restarts the shell (no command needed).",
                },
            },
            "anyOf": [{"required": ["command"]}, {"required": ["restart"]}],
            "additionalProperties": False,
        },
    ),
    Tool(
        EDITOR,
        "View, create and edit files. view shows a file with line numbers (or a directory "
        "two levels deep); create writes a new file; str_replace replaces one exact, unique "
        "occurrence of old_str; insert adds new_str after line insert_line; undo_edit "
        "reverts the last edit of a file.",
        {
            "type": "object",
            "properties": {
                "command": {
                    "type": "string",
                    "enum": ["view", "create", "str_replace", "insert", "undo_edit"],
                },
                "path": {"type": "string", "minLength": 1, "description": "Absolute path."},
                "file_text": {"type": "string"},
                "old_str": {"type": "string"},
                "new_str": {"type": "string"},
                "insert_line": {"type": "integer", "minimum": 0},
                "view_range": {
                    "type": "array",
                    "items": {"type": "integer"},
                    "minItems": 2,
                    "maxItems": 2,
                    "description": "[first, last] line; last -1 means to the end.",
                },
            },
            "required": ["command", "path"],
            "additionalProperties": False,
        },
    ),
)

TOOL_ALIASES = {
    "bash": SHELL,
    "execute_bash": SHELL,
    "shell": SHELL,
    "run_shell_command": SHELL,
    "str_replace_editor": EDITOR,
    "str_replace_based_edit_tool": EDITOR,
    "text_editor": EDITOR,
}
"""The names SWE agents give the two tools (SWE-agent and Anthropic's bash, OpenHands'
execute_bash, the editor's names in each); the turn keeps the name the agent sent."""

_EDITOR_NEEDS = {
    "create": ("file_text",),
    "str_replace": ("old_str",),
    "insert": ("insert_line", "new_str"),
}

# Extensions whose Pygments lexer name differs from what a reader would guess, plus the
# common ones, so choosing a lexer needs no Pygments lookup.
_LEXERS = {
    ".py": "python",
    ".pyi": "python",
    ".js": "javascript",
    ".mjs": "javascript",
    ".jsx": "jsx",
    ".ts": "typescript",
    ".tsx": "tsx",
    ".go": "go",
    ".rs": "rust",
    ".java": "java",
    ".kt": "kotlin",
    ".c": "c",
    ".h": "c",
    ".cc": "cpp",
    ".cpp": "cpp",
    ".hpp": "cpp",
    ".rb": "ruby",
    ".php": "php",
    ".sh": "bash",
    ".bash": "bash",
    ".json": "json",
    ".toml": "toml",
    ".yaml": "yaml",
    ".yml": "yaml",
    ".ini": "ini",
    ".cfg": "ini",
    ".md": "markdown",
    ".rst": "rst",
    ".html": "html",
    ".css": "css",
    ".sql": "sql",
    ".xml": "xml",
    ".diff": "diff",
    ".patch": "diff",
}
_NAMED = {"Makefile": "make", "Dockerfile": "docker", "CMakeLists.txt": "cmake"}


def file_lexer(path: str) -> str:
    """The Pygments lexer name for a file, "text" when unknown."""
    pure = PurePosixPath(path)
    return _NAMED.get(pure.name) or _LEXERS.get(pure.suffix.lower(), "text")


def _is_argv(value: object) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, str) for v in value)


def _titled(title: str, value: object) -> str:
    text = str(value or "").strip()
    return f"{title}:\n{text}" if text else ""


class SweDomain(ToolCallDomain):
    name = "swe"
    title = "SWE"
    lexer = "text"
    replaces_state = False
    pane = "agentworld_tui.ui.panes.swe:SwePane"
    usual_tools = SWE_TOOLS

    def call_action(self, call: dict[str, Any], scenario: Scenario) -> Action:
        """The usual two tools also answer to the names other agents give them, take a
        command as an argv list, and need what each editor command edits, by absolute path."""
        if self.own_tools(scenario) is not None:
            return super().call_action(call, scenario)
        canonical = TOOL_ALIASES.get(call["name"], call["name"])
        args = call["arguments"]
        if canonical == SHELL and _is_argv(args.get("command")):
            args = {**args, "command": " ".join(args["command"])}
        check_call({"name": canonical, "arguments": args}, list(SWE_TOOLS))
        if canonical == EDITOR:
            for needed in _EDITOR_NEEDS.get(str(args.get("command")), ()):
                if needed not in args:
                    raise ActionError(
                        f"{call['name']} {args['command']} needs {needed}",
                        field=f"arguments.{needed}",
                    )
            path = args.get("path")
            if isinstance(path, str) and not path.startswith("/"):
                raise ActionError(
                    f"path must be absolute (e.g. /testbed/{path.lstrip('./')})",
                    field="arguments.path",
                )
        return tool_call_action(self.name, call)

    def parse_action(self, text: str, scenario: Scenario) -> Action:
        """A JSON tool call, or (with the usual two tools) a shell command as typed, bare or
        in a fence, which becomes an execute_bash call."""
        body = call_body(text)
        if body and not looks_like_json(body) and self.own_tools(scenario) is None:
            return self.make_action({"name": SHELL, "arguments": {"command": body}}, scenario)
        return super().parse_action(text, scenario)

    def prompt_values(self, scenario: Scenario) -> dict[str, str]:
        return {
            **super().prompt_values(scenario),
            "task": _titled("The task the agent works on", scenario.extras.get("task")),
        }

    def observation_lexer(self, action: Action, observation: str) -> str:
        """A viewed file by its type; shell output and directory listings as text."""
        payload = action.payload if isinstance(action.payload, dict) else {}
        args = payload.get("arguments")
        if (
            TOOL_ALIASES.get(str(payload.get("name"))) == EDITOR
            and isinstance(args, dict)
            and args.get("command") == "view"
        ):
            return file_lexer(str(args.get("path", "")))
        return "text"
