"""Settings and paths, in one place.

Settings live in ``config.toml`` in the platformdirs user config dir; the environment
variables ``AGENTWORLD_CONFIG_DIR`` and ``AGENTWORLD_DATA_DIR`` move the dirs (tests use
them), and command-line flags override the file. A malformed file never stops the app: the
problem is reported with its line and the defaults are used.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field, fields, replace
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

APP_NAME = "agentworld-tui"


def config_dir() -> Path:
    env = os.environ.get("AGENTWORLD_CONFIG_DIR")
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_config_dir(APP_NAME, appauthor=False))


def data_dir() -> Path:
    env = os.environ.get("AGENTWORLD_DATA_DIR")
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))


def settings_path() -> Path:
    return config_dir() / "config.toml"


def log_path() -> Path:
    return data_dir() / "agentworld.log"


def sessions_dir() -> Path:
    return data_dir() / "sessions"


def shipped(name: str) -> Traversable:
    """A file or folder shipped with the app (``prompts``, ``models.toml``).

    In a wheel they sit in ``agentworld_tui/_shipped``; in a source checkout they are at the
    repository's top level.
    """
    inside = resources.files("agentworld_tui") / "_shipped" / name
    if inside.is_file() or inside.is_dir():
        return inside
    return resources.files("agentworld_tui").joinpath("..", name)


def physical_cores() -> int:
    """Physical core count (llama.cpp runs best with one thread per physical core)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return max(1, (os.cpu_count() or 2) // 2)
    cores: set[tuple[str, str]] = set()
    phys = core = ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "physical id":
            phys = value.strip()
        elif key == "core id":
            core = value.strip()
            cores.add((phys, core))
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(len(cores) or (usable or 1), usable or 1))


@dataclass
class ModelSettings:
    """The local model: ``[model]`` in config.toml."""

    path: str = ""
    """A GGUF file; empty when no model is configured."""
    n_ctx: int = 0
    """Context size; 0 picks one that fits the model and the machine."""
    gpu_layers: int = -1
    """Layers to offload; -1 = all when the llama.cpp build can offload, else 0."""
    threads: int = 0
    """CPU threads; 0 = the number of physical cores."""


@dataclass
class ServerSettings:
    """A remote OpenAI-compatible server (vLLM, SGLang, llama.cpp server): ``[server]``."""

    url: str = ""
    """An OpenAI-compatible endpoint; when set it replaces the local model."""
    model: str = ""
    api_key_env: str = ""
    """Name of the environment variable holding the API key (the key is never stored)."""


@dataclass
class GenerationSettings:
    """Sampling and the reasoning budget: ``[generation]``."""

    temperature: float = 0.6
    top_p: float = 0.95
    top_k: int = 20
    max_tokens: int = 32768
    reasoning_budget: int = 0
    """Reasoning tokens per turn before the model is told to answer; 0 = no cap."""
    enable_thinking: bool = True
    seed: int = -1


@dataclass
class UISettings:
    """The app's own options: ``[ui]`` (the wait key's seconds, screenshots, the reasoning panel)."""

    wait_seconds: float = 5.0
    screenshots_dir: str = ""
    show_reasoning: bool = True


@dataclass
class Settings:
    """Everything config.toml can set, with command-line flags applied on top."""

    model: ModelSettings = field(default_factory=ModelSettings)
    server: ServerSettings = field(default_factory=ServerSettings)
    generation: GenerationSettings = field(default_factory=GenerationSettings)
    ui: UISettings = field(default_factory=UISettings)
    log_level: str = "INFO"


@dataclass(frozen=True)
class SettingsLoad:
    """Settings as read from a file, and what was wrong in it (left at its default)."""

    settings: Settings
    problems: list[str]
    path: Path


def _apply(section: Any, values: dict[str, Any], where: str, problems: list[str]) -> Any:
    known = {f.name: f for f in fields(section)}
    changes: dict[str, Any] = {}
    for key, value in values.items():
        spec = known.get(key)
        if spec is None:
            problems.append(f"{where}: unknown key {key!r} (ignored)")
            continue
        default = getattr(section, key)
        if isinstance(default, bool) != isinstance(value, bool) or not isinstance(
            value, type(default) if not isinstance(default, float) else (int, float)
        ):
            problems.append(
                f"{where}.{key}: expected {type(default).__name__}, got {value!r} (default used)"
            )
            continue
        changes[key] = float(value) if isinstance(default, float) else value
    return replace(section, **changes)


def load_settings(path: Path | None = None) -> SettingsLoad:
    """Read the settings file; every problem becomes a message, never an exception."""
    path = path or settings_path()
    problems: list[str] = []
    settings = Settings()
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return SettingsLoad(settings, problems, path)
    except (OSError, UnicodeDecodeError) as exc:
        return SettingsLoad(settings, [f"{path}: cannot read ({exc}); using defaults"], path)
    try:
        data = tomllib.loads(raw)
    except tomllib.TOMLDecodeError as exc:
        return SettingsLoad(settings, [f"{path}: {exc}; using defaults"], path)
    for key, value in data.items():
        if key in ("model", "server", "generation", "ui"):
            if not isinstance(value, dict):
                problems.append(f"{path}: [{key}] must be a table (ignored)")
                continue
            section = getattr(settings, key)
            setattr(settings, key, _apply(section, value, f"{path}: [{key}]", problems))
        elif key == "log_level" and isinstance(value, str):
            settings.log_level = value
        else:
            problems.append(f"{path}: unknown key {key!r} (ignored)")
    return SettingsLoad(settings, problems, path)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    text = str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{text}"'


def dump_settings(settings: Settings) -> str:
    lines = [f"log_level = {_toml_value(settings.log_level)}"]
    for name in ("model", "server", "generation", "ui"):
        section = getattr(settings, name)
        lines.append(f"\n[{name}]")
        lines += [f"{f.name} = {_toml_value(getattr(section, f.name))}" for f in fields(section)]
    return "\n".join(lines) + "\n"


def save_settings(settings: Settings, path: Path | None = None) -> Path:
    from agentworld_tui.world.store import write_atomic

    path = path or settings_path()
    write_atomic(path, dump_settings(settings).encode("utf-8"))
    return path


def setup_logging(level: str = "INFO") -> Path | None:
    """Log to a file in the data dir (llama.cpp's own messages included), never the screen."""
    import logging

    root = logging.getLogger("agentworld")
    for handler in list(root.handlers):
        root.removeHandler(handler)
    root.propagate = False
    numeric = logging.getLevelName(level.upper())
    root.setLevel(numeric if isinstance(numeric, int) else logging.INFO)
    path = log_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handler: logging.Handler = logging.FileHandler(path, encoding="utf-8")
    except OSError:
        root.addHandler(logging.NullHandler())
        return None
    handler.setFormatter(
        logging.Formatter("%(asctime)s %(levelname)s %(name)s [%(threadName)s]: %(message)s")
    )
    root.addHandler(handler)
    return path
