"""Where the world's files come from: what ships with the app, and the user's own folder
of prompts, scenarios, worlds and models.

The world never reads the settings: the front-end that did (the app, the command line, an
agent server, the Python environment) hands the user's folder in once, with
``use_user_folder``; until then only what ships is read.
"""

from __future__ import annotations

from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

_user_folder: Path | None = None


def use_user_folder(folder: Path | None) -> None:
    """Read the user's own files from ``folder`` (the config dir) from now on."""
    global _user_folder
    _user_folder = folder


def user_file(*parts: str) -> Path | None:
    """A path in the user's folder (None when no front-end gave one)."""
    return _user_folder.joinpath(*parts) if _user_folder is not None else None


def shipped(name: str) -> Traversable:
    """A file or folder shipped with the app (``prompts``, ``models.toml``).

    In a wheel they sit in ``agentworld_tui/_shipped``; in a source checkout they are at the
    repository's top level.
    """
    inside = resources.files("agentworld_tui") / "_shipped" / name
    if inside.is_file() or inside.is_dir():
        return inside
    return resources.files("agentworld_tui").joinpath("..", name)
