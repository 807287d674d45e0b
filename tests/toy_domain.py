"""A domain of the test's own, outside the package: a key-value store. Everything a new
domain needs is this module and a prompts folder (the test writes it); ``DomainBase``
gives the rest (the generic pane, an ``act`` tool for agents, the turn's Markdown)."""

from __future__ import annotations

from agentworld_tui.domains.base import DomainBase
from agentworld_tui.world.action import Action, ActionError
from agentworld_tui.world.domain import Scenario

USAGE = "write get KEY or set KEY VALUE"


class ToyDomain(DomainBase):
    name = "toy"
    title = "Toy"
    lexer = "json"

    def parse_action(self, text: str, scenario: Scenario) -> Action:
        words = text.split()
        if words[:1] == ["get"] and len(words) == 2:
            return self.make_action({"op": "get", "key": words[1]}, scenario)
        if words[:1] == ["set"] and len(words) == 3:
            return self.make_action({"op": "set", "key": words[1], "value": words[2]}, scenario)
        raise ActionError(USAGE)

    def make_action(self, value: object, scenario: Scenario) -> Action:
        """The action's JSON value: ``{"op": "get", "key": ...}`` or with a value to set."""
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            raise ActionError(USAGE)
        keys = {"get": {"op", "key"}, "set": {"op", "key", "value"}}.get(value.get("op", ""))
        if keys != set(value):
            raise ActionError(USAGE)
        label = " ".join(value[k] for k in ("op", "key", "value") if k in value)
        return Action(self.name, dict(value), label)

    def prompt_values(self, scenario: Scenario) -> dict[str, str]:
        return {"store": scenario.state}
