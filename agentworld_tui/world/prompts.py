"""The domains' prompt templates: shipped ones, and a user's own that override them.

A template is plain text with ``{{name}}`` placeholders that the session fills (the
scenario, tool definitions, a task instruction...). A file ``prompts/<domain>/<kind>.txt``
in the user's config dir replaces the shipped one; an unreadable override is reported and
the shipped template is used.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from agentworld_tui.world.domain import Scenario
from agentworld_tui.world.folders import shipped, user_file

_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


@dataclass(frozen=True)
class PromptTemplate:
    """A system prompt template, where it was read from, and what was wrong with it."""

    text: str
    source: str
    problems: list[str] = field(default_factory=list)

    def render(self, values: dict[str, str]) -> str:
        return render_template(self.text, values)


def render_template(text: str, values: dict[str, str]) -> str:
    """Fill ``{{name}}`` placeholders; a placeholder without a value becomes empty."""
    rendered = _PLACEHOLDER.sub(lambda m: values.get(m.group(1), ""), text)
    return re.sub(r"\n{3,}", "\n\n", rendered).strip() + "\n"


def user_prompts_dir() -> Path | None:
    """The user's own prompts (None when no front-end named the user's folder)."""
    return user_file("prompts")


def load_template(domain: str, kind: str = "system_prompt") -> PromptTemplate:
    name = f"{kind}.txt"
    problems: list[str] = []
    user = user_prompts_dir()
    override = user / domain / name if user is not None else None
    if override is not None and override.exists():
        try:
            text = override.read_text(encoding="utf-8")
            if text.strip():
                return PromptTemplate(text, str(override))
            problems.append(f"{override} is empty; using the shipped {kind}")
        except (OSError, UnicodeDecodeError) as exc:
            problems.append(f"cannot read {override} ({exc}); using the shipped {kind}")
    resource = shipped("prompts").joinpath(domain, name)
    try:
        return PromptTemplate(
            resource.read_text(encoding="utf-8"), f"shipped:{domain}/{name}", problems
        )
    except (OSError, UnicodeDecodeError) as exc:
        problems.append(f"the shipped {domain}/{name} is missing ({exc})")
        return PromptTemplate("", "missing", problems)


def load_scenarios(domain: str) -> tuple[list[Scenario], list[str]]:
    """The domain's ready scenarios: shipped ones, then the user's own (same name replaces)."""
    problems: list[str] = []
    found: dict[str, Scenario] = {}
    sources: list[tuple[str, str | None]] = []
    try:
        sources.append(
            (
                f"shipped:{domain}/scenarios.toml",
                shipped("prompts").joinpath(domain, "scenarios.toml").read_text(encoding="utf-8"),
            )
        )
    except (OSError, UnicodeDecodeError):
        sources.append((f"shipped:{domain}/scenarios.toml", None))
    folder = user_prompts_dir()
    user = folder / domain / "scenarios.toml" if folder is not None else None
    if user is not None and user.exists():
        try:
            sources.append((str(user), user.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError) as exc:
            problems.append(f"cannot read {user}: {exc}")
    for source, text in sources:
        if text is None:
            continue
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            problems.append(f"{source}: {exc}")
            continue
        for entry in data.get("scenario", []):
            if not isinstance(entry, dict) or "name" not in entry:
                problems.append(f"{source}: a [[scenario]] without a name was skipped")
                continue
            extras = {
                k: v for k, v in entry.items() if k not in ("name", "title", "description", "state")
            }
            found[str(entry["name"])] = Scenario.from_dict({**entry, "extras": extras})
    return list(found.values()), problems
