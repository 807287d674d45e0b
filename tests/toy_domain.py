"""A domain of the test's own, outside the package: a key-value store. Everything a new
domain needs is this module and a prompts folder (the test writes it)."""

from __future__ import annotations

import json

from agentworld_tui.domains.turn import turn_markdown
from agentworld_tui.world.action import Action, ActionError
from agentworld_tui.world.domain import Scenario


class ToyDomain:
    name = "toy"
    title = "Toy"
    lexer = "json"
    replaces_state = False
    editor_language = "text"

    def parse_action(self, text: str, scenario: Scenario) -> Action:
        words = text.split()
        if not words or words[0] not in ("get", "set"):
            raise ActionError("write get KEY or set KEY VALUE")
        if words[0] == "get" and len(words) == 2:
            return Action(self.name, {"op": "get", "key": words[1]}, text.strip())
        if words[0] == "set" and len(words) == 3:
            payload = {"op": "set", "key": words[1], "value": words[2]}
            return Action(self.name, payload, text.strip())
        raise ActionError("write get KEY or set KEY VALUE")

    def render_turn(self, number: int, action: Action, state: str | None) -> str:
        return turn_markdown(number, json.dumps(action.payload), state=state)

    def prompt_values(self, scenario: Scenario) -> dict[str, str]:
        return {"store": scenario.state}

    def observation_lexer(self, action: Action, observation: str) -> str:
        return self.lexer
