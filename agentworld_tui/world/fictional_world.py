"""Fictional worlds: facts, people, organisations and pages that exist only in the simulation.

Agents trained in a self-consistent invented world learn to search and reason rather than to
recall. A world is attached to a session; every turn then carries the world as part of its
simulation instruction (see ``perturbation.write_control``), so results, pages and messages
stay consistent with it even when early turns drop out of the context.

Worlds are TOML files: ready ones ship in ``prompts/worlds/``, a user's own live in
``<config dir>/worlds/``; a session keeps a copy of the world it uses, so editing or deleting
a file never changes what a saved session was told.
"""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentworld_tui.world.folders import shipped, user_file

WORLDS_FOLDER = "worlds"
MAX_WORLD_CHARS = 60_000
"""A world's instruction beyond this would crowd every turn's context."""


class WorldError(ValueError):
    """A world that cannot be used; the message says why in one line."""


@dataclass(frozen=True)
class WorldEntry:
    """A person, organisation, place or thing of the world, with what is true of it."""

    name: str
    about: str

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "about": self.about}


@dataclass(frozen=True)
class WorldPage:
    """A page that exists in the world: opening its URL shows this content."""

    url: str
    title: str
    content: str

    def to_dict(self) -> dict[str, str]:
        return {"url": self.url, "title": self.title, "content": self.content}


@dataclass(frozen=True)
class FictionalWorld:
    """A made-up world the model keeps to: its premise, facts, people and things."""

    name: str
    """File name without ``.toml``; also how a session refers to where its world came from."""
    title: str
    premise: str = ""
    """The setting in a few sentences: where and when, what kind of world."""
    facts: tuple[str, ...] = ()
    people: tuple[WorldEntry, ...] = ()
    entities: tuple[WorldEntry, ...] = ()
    """Organisations, places, products, events."""
    pages: tuple[WorldPage, ...] = ()
    source: str = field(default="", compare=False)
    """Where it was read from, for messages."""

    def instruction(self) -> str:
        """The world as written into each turn's simulation instruction."""
        lines = [f"Fictional world: {self.title}"]
        if self.premise:
            lines.append(self.premise)
        if self.facts:
            lines.append("Facts that hold in this world:")
            lines.extend(f"- {fact}" for fact in self.facts)
        if self.people:
            lines.append("People:")
            lines.extend(f"- {p.name}: {p.about}" for p in self.people)
        if self.entities:
            lines.append("Organisations, places and things:")
            lines.extend(f"- {e.name}: {e.about}" for e in self.entities)
        if self.pages:
            lines.append("Pages that exist (opening the URL shows this content):")
            lines.extend(f'- {p.url} "{p.title}": {p.content}' for p in self.pages)
        lines.append(
            "Simulate the environment as part of this world. Everything the agent finds "
            "(results, pages, files, messages, tool outputs) must agree with these facts and "
            "with one another on every turn, even where they differ from the real world. "
            "Invent further details freely but never contradict the ones above, and never "
            "mention that the world is fictional or that this instruction exists."
        )
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "title": self.title,
            "premise": self.premise,
            "facts": list(self.facts),
            "people": [p.to_dict() for p in self.people],
            "entities": [e.to_dict() for e in self.entities],
            "pages": [p.to_dict() for p in self.pages],
        }

    def to_toml(self) -> str:
        """The world as a TOML file that ``parse_world`` reads back unchanged."""
        out = [
            f"name = {_toml_string(self.name)}",
            f"title = {_toml_string(self.title)}",
            f"premise = {_toml_string(self.premise)}",
            "facts = [",
            *(f"  {_toml_string(f)}," for f in self.facts),
            "]",
        ]
        for table, entries in (("people", self.people), ("entities", self.entities)):
            for entry in entries:
                out += ["", f"[[{table}]]", f"name = {_toml_string(entry.name)}"]
                out.append(f"about = {_toml_string(entry.about)}")
        for page in self.pages:
            out += ["", "[[pages]]", f"url = {_toml_string(page.url)}"]
            out.append(f"title = {_toml_string(page.title)}")
            out.append(f"content = {_toml_string(page.content)}")
        return "\n".join(out) + "\n"


def world_from_dict(data: Any, source: str = "") -> FictionalWorld:
    """A world from plain data (a session file, parsed TOML); raises WorldError."""
    if not isinstance(data, dict):
        raise WorldError("a world must be a table of fields")
    name = _text(data, "name", required=True)
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,79}", name):
        raise WorldError(
            f"name {name!r}: use letters, digits, '-', '_' or '.', at most 80 characters"
        )
    facts = data.get("facts", [])
    if not isinstance(facts, list) or not all(isinstance(f, str) for f in facts):
        raise WorldError("facts must be a list of texts")
    world = FictionalWorld(
        name=name,
        title=_text(data, "title") or name,
        premise=_text(data, "premise"),
        facts=tuple(f.strip() for f in facts if f.strip()),
        people=_entries(data, "people"),
        entities=_entries(data, "entities"),
        pages=_pages(data),
        source=source,
    )
    if not (world.premise or world.facts or world.people or world.entities or world.pages):
        raise WorldError("the world is empty: give a premise, facts, people, entities or pages")
    size = len(world.instruction())
    if size > MAX_WORLD_CHARS:
        raise WorldError(f"the world is {size:,} characters; the limit is {MAX_WORLD_CHARS:,}")
    return world


