"""Web: a browser agent acts on a page shown as an accessibility tree with element ids.

Actions are the 21 browser calls of the BrowserGym action space, written as the agent
writes them (``click("a42")``, ``fill("b12", "hello")``) or in JSON
(``{"name": "fill", "arguments": {"bid": "b12", "value": "hello"}}``). The call syntax is
read with ``ast`` and only literal arguments are accepted: nothing is ever evaluated. The
turn carries the JSON form, like the other domains' UI actions.
"""

from __future__ import annotations

import ast
import difflib
import json
import re
from dataclasses import dataclass, field
from typing import Any

from agentworld_tui.domains.base import DomainBase, json_value
from agentworld_tui.domains.json_schema import (
    MAX_DEPTH,
    MAX_NUMBER_CHARS,
    read_json,
    value_problem,
)
from agentworld_tui.domains.turn import turn_markdown, unfenced
from agentworld_tui.world.action import Action, ActionError
from agentworld_tui.world.domain import Scenario
from agentworld_tui.world.tool import Tool

BUTTONS = ("left", "middle", "right")
MODIFIERS = ("Alt", "Control", "ControlOrMeta", "Meta", "Shift")
MAX_ACTION_CHARS = 20_000


@dataclass(frozen=True)
class Param:
    """One parameter of a browser action; ``kind`` names how its value is checked."""

    name: str
    kind: str
    """bid, text, nonempty, number, integer, boolean, button, modifiers, options"""
    required: bool = True
    default: Any = None


def _xy() -> tuple[Param, ...]:
    return (Param("x", "number"), Param("y", "number"))


def _button() -> Param:
    return Param("button", "button", False, "left")


ACTIONS: dict[str, tuple[Param, ...]] = {
    "noop": (Param("wait_ms", "number", False, 1000),),
    "scroll": (Param("delta_x", "number"), Param("delta_y", "number")),
    "keyboard_press": (Param("key", "nonempty"),),
    "keyboard_type": (Param("text", "nonempty"),),
    "mouse_move": _xy(),
    "mouse_click": (*_xy(), _button()),
    "mouse_dblclick": (*_xy(), _button()),
    "mouse_down": (*_xy(), _button()),
    "mouse_up": (*_xy(), _button()),
    "fill": (
        Param("bid", "bid"),
        Param("value", "text"),
        Param("enable_autocomplete_menu", "boolean", False, False),
    ),
    "click": (Param("bid", "bid"), _button(), Param("modifiers", "modifiers", False, [])),
    "hover": (Param("bid", "bid"),),
    "tab_focus": (Param("index", "integer"),),
    "new_tab": (),
    "go_back": (),
    "go_forward": (),
    "goto": (Param("url", "nonempty"),),
    "tab_close": (),
    "select_option": (Param("bid", "bid"), Param("options", "options")),
    "send_msg_to_user": (Param("text", "nonempty"),),
    "report_infeasible": (Param("reason", "nonempty"),),
}
"""The browser actions and their parameters, in the order a call writes them."""


def signature(name: str) -> str:
    """``fill(bid, value)``; optional parameters shown with their defaults."""
    parts = []
    for p in ACTIONS[name]:
        parts.append(p.name if p.required else f"{p.name}={json.dumps(p.default)}")
    return f"{name}({', '.join(parts)})"


