"""Android: an agent taps, types and swipes on a phone whose screen is a UI hierarchy.

The state is the screen's view hierarchy as ``uiautomator dump`` writes it (``<node>``
elements with class, text, resource-id, content-desc, bounds ``[x1,y1][x2,y2]``,
clickable, focused...); a JSON tree of the same attributes is read too. Actions are JSON:
``{"action": "tap", "element": "Sign in", "x": 540, "y": 1210}``; the shapes of
AndroidWorld (``action_type``, ``index``), of phone-use tool calls (``coordinate``,
``system_button``, ``mobile_use`` arguments) and the usual aliases are read into that form,
which the turn writes.

The app draws the hierarchy as a phone (``ui/widgets/android/drawing.py``); here is what
the domain itself reads of it: the nodes, the screen's size, how an action names a node.
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass
from typing import Any

from agentworld_tui.domains.base import DomainBase, argument_text, json_value
from agentworld_tui.domains.json_schema import read_json, value_problem
from agentworld_tui.domains.turn import unfenced
from agentworld_tui.world.action import Action, ActionError
from agentworld_tui.world.domain import Scenario
from agentworld_tui.world.tool import Tool

# -- actions ------------------------------------------------------------------------------

ACTION_NAMES = (
    "tap",
    "long_press",
    "type",
    "swipe",
    "scroll",
    "back",
    "home",
    "enter",
    "open_app",
    "wait",
    "answer",
    "status",
)
ALIASES = {
    "click": "tap",
    "long_click": "long_press",
    "input_text": "type",
    "type_text": "type",
    "input": "type",
    "navigate_back": "back",
    "press_back": "back",
    "navigate_home": "home",
    "press_home": "home",
    "keyboard_enter": "enter",
    "press_enter": "enter",
    "open": "open_app",
    "launch_app": "open_app",
    "terminate": "status",
}
"""The names AndroidWorld, AndroidControl and phone-use agents give the same actions."""
SYSTEM_BUTTONS = {"back": "back", "home": "home", "enter": "enter"}
DIRECTIONS = ("up", "down", "left", "right")
_FIELDS = {
    "tap": ("element", "index", "x", "y"),
    "long_press": ("element", "index", "x", "y", "duration_ms"),
    "type": ("text", "element", "index", "x", "y"),
    "swipe": ("direction", "start", "end", "element", "index", "duration_ms"),
    "scroll": ("direction", "element", "index"),
    "back": (),
    "home": (),
    "enter": (),
    "open_app": ("app_name",),
    "wait": ("duration_ms",),
    "answer": ("text",),
    "status": ("goal_status",),
}
_ACTION_KEYS = ("action", "action_type", "name")
MAX_ACTION_CHARS = 20_000
MAX_PIXEL = 100_000


def _int_field(data: dict[str, Any], key: str) -> int:
    value = data[key]
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
        raise ActionError(f"{key} must be a whole number of pixels", field=key)
    if value < 0:
        raise ActionError(f"{key} must be 0 or more", field=key)
    if value > MAX_PIXEL:
        raise ActionError(f"{key} must be at most {MAX_PIXEL:,}", field=key)
    return int(value)


def _text_field(data: dict[str, Any], key: str, *, allow_empty: bool = False) -> str:
    value = data[key]
    if not isinstance(value, str) or (not allow_empty and not value.strip()):
        raise ActionError(f"{key} must be non-empty text", field=key)
    return value


def _is_point(value: Any) -> bool:
    return (
        isinstance(value, list | tuple)
        and len(value) == 2
        and all(
            isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= MAX_PIXEL for v in value
        )
    )


def _point(data: dict[str, Any], key: str) -> list[int]:
    value = data[key]
    if not _is_point(value):
        raise ActionError(f"{key} must be a point [x, y] in pixels", field=key)
    return [int(value[0]), int(value[1])]


def _envelope(data: dict[str, Any]) -> dict[str, Any]:
    """The action inside a tool call (``{"name": "mobile_use", "arguments": {...}}``, an
    OpenAI ``function``), with the tool's name as the action where the arguments lack one."""
    if isinstance(data.get("function"), dict):
        data = data["function"]
    inner = data.get("arguments", data.get("args"))
    if isinstance(inner, str):
        try:
            inner = read_json(inner)
        except json.JSONDecodeError as exc:
            raise ActionError(
                f"arguments given as text are not JSON: {exc.msg}", field="arguments"
            ) from None
    if not isinstance(inner, dict):
        return data
    extra = sorted(set(data) - {"name", "arguments", "args", "id", "type"})
    if extra:
        raise ActionError(f"unexpected key {extra[0]!r} beside arguments", field=extra[0])
    if not any(k in inner for k in _ACTION_KEYS) and isinstance(data.get("name"), str):
        return {"action": data["name"], **inner}
    return dict(inner)


