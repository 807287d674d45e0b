"""Every domain as tools an agent can call: the surface the MCP server, the Python
environment and rollouts' policies all see.

The tool-call domains (MCP, Search, SWE) offer their own tools, as the scenario lists them.
The others offer one action tool each, whose input is the domain's own action and whose
result is what the environment shows next: the terminal's keystrokes, the browser's call,
the phone's action, the desktop's Python. A domain this module does not know (a new one)
still gets a generic ``act`` tool that takes its action as written.
"""

from __future__ import annotations

import json
from typing import Any

from agentworld_tui.domains.tool_call import Tool
from agentworld_tui.world.action import Action, ActionError
from agentworld_tui.world.domain import Domain, Scenario

_KEYSTROKES = Tool(
    "send_keystrokes",
    "Type into the terminal and get the screen after. Keystrokes ending in a newline run "
    "a command; tmux key names such as C-c, C-d or Escape send that key; empty keystrokes "
    "with a duration wait for more output.",
    {
        "type": "object",
        "properties": {
            "keystrokes": {"type": "string", "description": "what to type"},
            "duration": {
                "type": "number",
                "minimum": 0,
                "description": "seconds to wait before the screen is read (default 1)",
            },
        },
        "required": ["keystrokes"],
    },
)
_BROWSER = Tool(
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
_PHONE = Tool(
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
_DESKTOP = Tool(
    "run_python",
    "Run Python on the desktop (pyautogui click/moveTo/write/press/hotkey, app helpers, "
    "subprocess) and get the desktop's next accessibility tree.",
    {
        "type": "object",
        "properties": {"code": {"type": "string", "description": "the Python to run"}},
        "required": ["code"],
    },
)
_GENERIC = Tool(
    "act",
    "Take one action in the environment, written as the environment writes actions, and "
    "get what it shows next.",
    {
        "type": "object",
        "properties": {"action": {"type": "string"}},
        "required": ["action"],
    },
)
ACTION_TOOLS: dict[str, Tool] = {
    "terminal": _KEYSTROKES,
    "web": _BROWSER,
    "android": _PHONE,
    "os": _DESKTOP,
}


def agent_tools(domain: Domain, scenario: Scenario) -> list[Tool]:
    """The tools an agent acting in ``domain`` is offered."""
    own = getattr(domain, "tools", None)
    if callable(own):
        found = own(scenario)
        if found:
            return list(found)
    return [ACTION_TOOLS.get(domain.name, _GENERIC)]


def agent_action(domain: Domain, scenario: Scenario, name: str, arguments: Any) -> Action:
    """The action a call of tool ``name`` stands for; raises ActionError, with the same
    messages the app shows, when the call is not one the domain accepts."""
    if not isinstance(arguments, dict):
        raise ActionError("the arguments must be an object", field="arguments")
    tools = agent_tools(domain, scenario)
    if name not in {tool.name for tool in tools}:
        known = ", ".join(tool.name for tool in tools)
        raise ActionError(f"unknown tool {name!r}; this environment has {known}", field="name")
    if callable(getattr(domain, "tools", None)):
        return _made(domain, name, arguments, scenario)
    if name == _KEYSTROKES.name:
        entry: dict[str, Any] = {"keystrokes": arguments.get("keystrokes", "")}
        if "duration" in arguments:
            entry["duration"] = arguments["duration"]
        return _made(domain, [entry])
    if name == _DESKTOP.name:
        return domain.parse_action(_text(arguments, "code"), scenario)
    value = arguments.get("action")
    if name == _PHONE.name and isinstance(value, dict):
        return _made(domain, value, scenario)
    return domain.parse_action(_text(arguments, "action"), scenario)


def _made(domain: Domain, *args: Any) -> Action:
    """The domain's own ``make_action`` (each domain takes its own arguments)."""
    action = domain.make_action(*args)  # type: ignore[attr-defined]
    assert isinstance(action, Action)
    return action


def _text(arguments: dict[str, Any], key: str) -> str:
    value = arguments.get(key)
    if isinstance(value, str):
        return value
    if value is None:
        raise ActionError(f"{key} is required", field=key)
    return json.dumps(value, ensure_ascii=False)