def _check_value(action: str, param: Param, value: Any) -> Any:
    where = f"{action}: {param.name}"
    kind = param.kind
    problem = value_problem(value, MAX_DEPTH - 2)
    if problem:
        raise ActionError(f"{where}: {problem}", field=param.name)
    if kind == "boolean":
        if not isinstance(value, bool):
            raise ActionError(f"{where} must be True or False", field=param.name)
        return value
    if kind in ("number", "integer"):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ActionError(f"{where} must be a number, not {_shown(value)}", field=param.name)
        if kind == "integer":
            if isinstance(value, float) and not value.is_integer():
                raise ActionError(f"{where} must be a whole number", field=param.name)
            value = int(value)
            if value < 0:
                raise ActionError(f"{where} must be 0 or more", field=param.name)
        return value
    if kind == "modifiers":
        if not isinstance(value, list) or not all(isinstance(m, str) for m in value):
            raise ActionError(f"{where} must be a list of key names", field=param.name)
        for m in value:
            if m not in MODIFIERS:
                raise ActionError(
                    f"{where}: unknown modifier {m!r}; use {', '.join(MODIFIERS)}",
                    field=param.name,
                )
        return value
    if kind == "options":
        if isinstance(value, str) and value:
            return value
        if isinstance(value, list) and value and all(isinstance(o, str) and o for o in value):
            return value
        raise ActionError(f"{where} must be an option's text or a list of them", field=param.name)
    if not isinstance(value, str):
        raise ActionError(f"{where} must be text in quotes, not {_shown(value)}", field=param.name)
    if kind == "button" and value not in BUTTONS:
        raise ActionError(f"{where} must be one of {', '.join(BUTTONS)}", field=param.name)
    if kind == "bid":
        if not value.strip():
            raise ActionError(f"{where}: the element id is empty", field=param.name)
        if any(c.isspace() for c in value):
            raise ActionError(f"{where}: {value!r} is not an element id", field=param.name)
    if kind == "nonempty" and not value.strip():
        raise ActionError(f"{where} must not be empty", field=param.name)
    return value


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def bind(name: str, positional: list[Any], keywords: dict[str, Any]) -> dict[str, Any]:
    """Check a call's arguments against the action's parameters: the canonical arguments."""
    if name not in ACTIONS:
        close = difflib.get_close_matches(name, ACTIONS, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise ActionError(
            f"unknown browser action {name!r}{hint}; actions: {', '.join(ACTIONS)}",
            field="name",
        )
    params = ACTIONS[name]
    if len(positional) > len(params):
        raise ActionError(
            f"{name} takes {len(params)} argument(s), {len(positional)} given: {signature(name)}",
            field="arguments",
        )
    given: dict[str, Any] = {}
    for param, value in zip(params, positional, strict=False):
        given[param.name] = value
    known = {p.name for p in params}
    for key, value in keywords.items():
        if key not in known:
            raise ActionError(f"{name} has no parameter {key!r}: {signature(name)}", field=key)
        if key in given:
            raise ActionError(f"{name}: {key} is given twice", field=key)
        given[key] = value
    arguments: dict[str, Any] = {}
    for param in params:
        if param.name not in given:
            if param.required:
                raise ActionError(f"{name} needs {param.name}: {signature(name)}", field=param.name)
            continue
        arguments[param.name] = _check_value(name, param, given[param.name])
    return arguments


_JSON_NAMES = {"true": True, "false": False, "null": None}


def _literal(node: ast.expr, what: str) -> Any:
    if isinstance(node, ast.Name) and node.id in _JSON_NAMES:
        return _JSON_NAMES[node.id]
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise ActionError(
            f"{what} must be a plain value (text in quotes, a number or a list)",
            field="arguments",
        ) from None


def parse_call(text: str) -> tuple[str, dict[str, Any]]:
    """``click("a42")`` or its JSON form -> (action name, checked arguments)."""
    stripped = unfenced(text.strip()).strip()
    if not stripped:
        raise ActionError('empty action: write a browser call such as click("a42")', field="name")
    if len(stripped) > MAX_ACTION_CHARS:
        raise ActionError(f"the action is longer than {MAX_ACTION_CHARS:,} characters")
    if stripped.startswith("{"):
        return _parse_json(stripped)
    try:
        tree = ast.parse(stripped, mode="eval")
    except SyntaxError as exc:
        raise ActionError(_syntax_message(stripped, exc), field="name") from None
    except (MemoryError, RecursionError, ValueError):
        raise ActionError(
            'the call is nested too deeply to read; write e.g. click("a42")', field="name"
        ) from None
    body = tree.body
    if isinstance(body, ast.Name):
        return body.id, bind(body.id, [], {})
    if not isinstance(body, ast.Call) or not isinstance(body.func, ast.Name):
        raise ActionError(
            'write one browser call such as click("a42"); see the action list for the rest',
            field="name",
        )
    name = body.func.id
    positional = []
    for i, arg in enumerate(body.args, 1):
        if isinstance(arg, ast.Starred):
            raise ActionError(f"{name}: *arguments are not accepted", field="arguments")
        positional.append(_literal(arg, f"{name}: argument {i}"))
    keywords: dict[str, Any] = {}
    for kw in body.keywords:
        if kw.arg is None:
            raise ActionError(f"{name}: **arguments are not accepted", field="arguments")
        keywords[kw.arg] = _literal(kw.value, f"{name}: {kw.arg}")
    return name, bind(name, positional, keywords)


def _syntax_message(text: str, exc: SyntaxError) -> str:
    if "integer string conversion" in str(exc.msg):
        return f"a number is too long: numbers may have at most {MAX_NUMBER_CHARS:,} digits"
    try:
        lines = ast.parse(text, mode="exec").body
    except (SyntaxError, MemoryError, RecursionError, ValueError):
        lines = []
    if len(lines) > 1:
        return f"one browser call per turn; {len(lines)} were given"
    return f'not a browser call ({exc.msg}); write e.g. click("a42") or fill("b12", "text")'


_NAME_KEYS = ("name", "action", "action_type")
_ARGUMENT_KEYS = ("arguments", "args", "parameters", "input")


def _parse_json(text: str) -> tuple[str, dict[str, Any]]:
    try:
        data = read_json(text)
    except json.JSONDecodeError as exc:
        raise ActionError(
            f"invalid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})",
            field="arguments",
        ) from None
    return call_from_value(data)


def call_from_value(data: Any) -> tuple[str, dict[str, Any]]:
    """The JSON forms: ``{"name": ..., "arguments": {...} or [...]}`` (also under action,
    args...), an OpenAI tool call, the arguments beside the name (``{"action": "click",
    "bid": "a42"}``), or the call's text as the name (``{"action": "click('a42')"}``)."""
    if not isinstance(data, dict):
        raise ActionError('the JSON form is {"name": ..., "arguments": {...}}')
    if isinstance(data.get("function"), dict):
        data = data["function"]
    names = [k for k in _NAME_KEYS if k in data]
    name = data[names[0]] if names else None
    if not isinstance(name, str) or not name:
        raise ActionError('the JSON form needs "name", e.g. "click"', field="name")
    given = [k for k in _ARGUMENT_KEYS if k in data]
    rest = {k: v for k, v in data.items() if k not in (*_NAME_KEYS, "id", "type")}
    if not given and not rest and "(" in name:
        return parse_call(name)
    if len(names) > 1 or len(given) > 1:
        twice = names if len(names) > 1 else given
        raise ActionError(
            f"the action gives {' and '.join(twice)}: give one of them", field=twice[1]
        )
    if given:
        extra = sorted(set(rest) - {given[0]})
        if extra:
            raise ActionError(f"unexpected key {extra[0]!r} beside {given[0]}", field=extra[0])
        args = data[given[0]]
    else:
        args = rest
    if isinstance(args, str):
        try:
            args = read_json(args) if args.strip() else {}
        except json.JSONDecodeError as exc:
            raise ActionError(
                f"arguments given as text are not JSON: {exc.msg}", field="arguments"
            ) from None
    if args is None:
        args = {}
    if isinstance(args, list):
        return name, bind(name, args, {})
    if not isinstance(args, dict):
        raise ActionError("arguments must be an object or a list", field="arguments")
    return name, bind(name, [], args)


def call_text(name: str, arguments: dict[str, Any]) -> str:
    """The call as an agent writes it: required values in order, optional ones by name."""
    parts = []
    for param in ACTIONS[name]:
        if param.name not in arguments:
            continue
        value = json.dumps(arguments[param.name], ensure_ascii=False)
        parts.append(value if param.required else f"{param.name}={value}")
    return f"{name}({', '.join(parts)})"


# -- the page -----------------------------------------------------------------------------

_ELEMENT = re.compile(
    r"""^(?P<indent>\s*)\[(?P<bid>[^\]\s]+)\]\s+(?P<role>[A-Za-z][\w-]*)"""
    r"""(?:\s+(?P<name>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"))?(?P<rest>.*)$"""
)
FILLABLE = ("textbox", "searchbox", "spinbutton", "textarea")
CHOOSABLE = ("listbox", "combobox")


@dataclass(frozen=True)
class PageElement:
    """An element of the page state that an action can name by its ``bid``."""

    bid: str
    role: str
    name: str
    line: int
    """0-based line of the state text it sits on."""
    depth: int
    """Nesting level: leading tabs (two spaces count as one)."""
    properties: str = ""
    options: tuple[str, ...] = field(default=())
    """For a list box or combo box: the texts of the options under it."""

    @property
    def fillable(self) -> bool:
        return self.role in FILLABLE or (self.role == "combobox" and not self.options)

    @property
    def choosable(self) -> bool:
        return self.role in CHOOSABLE and bool(self.options)

    def action(self, value: str = "") -> str:
        """The call that fits the element: select an option, fill a field, or click."""
        if self.choosable:
            return call_text(
                "select_option", {"bid": self.bid, "options": value or self.options[0]}
            )
        if self.fillable:
            return call_text("fill", {"bid": self.bid, "value": value})
        return call_text("click", {"bid": self.bid})


def _unquote(quoted: str | None) -> str:
    if not quoted:
        return ""
    try:
        value = ast.literal_eval(quoted)
    except (ValueError, SyntaxError):
        return quoted[1:-1]
    return value if isinstance(value, str) else quoted[1:-1]


def elements(state: str) -> list[PageElement]:
    """The page's elements with ids, in page order; lines without ``[bid]`` are text."""
    rows: list[tuple[re.Match[str], int, int]] = []
    lines = state.splitlines()
    for i, line in enumerate(lines):
        match = _ELEMENT.match(line)
        if match:
            indent = match.group("indent")
            rows.append((match, i, indent.count("\t") + indent.count(" ") // 2))
    found: list[PageElement] = []
    for k, (match, line_no, indent) in enumerate(rows):
        role = match.group("role")
        options: list[str] = []
        if role in CHOOSABLE:
            for later, _, later_indent in rows[k + 1 :]:
                if later_indent <= indent:
                    break
                if later.group("role") == "option":
                    options.append(_unquote(later.group("name")))
        found.append(
            PageElement(
                bid=match.group("bid"),
                role=role,
                name=_unquote(match.group("name")),
                line=line_no,
                depth=indent,
                properties=match.group("rest").strip(" ,"),
                options=tuple(options),
            )
        )
    return found


def element_on_line(state: str, line: int) -> PageElement | None:
    """The element written on ``line`` of the state (for picking in the page view)."""
    for element in elements(state):
        if element.line == line:
            return element
    return None


def element_by_bid(state: str, bid: str) -> PageElement | None:
    for element in elements(state):
        if element.bid == bid:
            return element
    return None


def bid_problem(action: Action, state: str) -> str:
    """Why an action's element is not on this page ("" when it is, or names none)."""
    payload = action.payload if isinstance(action.payload, dict) else {}
    bid = payload.get("arguments", {}).get("bid")
    if not isinstance(bid, str):
        return ""
    page = elements(state)
    if not page or any(e.bid == bid for e in page):
        return ""
    return f"there is no element [{bid}] on this page"


def page_diff(old: str, new: str, context: int = 3) -> str:
    """A unified diff from the previous page to the predicted one ("" when identical)."""
    lines = difflib.unified_diff(
        old.splitlines(), new.splitlines(), "before", "after", n=context, lineterm=""
    )
    return "\n".join(lines)


def _goal(scenario: Scenario) -> str:
    goal = str(scenario.extras.get("goal", "") or "").strip()
    return f"The agent's goal, for context (the page does not know it): {goal}" if goal else ""


BROWSER_TOOL = Tool(
    "browser_action",
    "Act on the web page and get the next page state (an accessibility tree whose elements "
    "carry bids). The action is one call such as click('12'), fill('7', 'hello'), "
    "goto('https://example.com'), scroll(0, 300), go_back() or send_msg_to_user('done').",
    {
        "type": "object",
        "properties": {"action": {"type": "string", "description": "one browser call"}},
        "required": ["action"],
    },
)


class WebDomain(DomainBase):
    name = "web"
    title = "Web"
    lexer = "text"
    replaces_state = True
    editor_language = "text"
    pane = "agentworld_tui.ui.panes.web:WebPane"

    def make_action(self, value: object, scenario: Scenario) -> Action:
        """A call in its JSON form, as the action bar builds it: ``{"name": "fill",
        "arguments": {"bid": "b12", "value": "hello"}}`` (or another form ``parse_action``
        reads from JSON)."""
        name, arguments = call_from_value(json_value(value, MAX_ACTION_CHARS))
        return self._action(name, arguments)

    def _action(self, name: str, arguments: dict[str, Any]) -> Action:
        text = call_text(name, arguments)
        label = text if len(text) <= 60 else text[:59] + "…"
        return Action(self.name, {"name": name, "arguments": arguments}, label)

    def parse_action(self, text: str, scenario: Scenario) -> Action:
        name, arguments = parse_call(text)
        return self._action(name, arguments)

    def tools(self, scenario: Scenario) -> list[Tool]:
        return [BROWSER_TOOL]

    def render_turn(self, number: int, action: Action, state: str | None) -> str:
        payload = {"name": action.payload["name"], "arguments": action.payload["arguments"]}
        return turn_markdown(number, json.dumps(payload, ensure_ascii=False), state=state)

    def prompt_values(self, scenario: Scenario) -> dict[str, str]:
        return {
            "scenario": scenario.description,
            "goal": _goal(scenario),
            "actions": "\n".join(signature(n) for n in ACTIONS),
        }

    def observation_lexer(self, action: Action, observation: str) -> str:
        return "html" if observation.lstrip().startswith("<") else "text"
