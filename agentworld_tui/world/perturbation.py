"""Control instructions: steering what the simulated environment does next.

A world model can be told to misbehave on purpose (a full disk, a rate limit, a popup) so
that an agent meets the failures real environments produce now and then. The instruction is
written into the turn itself, as a ``**Simulation Instruction:**`` section right under the
``### Turn N`` heading, the same place the Search domain's benchmark turns carry theirs, so
it reaches the model with the action it applies to, stays in the history exactly as sent,
and travels inside every export of the turn.

Presets come from ``prompts/<domain>/perturbations.toml``; a user's file of the same name in
the config dir adds presets or replaces shipped ones with the same name.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from typing import Any

from agentworld_tui.world.folders import shipped
from agentworld_tui.world.prompts import user_prompts_dir

CONTROL_SECTION = "Simulation Instruction"
MAX_CONTROL_CHARS = 20_000
"""Longer instructions are refused: they would crowd the action out of the context."""
PERTURBATIONS_FILE = "perturbations.toml"


class ControlError(ValueError):
    """An instruction that cannot be used; the message says why, for display."""


@dataclass(frozen=True)
class Perturbation:
    """A ready control instruction from a domain's library."""

    name: str
    title: str
    instruction: str
    description: str = ""
    """What the agent will run into, for the picker (the model never sees it)."""


@dataclass(frozen=True)
class ControlInstruction:
    """The instruction a pane sends with its next turn, or with every turn until removed."""

    text: str
    persistent: bool = False
    """True: every turn until removed; False: the next turn only."""
    preset: str = ""
    """The preset's name when it came from the library ("" for free text)."""

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "persistent": self.persistent, "preset": self.preset}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ControlInstruction:
        return cls(
            text=str(data["text"]),
            persistent=bool(data.get("persistent", False)),
            preset=str(data.get("preset", "")),
        )


def control_instruction(
    text: str, *, persistent: bool = False, preset: str = ""
) -> ControlInstruction:
    """A checked instruction; raises ControlError for an empty or oversized one."""
    cleaned = text.strip()
    if not cleaned:
        raise ControlError("the control instruction is empty")
    if len(cleaned) > MAX_CONTROL_CHARS:
        raise ControlError(
            f"the control instruction is {len(cleaned):,} characters; "
            f"the limit is {MAX_CONTROL_CHARS:,}"
        )
    return ControlInstruction(cleaned, persistent, preset)


def preset_instruction(preset: Perturbation, *, persistent: bool = False) -> ControlInstruction:
    return control_instruction(preset.instruction, persistent=persistent, preset=preset.name)


def join_instructions(*parts: str) -> str:
    """The non-empty parts as one section body, in the order given."""
    return "\n\n".join(p.strip() for p in parts if p.strip())


def write_control(user_message: str, instruction: str) -> str:
    """``user_message`` with ``instruction`` in its Simulation Instruction section.

    Domains write their own sections straight under the heading; when the first of them is
    already a Simulation Instruction (Search with a target query), the new text opens that
    section instead of adding a second one with the same title.
    """
    body = instruction.strip()
    if not body:
        return user_message
    marker = f"**{CONTROL_SECTION}:**\n"
    heading, sep, rest = user_message.partition("\n\n")
    if not heading.startswith("### Turn") or not sep:
        return f"{marker}{body}\n\n{user_message}"
    if rest.startswith(marker):
        rest = rest[len(marker) :]
    return f"{heading}\n\n{marker}{body}\n\n{rest}"


def load_perturbations(domain: str) -> tuple[list[Perturbation], list[str]]:
    """The domain's presets: shipped ones, then the user's (same name replaces), and the
    problems met reading them."""
    problems: list[str] = []
    found: dict[str, Perturbation] = {}
    sources: list[tuple[str, str]] = []
    try:
        text = shipped("prompts").joinpath(domain, PERTURBATIONS_FILE).read_text(encoding="utf-8")
        sources.append((f"shipped:{domain}/{PERTURBATIONS_FILE}", text))
    except (OSError, UnicodeDecodeError):
        pass
    folder = user_prompts_dir()
    user = folder / domain / PERTURBATIONS_FILE if folder is not None else None
    if user is not None and user.exists():
        try:
            sources.append((str(user), user.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError) as exc:
            problems.append(f"cannot read {user}: {exc}")
    for source, text in sources:
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            problems.append(f"{source}: {exc}")
            continue
        entries = data.get("perturbation", [])
        if not isinstance(entries, list):
            problems.append(f"{source}: perturbation must be an array of tables")
            continue
        for entry in entries:
            preset, problem = _preset(entry)
            if preset is None:
                problems.append(f"{source}: {problem}")
            else:
                found[preset.name] = preset
    return list(found.values()), problems


def _preset(entry: object) -> tuple[Perturbation | None, str]:
    if not isinstance(entry, dict):
        return None, "a [[perturbation]] entry is not a table"
    name, instruction = entry.get("name"), entry.get("instruction")
    if not isinstance(name, str) or not name.strip():
        return None, "a [[perturbation]] without a name was skipped"
    if not isinstance(instruction, str) or not instruction.strip():
        return None, f"perturbation {name!r} has no instruction and was skipped"
    title = entry.get("title", name)
    description = entry.get("description", "")
    return (
        Perturbation(
            name.strip(),
            str(title).strip() or name.strip(),
            " ".join(instruction.split()),
            " ".join(str(description).split()),
        ),
        "",
    )