def _seconds_to_ms(data: dict[str, Any], key: str) -> int:
    value = data[key]
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 3600:
        raise ActionError(f"{key} must be a number of seconds (up to 3600)", field=key)
    return round(value * 1000)


def _canonical_keys(name: str, data: dict[str, Any]) -> dict[str, Any]:
    """The other spellings of an action's fields in the project's: ``coordinate`` (and a
    swipe's ``coordinate2``), ``point``, seconds as ``time``, ``goal_status`` as ``status``,
    the app's name as ``text``/``app``."""
    data = dict(data)
    renames: dict[str, str] = {"point": "coordinate", "coordinates": "coordinate"}
    if name == "open_app":
        renames.update({"text": "app_name", "app": "app_name"})
    if name == "status":
        renames["status"] = "goal_status"
    for old, new in renames.items():
        if old in data:
            if new in data:
                raise ActionError(f"give {new} or {old}, not both", field=old)
            data[new] = data.pop(old)
    if "coordinate" in data:
        if not _is_point(data["coordinate"]):
            raise ActionError("coordinate must be a point [x, y] in pixels", field="coordinate")
        if name == "swipe":
            data.setdefault("start", data.pop("coordinate"))
        else:
            if "x" in data or "y" in data:
                raise ActionError("give x and y or coordinate, not both", field="coordinate")
            data["x"], data["y"] = data.pop("coordinate")
    if name == "swipe" and "coordinate2" in data:
        data.setdefault("end", data.pop("coordinate2"))
    if "time" in data and name in ("long_press", "wait", "swipe"):
        if "duration_ms" in data:
            raise ActionError("give duration_ms or time, not both", field="time")
        data["duration_ms"] = _seconds_to_ms(data, "time")
        del data["time"]
    return data


