"""The one-line input every field of the app is: Textual's Input, whose value is
sanitized however it is filled (typed, pasted, or set from a file, a server or an agent),
so a field filled from untrusted text shows it clean and hands it on clean."""

from __future__ import annotations

from textual.widgets import Input

from agentworld_tui.world.sanitize import sanitize


class Field(Input):
    def validate_value(self, value: str) -> str:
        """Textual calls this for every value set, the first included."""
        return " ".join(sanitize(value).split("\n"))