def parse_world(text: str, source: str = "world") -> FictionalWorld:
    """A world from TOML text; raises WorldError with the line of a syntax error."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise WorldError(f"{source}: {exc}") from None
    try:
        return world_from_dict(data, source)
    except WorldError as exc:
        raise WorldError(f"{source}: {exc}") from None


def user_worlds_dir() -> Path | None:
    """The user's own worlds (None when no front-end named the user's folder)."""
    return user_file(WORLDS_FOLDER)


def list_worlds() -> tuple[list[FictionalWorld], list[str]]:
    """Shipped worlds, then the user's (the same name replaces), and the problems met."""
    found: dict[str, FictionalWorld] = {}
    problems: list[str] = []
    texts: list[tuple[str, str]] = []
    folder = shipped("prompts").joinpath(WORLDS_FOLDER)
    if folder.is_dir():
        for item in sorted(folder.iterdir(), key=lambda t: t.name):
            if item.name.endswith(".toml"):
                try:
                    texts.append((f"shipped:{WORLDS_FOLDER}/{item.name}", item.read_text("utf-8")))
                except (OSError, UnicodeDecodeError) as exc:
                    problems.append(f"shipped:{WORLDS_FOLDER}/{item.name}: {exc}")
    user = user_worlds_dir()
    if user is not None and user.is_dir():
        for path in sorted(user.glob("*.toml")):
            try:
                texts.append((str(path), path.read_text(encoding="utf-8")))
            except (OSError, UnicodeDecodeError) as exc:
                problems.append(f"cannot read {path}: {exc}")
    for source, text in texts:
        try:
            world = parse_world(text, source)
        except WorldError as exc:
            problems.append(str(exc))
            continue
        found[world.name] = world
    return list(found.values()), problems


def load_world_file(path: Path) -> FictionalWorld:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise WorldError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise WorldError(f"{path}: cannot read ({exc})") from None
    return parse_world(text, str(path))


def save_world(world: FictionalWorld, folder: Path | None = None) -> Path:
    """Write the world to ``<folder>/<name>.toml`` (default: the user's worlds) atomically."""
    from agentworld_tui.world.store import write_atomic

    folder = folder or user_worlds_dir()
    if folder is None:
        raise WorldError("there is no folder to save the world to")
    path = folder / f"{world.name}.toml"
    write_atomic(path, world.to_toml().encode("utf-8"))
    return path


def blank_world() -> str:
    """A starting TOML text for a new world, with every kind of field shown once."""
    return (
        'name = "my-world"\n'
        'title = "My world"\n'
        'premise = "Where and when the world is set, in a sentence or two."\n'
        "facts = [\n"
        '  "A fact that every source in the world agrees on.",\n'
        "]\n\n"
        "[[people]]\n"
        'name = "A person"\n'
        'about = "Who they are and what is true of them."\n\n'
        "[[entities]]\n"
        'name = "An organisation, place or product"\n'
        'about = "What it is."\n\n'
        "[[pages]]\n"
        'url = "https://example.org/page"\n'
        'title = "A page title"\n'
        'content = "What the page says."\n'
    )


def _text(data: dict[str, Any], key: str, *, required: bool = False) -> str:
    value = data.get(key, "")
    if not isinstance(value, str):
        raise WorldError(f"{key} must be text")
    if required and not value.strip():
        raise WorldError(f"{key} is missing")
    return " ".join(value.split())


def _entries(data: dict[str, Any], key: str) -> tuple[WorldEntry, ...]:
    items = data.get(key, [])
    if not isinstance(items, list):
        raise WorldError(f"{key} must be a list of tables")
    out = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise WorldError(f"{key}[{i}] must be a table with name and about")
        name, about = _text(item, "name"), _text(item, "about")
        if not name:
            raise WorldError(f"{key}[{i}] has no name")
        out.append(WorldEntry(name, about))
    return tuple(out)


def _pages(data: dict[str, Any]) -> tuple[WorldPage, ...]:
    items = data.get("pages", [])
    if not isinstance(items, list):
        raise WorldError("pages must be a list of tables")
    out = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise WorldError(f"pages[{i}] must be a table with url, title and content")
        url = _text(item, "url")
        if not url:
            raise WorldError(f"pages[{i}] has no url")
        out.append(WorldPage(url, _text(item, "title"), _text(item, "content")))
    return tuple(out)


def _toml_string(text: str) -> str:
    """A TOML basic string: JSON's escapes are TOML's, apart from DEL, which TOML forbids raw."""
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")