def check_action(data: Any, screen: tuple[int, int] | None = None) -> dict[str, Any]:
    """The canonical action from its JSON object, or ActionError saying what is wrong.

    ``screen`` (width, height) lets points outside the screen be refused.
    """
    if not isinstance(data, dict):
        raise ActionError('an Android action is a JSON object: {"action": "tap", ...}')
    problem = value_problem(data)
    if problem:
        raise ActionError(f"the action is not usable: {problem}")
    data = dict(_envelope(data))
    named = [k for k in ("action", "action_type") if k in data]
    if len(named) > 1:
        raise ActionError("the action is named twice (action and action_type)", field=named[1])
    if named and isinstance(data.get("name"), str):
        del data["name"]  # the tool's name, beside the action it carries
    name = data.pop(named[0] if named else "name", None)
    if not isinstance(name, str) or not name:
        raise ActionError(
            f'the action needs "action": one of {", ".join(ACTION_NAMES)}', field="action"
        )
    name = ALIASES.get(name, name)
    if name == "system_button":
        button = data.pop("button", None)
        if not isinstance(button, str) or button.lower() not in SYSTEM_BUTTONS:
            raise ActionError("system_button takes button Back, Home or Enter", field="button")
        name = SYSTEM_BUTTONS[button.lower()]
    if name not in _FIELDS:
        raise ActionError(
            f"unknown action {name!r}; use one of {', '.join(ACTION_NAMES)}", field="action"
        )
    data = _canonical_keys(name, data)
    allowed = _FIELDS[name]
    for field_name in data:
        if field_name not in allowed:
            takes = ", ".join(allowed) or "nothing else"
            raise ActionError(f"{name} takes {takes}; not {field_name!r}", field=field_name)
    out: dict[str, Any] = {"action": name}
    if "element" in data:
        out["element"] = _text_field(data, "element")
    if "index" in data:
        index = data["index"]
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index <= MAX_PIXEL:
            raise ActionError("index must be a whole number, 0 or more", field="index")
        out["index"] = index
    has_x, has_y = "x" in data, "y" in data
    if has_x != has_y:
        raise ActionError(f"{name} needs both x and y", field="y" if has_x else "x")
    if has_x:
        out["x"], out["y"] = _int_field(data, "x"), _int_field(data, "y")
        if screen and (out["x"] >= screen[0] or out["y"] >= screen[1]):
            raise ActionError(
                f"({out['x']}, {out['y']}) is outside the {screen[0]}x{screen[1]} screen",
                field="x",
            )
    if name in ("tap", "long_press") and not ({"element", "index", "x"} & set(out)):
        raise ActionError(
            f"{name} needs an element (its text or resource id), its index, or a point x, y",
            field="element",
        )
    if "duration_ms" in data:
        duration = _int_field(data, "duration_ms")
        if duration == 0:
            raise ActionError("duration_ms must be more than 0", field="duration_ms")
        out["duration_ms"] = duration
    if name == "type":
        if "text" not in data:
            raise ActionError("type needs the text to enter", field="text")
        out["text"] = _text_field(data, "text")
    if name == "answer":
        if "text" not in data:
            raise ActionError("answer needs the text of the answer", field="text")
        out["text"] = _text_field(data, "text")
    if name in ("swipe", "scroll"):
        if "direction" in data:
            direction = data["direction"]
            if isinstance(direction, str) and direction.lower() in DIRECTIONS:
                direction = direction.lower()
            if direction not in DIRECTIONS:
                raise ActionError(
                    f"direction must be one of {', '.join(DIRECTIONS)}", field="direction"
                )
            out["direction"] = direction
        if name == "swipe" and ("start" in data or "end" in data):
            if "direction" in out:
                raise ActionError("give a direction or start and end, not both", field="start")
            for key in ("start", "end"):
                if key not in data:
                    raise ActionError(
                        f"swipe needs both start and end; {key} is missing", field=key
                    )
                out[key] = _point(data, key)
        elif "direction" not in out:
            raise ActionError(
                f"{name} needs a direction ({', '.join(DIRECTIONS)})", field="direction"
            )
    if name == "open_app":
        if "app_name" not in data:
            raise ActionError("open_app needs app_name", field="app_name")
        out["app_name"] = _text_field(data, "app_name")
    if name == "status":
        if "goal_status" not in data:
            raise ActionError(
                "status needs goal_status (complete or infeasible)", field="goal_status"
            )
        out["goal_status"] = _text_field(data, "goal_status")
    return out


def action_label(payload: dict[str, Any]) -> str:
    name = payload["action"]
    if name in ("tap", "long_press"):
        if payload.get("element"):
            where = payload["element"]
        elif "index" in payload:
            where = f"#{payload['index']}"
        else:
            where = f"({payload['x']}, {payload['y']})"
        return f"{name} {where}"
    if name in ("type", "answer"):
        text = payload["text"]
        return (
            f"{name} {json.dumps(text if len(text) <= 40 else text[:39] + '…', ensure_ascii=False)}"
        )
    if name in ("swipe", "scroll"):
        if "direction" in payload:
            return f"{name} {payload['direction']}"
        return f"swipe {tuple(payload['start'])} → {tuple(payload['end'])}"
    if name == "open_app":
        return f"open {payload['app_name']}"
    if name == "status":
        return f"status {payload['goal_status']}"
    return str(name)


# -- the hierarchy ------------------------------------------------------------------------

_BOUNDS = re.compile(r"\[\s*(-?\d+)\s*,\s*(-?\d+)\s*\]\s*\[\s*(-?\d+)\s*,\s*(-?\d+)\s*\]")
_TAG = re.compile(r"<(/?)node\b((?:[^>\"']|\"[^\"]*\"|'[^']*')*?)(/?)>", re.S)
_ATTR = re.compile(r"([\w:.-]+)\s*=\s*(\"[^\"]*\"|'[^']*')")


