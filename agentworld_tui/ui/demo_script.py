"""A demo script: which tabs to show and what to type into them, at what pace (the format
``SCRIPT_FORMAT`` describes). ``agentworld demo`` loads one; ``ui/demo.py`` plays it."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

DEFAULT_CPS = 14.0
DEFAULT_PAUSE = 1.5
MAX_PAUSE = 600.0
DEFAULT_SIZE = (132, 40)
SHIPPED_DEMOS = ("tour", "terminal-tour")
"""The example scripts in agentworld_tui/demos, played by name."""

SCRIPT_FORMAT = """\
A demo script is a TOML file:

  chars_per_second = 14        # typing speed (--cps overrides; 0: all at once)
  pause = 2.0                  # seconds to hold after each turn (0 to 600)
  start_pause = 1.0            # seconds before the first key

  [[tab]]                      # one table per tab, played in order
  domain = "terminal"          # terminal, mcp, web, android, search, swe or os
  scenario = "python-project"  # optional: one of the domain's ready scenarios
  actions = [
    "ls -la",                                    # typed, then sent with the tab's send key
    { type = "git status", pause = 4 },          # its own pause after the turn
    { type = "cd src", press = ["f2"] },         # keys (enter, f2, ctrl+s...) instead of
                                                 # the tab's send key
  ]

An action is written as the tab takes it: a command line, a JSON tool call for MCP,
Search and SWE ('{"name": ..., "arguments": {...}}'), an action call for Web and
Android, Python for OS. Every turn is awaited to its end before the next action.

Shipped examples, played by name instead of a file:
  agentworld demo tour --model MODEL.gguf             one action in each of four tabs
  agentworld demo terminal-tour --model MODEL.gguf    a terminal session
"""


class DemoScriptError(ValueError):
    """A demo script that cannot be played; the message says where and why."""


@dataclass(frozen=True)
class DemoAction:
    text: str = ""
    """Typed into the tab's action editor."""
    press: tuple[str, ...] | None = None
    """Keys pressed after typing; None: the tab's send key."""
    pause: float | None = None
    """Seconds to hold after the turn; None: the script's pause."""


@dataclass(frozen=True)
class DemoTab:
    domain: str
    scenario: str = ""
    actions: tuple[DemoAction, ...] = ()


@dataclass(frozen=True)
class DemoScript:
    tabs: tuple[DemoTab, ...]
    chars_per_second: float = DEFAULT_CPS
    pause: float = DEFAULT_PAUSE
    start_pause: float = 1.0
    steps: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        object.__setattr__(self, "steps", sum(len(t.actions) for t in self.tabs))


def _seconds(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise DemoScriptError(f"{where} must be a number of seconds")
    if not 0 <= value <= MAX_PAUSE:
        raise DemoScriptError(f"{where} must be between 0 and {MAX_PAUSE:g} seconds")
    return float(value)


def _check_keys(data: dict[str, Any], allowed: set[str], where: str) -> None:
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise DemoScriptError(
            f"{where}: unknown key {unknown[0]!r} (expected {', '.join(sorted(allowed))})"
        )


def _action(raw: Any, where: str) -> DemoAction:
    if isinstance(raw, str):
        return DemoAction(raw)
    if not isinstance(raw, dict):
        raise DemoScriptError(f"{where} must be text or a table with type, press, pause")
    _check_keys(raw, {"type", "press", "pause"}, where)
    text = raw.get("type", "")
    if not isinstance(text, str):
        raise DemoScriptError(f"{where}.type must be text")
    press = raw.get("press")
    if press is not None:
        if isinstance(press, str):
            press = [press]
        if not isinstance(press, list) or not all(isinstance(k, str) and k for k in press):
            raise DemoScriptError(f"{where}.press must be a key name or a list of them")
        press = tuple(press)
    if not text and not press:
        raise DemoScriptError(f"{where} has nothing to type and no keys to press")
    pause = raw.get("pause")
    return DemoAction(text, press, None if pause is None else _seconds(pause, f"{where}.pause"))


def parse_demo(data: dict[str, Any], source: str = "demo script") -> DemoScript:
    """Check a parsed demo script against the domains and their ready scenarios."""
    from agentworld_tui.domains import DOMAINS
    from agentworld_tui.world.prompts import load_scenarios

    _check_keys(data, {"tab", "chars_per_second", "pause", "start_pause"}, source)
    cps = data.get("chars_per_second", DEFAULT_CPS)
    if isinstance(cps, bool) or not isinstance(cps, int | float) or cps < 0:
        raise DemoScriptError(f"{source}: chars_per_second must be a number from 0 (0: at once)")
    raw_tabs = data.get("tab")
    if not isinstance(raw_tabs, list) or not raw_tabs:
        raise DemoScriptError(f"{source}: no [[tab]] tables: nothing to play")
    tabs: list[DemoTab] = []
    for i, raw in enumerate(raw_tabs, 1):
        where = f"{source}: tab {i}"
        if not isinstance(raw, dict):
            raise DemoScriptError(f"{where} must be a table")
        _check_keys(raw, {"domain", "scenario", "actions"}, where)
        domain = raw.get("domain")
        if not isinstance(domain, str) or domain not in DOMAINS:
            raise DemoScriptError(f"{where}: domain must be one of {', '.join(DOMAINS)}")
        scenario = raw.get("scenario", "")
        if not isinstance(scenario, str):
            raise DemoScriptError(f"{where}: scenario must be a scenario name")
        if scenario:
            names = [s.name for s in load_scenarios(domain)[0]]
            if scenario not in names:
                raise DemoScriptError(
                    f"{where}: no {domain} scenario {scenario!r} (ready ones: "
                    f"{', '.join(names) or 'none'})"
                )
        actions = raw.get("actions", [])
        if not isinstance(actions, list):
            raise DemoScriptError(f"{where}: actions must be a list")
        tabs.append(
            DemoTab(
                domain,
                scenario,
                tuple(_action(a, f"{where} action {j}") for j, a in enumerate(actions, 1)),
            )
        )
    return DemoScript(
        tuple(tabs),
        chars_per_second=float(cps),
        pause=_seconds(data.get("pause", DEFAULT_PAUSE), f"{source}: pause"),
        start_pause=_seconds(data.get("start_pause", 1.0), f"{source}: start_pause"),
    )


def shipped_demo(name: str) -> Path:
    """The path of the example script ``name`` that ships with the app."""
    return Path(str(resources.files("agentworld_tui").joinpath("demos", f"{name}.toml")))


def demo_script_path(text: str) -> Path:
    """SCRIPT as given: a file, or the name of a shipped example when no such file exists."""
    path = Path(text).expanduser()
    if text in SHIPPED_DEMOS and not path.exists():
        return shipped_demo(text)
    return path


def load_demo(path: Path) -> DemoScript:
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DemoScriptError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DemoScriptError(f"{path}: cannot read ({exc})") from None
    try:
        data = tomllib.loads(raw)
    except tomllib.TOMLDecodeError as exc:
        raise DemoScriptError(f"{path}: not valid TOML ({exc})") from None
    return parse_demo(data, str(path))
