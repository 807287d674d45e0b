"""What an episode starts from, by name or file: the domain, the scenario, the fictional
world. Every front-end of the package (environments, pools, rollouts, the OpenEnv server,
tasks files, ``env serve``) finds them here, with the same messages."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from agentworld_tui.agents.env.results import EnvError
from agentworld_tui.domains import get_domain
from agentworld_tui.domains.scenario_file import ScenarioFileError, load_scenario_file
from agentworld_tui.world.domain import Domain, Scenario
from agentworld_tui.world.fictional_world import (
    FictionalWorld,
    WorldError,
    list_worlds,
    load_world_file,
)
from agentworld_tui.world.prompts import load_scenarios

__all__ = ["resolve_domain", "resolve_scenario", "resolve_world", "scenario_named", "world_named"]


def resolve_domain(domain: str | Domain) -> Domain:
    if not isinstance(domain, str):
        return domain
    try:
        return get_domain(domain)
    except KeyError as exc:
        raise EnvError(str(exc.args[0])) from None


def resolve_scenario(domain: Domain, scenario: str | Scenario | None) -> Scenario:
    """A scenario by name (``prompts/<domain>/scenarios.toml``), from a file, or as given."""
    if isinstance(scenario, Scenario):
        return scenario
    found, _problems = load_scenarios(domain.name)
    if scenario is None:
        return found[0] if found else Scenario("default", "Default")
    for item in found:
        if item.name == scenario:
            return item
    path = Path(scenario)
    if path.suffix.lower() in (".toml", ".json", ".txt") and path.is_file():
        try:
            return load_scenario_file(path)
        except ScenarioFileError as exc:
            raise EnvError(str(exc)) from None
    known = ", ".join(s.name for s in found) or "none"
    raise EnvError(f"{domain.name} has no scenario {scenario!r} (it has: {known})")


def scenario_named(domain: Domain, name: str, offered: Sequence[Scenario] = ()) -> Scenario:
    """The scenario a client (a request, a tasks file's line) names: one of ``offered``
    (what the server was started with) or of the domain's by name; never a file."""
    found, _problems = load_scenarios(domain.name)
    for item in (*offered, *found):
        if item.name == name:
            return item
    known = ", ".join(dict.fromkeys(s.name for s in (*offered, *found))) or "none"
    shown = name if len(name) <= 80 else name[:80] + "…"
    raise EnvError(f"{domain.name} has no scenario {shown!r} (it has: {known})")


def resolve_world(world: str | FictionalWorld | None) -> FictionalWorld | None:
    """A fictional world by name (shipped or the user's), from a .toml file, or as given."""
    if world is None or not isinstance(world, str):
        return world
    path = Path(world)
    if path.suffix.lower() == ".toml":
        try:
            return load_world_file(path)
        except WorldError as exc:
            raise EnvError(str(exc)) from None
    return world_named(world)


def world_named(name: str) -> FictionalWorld:
    """A fictional world by name (shipped or the user's); never a file."""
    found, _problems = list_worlds()
    for item in found:
        if item.name == name:
            return item
    known = ", ".join(w.name for w in found) or "none"
    raise EnvError(f"there is no fictional world {name!r} (there are: {known})")