@dataclass(frozen=True)
class UINode:
    """One view of the screen."""

    index: int
    """Position in document order (0 = root)."""
    parent: int
    """Index of the parent node, -1 for a root."""
    depth: int
    class_name: str
    text: str = ""
    content_desc: str = ""
    resource_id: str = ""
    bounds: tuple[int, int, int, int] = (0, 0, 0, 0)
    clickable: bool = False
    long_clickable: bool = False
    focusable: bool = False
    focused: bool = False
    scrollable: bool = False
    checkable: bool = False
    checked: bool = False
    selected: bool = False
    enabled: bool = True
    password: bool = False

    @property
    def short_class(self) -> str:
        return self.class_name.rsplit(".", 1)[-1]

    @property
    def short_id(self) -> str:
        return self.resource_id.rsplit("/", 1)[-1]

    @property
    def editable(self) -> bool:
        return any(k in self.short_class for k in ("EditText", "TextField", "AutoComplete"))

    @property
    def interactive(self) -> bool:
        return self.clickable or self.long_clickable or self.editable or self.checkable

    @property
    def label(self) -> str:
        return self.text or self.content_desc

    @property
    def center(self) -> tuple[int, int]:
        x1, y1, x2, y2 = self.bounds
        return (x1 + x2) // 2, (y1 + y2) // 2

    @property
    def has_area(self) -> bool:
        x1, y1, x2, y2 = self.bounds
        return x2 > x1 and y2 > y1

    def reference(self) -> str:
        """How an action names this node: its text, description, or resource id."""
        return self.label.strip() or self.resource_id or self.short_class


def _flag(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() == "true"


def _bounds(value: Any) -> tuple[int, int, int, int]:
    if isinstance(value, list | tuple) and len(value) == 4:
        try:
            x1, y1, x2, y2 = (int(v) for v in value)
        except (TypeError, ValueError):
            return (0, 0, 0, 0)
        return (x1, y1, x2, y2)
    if isinstance(value, dict):
        try:
            return (
                int(value["left"]),
                int(value["top"]),
                int(value["right"]),
                int(value["bottom"]),
            )
        except (KeyError, TypeError, ValueError):
            return (0, 0, 0, 0)
    match = _BOUNDS.search(str(value or ""))
    if not match:
        return (0, 0, 0, 0)
    x1, y1, x2, y2 = (int(g) for g in match.groups())
    return (x1, y1, x2, y2)


def _node(index: int, parent: int, depth: int, attrs: dict[str, Any]) -> UINode:
    def get(*keys: str) -> Any:
        for key in keys:
            if key in attrs:
                return attrs[key]
        return ""

    return UINode(
        index=index,
        parent=parent,
        depth=depth,
        class_name=str(get("class", "class_name", "className") or ""),
        text=str(get("text") or ""),
        content_desc=str(get("content-desc", "content_desc", "contentDescription") or ""),
        resource_id=str(get("resource-id", "resource_id", "resourceId", "id") or ""),
        bounds=_bounds(get("bounds")),
        clickable=_flag(get("clickable")),
        long_clickable=_flag(get("long-clickable", "long_clickable", "longClickable")),
        focusable=_flag(get("focusable")),
        focused=_flag(get("focused")),
        scrollable=_flag(get("scrollable")),
        checkable=_flag(get("checkable")),
        checked=_flag(get("checked")),
        selected=_flag(get("selected")),
        enabled=str(get("enabled")).lower() != "false",
        password=_flag(get("password")),
    )


def parse_hierarchy(text: str) -> list[UINode]:
    """The nodes of a hierarchy (XML ``<node>`` dump or JSON tree), in document order.

    Model output may be cut short or malformed: whatever nodes can be read are returned,
    never an exception.
    """
    stripped = text.strip()
    if stripped[:1] in "[{":
        try:
            data = read_json(stripped, max_depth=None)  # a real tree may nest deeply
        except json.JSONDecodeError:
            data = None
        if data is not None:
            return _json_nodes(data)
    nodes: list[UINode] = []
    stack: list[UINode] = []
    for match in _TAG.finditer(text):
        closing, body, self_closing = match.groups()
        if closing:
            if stack:
                stack.pop()
            continue
        attrs = {k: html.unescape(v[1:-1]) for k, v in _ATTR.findall(body)}
        parent = stack[-1].index if stack else -1
        node = _node(len(nodes), parent, len(stack), attrs)
        nodes.append(node)
        if not self_closing:
            stack.append(node)
    return nodes


def _json_nodes(data: Any) -> list[UINode]:
    nodes: list[UINode] = []
    pending: list[tuple[Any, int, int]] = []
    roots = data if isinstance(data, list) else [data]
    pending.extend((r, -1, 0) for r in reversed(roots))
    while pending and len(nodes) < 20_000:
        item, parent, depth = pending.pop()
        if not isinstance(item, dict):
            continue
        node = _node(len(nodes), parent, depth, item)
        nodes.append(node)
        children = item.get("children") or item.get("nodes") or []
        if isinstance(children, list):
            pending.extend((c, node.index, depth + 1) for c in reversed(children))
    return nodes


def screen_size(nodes: list[UINode]) -> tuple[int, int]:
    """The device screen in pixels: the extent of all bounds (at least 1x1)."""
    width = max((n.bounds[2] for n in nodes), default=0)
    height = max((n.bounds[3] for n in nodes), default=0)
    return max(width, 1), max(height, 1)


def node_reference(node: UINode, nodes: list[UINode] | None = None) -> str:
    """How an action names a node: its own text or description, else (for a clickable row
    whose texts are its children's) the first text inside it, else its resource id."""
    if node.label.strip() or not nodes:
        return node.reference()
    inside = {node.index}
    for other in nodes[node.index + 1 :]:
        if other.parent not in inside:
            break
        inside.add(other.index)
        if other.label.strip():
            return other.label.strip()
    return node.reference()


def node_action(
    node: UINode, kind: str = "tap", nodes: list[UINode] | None = None
) -> dict[str, Any]:
    """The action a pane fills when a node is selected: tap (or long_press) its centre, or
    ``type`` into it; ``nodes`` (the whole screen) lets a row be named by its text."""
    element = node_reference(node, nodes)
    if kind == "type":
        return {"action": "type", "element": element, "text": ""}
    if kind not in ("tap", "long_press"):
        raise ValueError(f"no node action {kind!r}")
    x, y = node.center
    return {"action": kind, "element": element, "x": max(0, x), "y": max(0, y)}


def _goal(scenario: Scenario) -> str:
    goal = str(scenario.extras.get("goal", "") or "").strip()
    return f"The agent's goal, for context (the apps do not know it): {goal}" if goal else ""


PHONE_TOOL = Tool(
    "phone_action",
    "Act on the Android screen and get the next UI hierarchy. The action is an object such "
    'as {"action": "tap", "element": "Sign in"}, {"action": "type", "text": "hi"}, '
    '{"action": "swipe", "direction": "up"}, {"action": "back"} or '
    '{"action": "open_app", "app_name": "Clock"}.',
    {
        "type": "object",
        "properties": {
            "action": {
                "type": ["object", "string"],
                "description": "the phone action, as an object (or its JSON text)",
            }
        },
        "required": ["action"],
    },
)


class AndroidDomain(DomainBase):
    name = "android"
    title = "Android"
    lexer = "xml"
    replaces_state = True
    editor_language = "json"
    pane = "agentworld_tui.ui.panes.android:AndroidPane"

    def make_action(self, value: object, scenario: Scenario) -> Action:
        """An action object; a point outside the scenario's screen is refused."""
        screen = None
        if scenario.state.strip():
            nodes = parse_hierarchy(scenario.state)
            if nodes:
                screen = screen_size(nodes)
        payload = check_action(json_value(value, MAX_ACTION_CHARS), screen)
        return Action(self.name, payload, action_label(payload))

    def parse_action(self, text: str, scenario: Scenario) -> Action:
        stripped = unfenced(text.strip()).strip()
        if not stripped:
            raise ActionError('empty action: write e.g. {"action": "tap", "element": "OK"}')
        if len(stripped) > MAX_ACTION_CHARS:
            raise ActionError(f"the action is longer than {MAX_ACTION_CHARS:,} characters")
        if stripped in ACTION_NAMES or stripped in ALIASES:
            return self.make_action({"action": stripped}, scenario)
        try:
            data = read_json(stripped)
        except json.JSONDecodeError as exc:
            raise ActionError(
                f"invalid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})",
                field="action",
            ) from None
        return self.make_action(data, scenario)

    def tools(self, scenario: Scenario) -> list[Tool]:
        return [PHONE_TOOL]

    def tool_action(self, name: str, arguments: dict[str, Any], scenario: Scenario) -> Action:
        value = arguments.get("action")
        if isinstance(value, dict):
            return self.make_action(value, scenario)
        return self.parse_action(argument_text(arguments, "action"), scenario)

    def prompt_values(self, scenario: Scenario) -> dict[str, str]:
        return {
            "scenario": scenario.description,
            "goal": _goal(scenario),
        }

    def observation_lexer(self, action: Action, observation: str) -> str:
        return "json" if observation.lstrip()[:1] in "[{" else "xml"
