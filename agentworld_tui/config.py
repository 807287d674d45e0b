"""Settings and paths, in one place.

Settings live in ``config.toml`` in the platformdirs user config dir; the environment
variables ``AGENTWORLD_CONFIG_DIR``, ``AGENTWORLD_DATA_DIR`` and ``AGENTWORLD_CACHE_DIR``
move the dirs (tests use them), and command-line flags override the file. A malformed file never stops the app: the
problem is reported with its line and the defaults are used.
"""

from __future__ import annotations

import logging
import math
import os
import stat
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args, get_type_hints

if TYPE_CHECKING:
    from pydantic import BaseModel

    from agentworld_tui.engines.base import GenerationParams
    from agentworld_tui.engines.factory import EngineSpec

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


def cache_dir() -> Path:
    """What can be made again if lost (which model each llama.cpp build runs safely)."""
    env = os.environ.get("AGENTWORLD_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir(APP_NAME, appauthor=False))


def settings_path() -> Path:
    return config_dir() / "config.toml"


def log_path() -> Path:
    return data_dir() / "agentworld.log"


def sessions_dir() -> Path:
    return data_dir() / "sessions"


MAX_CONTEXT = 1 << 24
"""The largest context a setting may ask for (llama.cpp keeps it in 32 bits)."""
MAX_THREADS = min(1024, 4 * (os.cpu_count() or 1))
"""More threads than this only slows llama.cpp down (and tens of thousands crash it)."""
MAX_SEED = (1 << 32) - 1


@dataclass(frozen=True)
class Bounds:
    """The values a numeric setting accepts, both ends included."""

    low: float
    high: float

    def problem(self, value: float) -> str | None:
        """Why ``value`` is refused, or None when it is accepted."""
        if isinstance(value, float) and not math.isfinite(value):
            return f"must be a finite number {self}"
        if not self.low <= value <= self.high:
            return f"must be {self}"
        return None

    def __str__(self) -> str:
        return f"from {_plain(self.low)} to {_plain(self.high)}"


def _plain(number: float) -> str:
    return str(int(number)) if float(number).is_integer() else repr(number)


def _bounded(default: Any, low: float, high: float) -> Any:
    return field(default=default, metadata={"bounds": Bounds(low, high)})


def bounds_of(section: type[Any] | Any, name: str) -> Bounds | None:
    """The range of a numeric setting (``bounds_of(ModelSettings, "n_ctx")``)."""
    spec = next((f for f in fields(section) if f.name == name), None)
    return None if spec is None else spec.metadata.get("bounds")


@dataclass
class ModelSettings:
    """The local model: ``[model]`` in config.toml."""

    path: str = ""
    """A GGUF file; empty when no model is configured."""
    n_ctx: int = _bounded(0, 0, MAX_CONTEXT)
    """Context size; 0 picks one that fits the model and the machine."""
    gpu_layers: int = _bounded(-1, -1, 4096)
    """Layers to offload; -1 = all when the llama.cpp build can offload, else 0."""
    threads: int = _bounded(0, 0, MAX_THREADS)
    """CPU threads; 0 = the number of physical cores."""
    engine: Literal["llama-cpp-python", "xllamacpp"] = "llama-cpp-python"
    """The in-process engine: "llama-cpp-python" (one generation at a time) or "xllamacpp"
    (llama.cpp's server engine: ``slots`` generations at once)."""
    slots: int = _bounded(0, 0, 256)
    """xllamacpp's parallel slots; 0 = as many as the machine's memory holds at ``n_ctx``
    each (at most 8)."""


@dataclass
class ServerSettings:
    """A remote OpenAI-compatible server (vLLM, SGLang, llama.cpp server): ``[server]``."""

    url: str = ""
    """An OpenAI-compatible endpoint; when set it replaces the local model."""
    model: str = ""
    api_key_env: str = ""
    """Name of the environment variable holding the API key (the key is never stored)."""
    idle_timeout: float = _bounded(120.0, 1, 86400)
    """Seconds to wait for the next piece of a reply before giving up on the server."""
    concurrency: int = _bounded(8, 1, 1024)
    """Turns sent to the server at once (sessions of several tabs, agents, environments)."""


@dataclass
class GenerationSettings:
    """Sampling and the reasoning budget: ``[generation]``."""

    temperature: float = _bounded(0.6, 0, 10)
    top_p: float = _bounded(0.95, 0, 1)
    top_k: int = _bounded(20, -1, 1_000_000)
    """0 or -1: no limit."""
    max_tokens: int = _bounded(32768, 1, MAX_CONTEXT)
    reasoning_budget: int = _bounded(0, 0, MAX_CONTEXT)
    """Reasoning tokens per turn before the model is told to answer; 0 = no cap."""
    enable_thinking: bool = True
    seed: int = _bounded(-1, -1, MAX_SEED)
    """-1: a new random seed each time."""


@dataclass
class UISettings:
    """The app's own options: ``[ui]`` (the wait key's seconds, screenshots, the reasoning
    panel, the port Ctrl+B serves a tab to agents on)."""

    wait_seconds: float = _bounded(5.0, 0.1, 3600)
    screenshots_dir: str = ""
    show_reasoning: bool = True
    agent_port: int = _bounded(0, 0, 65535)
    """The port on 127.0.0.1 the first tab served to agents listens on (0: any free one)."""


SECTIONS: dict[str, type[Any]] = {
    "model": ModelSettings,
    "server": ServerSettings,
    "generation": GenerationSettings,
    "ui": UISettings,
}
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


@dataclass
class Settings:
    """Everything config.toml can set, with command-line flags applied on top."""

    model: ModelSettings = field(default_factory=ModelSettings)
    server: ServerSettings = field(default_factory=ServerSettings)
    generation: GenerationSettings = field(default_factory=GenerationSettings)
    ui: UISettings = field(default_factory=UISettings)
    log_level: str = "INFO"
    problems: list[str] = field(default_factory=list, compare=False)
    """What was wrong with the settings file these came from (summed up), to show."""

    def engine_spec(self) -> EngineSpec:
        """The engine these settings name, as a value the engines' factory takes."""
        from agentworld_tui.engines.factory import EngineSpec

        m, s = self.model, self.server
        if s.url:
            return EngineSpec(
                server=s.url,
                model=s.model,
                api_key_env=s.api_key_env,
                n_ctx=m.n_ctx,
                idle_timeout=s.idle_timeout,
            )
        engine = "" if m.engine == "llama-cpp-python" else m.engine
        return EngineSpec(
            model_path=m.path,
            n_ctx=m.n_ctx,
            gpu_layers=m.gpu_layers,
            threads=m.threads,
            engine=engine,
            slots=m.slots or (auto_slots(m.path, m.n_ctx) if engine == "xllamacpp" else 0),
            probe_cache=str(cache_dir()),
        )

    def generation_params(self) -> GenerationParams:
        """The generation settings as a value the simulator takes."""
        from agentworld_tui.engines.base import GenerationParams

        g = self.generation
        return GenerationParams(
            temperature=g.temperature,
            top_p=g.top_p,
            top_k=g.top_k,
            max_tokens=g.max_tokens,
            reasoning_budget=g.reasoning_budget,
            enable_thinking=g.enable_thinking,
            seed=g.seed,
        )


MAX_AUTO_SLOTS = 8


def auto_slots(model_path: str, n_ctx: int) -> int:
    """Slots for xllamacpp when none are set: as many as the free RAM holds once the
    weights are in, each with its context's KV cache and recurrent state (at most
    ``MAX_AUTO_SLOTS``, at least 1)."""
    from agentworld_tui.models.fit import parallel_slots, read_shape
    from agentworld_tui.models.hardware import machine_memory

    try:
        shape = read_shape(Path(model_path).expanduser())
    except (ValueError, OSError):
        return 1
    free = machine_memory(gpus=False).ram_available
    return parallel_slots(shape, n_ctx, free, limit=MAX_AUTO_SLOTS)


PROBLEMS_SHOWN = 5
"""A file with thousands of mistakes is summed up in this many lines."""


@dataclass(frozen=True)
class SettingsLoad:
    """Settings as read from a file, and what was wrong in it (left at its default)."""

    settings: Settings
    problems: list[str]
    path: Path

    def summary(self, limit: int = PROBLEMS_SHOWN) -> list[str]:
        """The problems in at most ``limit`` lines: the first ones, then how many more."""
        from agentworld_tui.world.plural import counted

        if len(self.problems) <= limit:
            return list(self.problems)
        rest = len(self.problems) - (limit - 1)
        more = f"... and {counted(rest, 'more problem', 'more problems')} in {self.path}"
        return [*self.problems[: limit - 1], more]


def _shown(value: object, limit: int = 40) -> str:
    """``value`` as a message quotes it: repr (controls escaped), cut to ``limit``."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**limit:
        return "a number with too many digits"
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _model(section: type[Any]) -> type[BaseModel]:
    """The pydantic model that checks one section (a table of config.toml) as it is
    declared: each key's type, strictly (``true`` is not a number, ``5`` not text), its
    range (``_bounded``), its choices (``Literal``), and no unknown keys. Built when a file
    is first read, so that a start without one does not load pydantic."""
    model = _MODELS.get(section)
    if model is not None:
        return model
    from pydantic import ConfigDict, Field, create_model

    types = get_type_hints(section)
    declared: dict[str, Any] = {}
    for spec in fields(section):
        bounds = bounds_of(section, spec.name)
        low, high = (None, None) if bounds is None else (bounds.low, bounds.high)
        declared[spec.name] = (types[spec.name], Field(spec.default, ge=low, le=high))
    strict = ConfigDict(strict=True, extra="forbid", allow_inf_nan=False)
    model = _MODELS[section] = create_model(section.__name__, __config__=strict, **declared)
    return model


_MODELS: dict[type[Any], type[BaseModel]] = {}


def _problem(section: type[Any], key: str, error: Mapping[str, Any]) -> str:
    """What the model refused, in the words of the settings' messages."""
    value, kind = error["input"], error["type"]
    bounds = bounds_of(section, key)
    if bounds is not None and kind in ("greater_than_equal", "less_than_equal"):
        return f"{_shown(value)} must be {bounds}"
    if bounds is not None and kind == "finite_number":
        return f"{_shown(value)} must be a finite number {bounds}"
    if kind == "literal_error" and isinstance(value, str):
        choices = get_args(get_type_hints(section)[key])
        return f"{_shown(value)} must be one of {', '.join(choices)}"
    return f"expected {type(getattr(section(), key)).__name__}, got {_shown(value)}"


def _refused(section: type[Any], values: dict[str, Any]) -> dict[str, str | None]:
    """Each key of ``values`` the section refuses: why (None for a key it does not have)."""
    from pydantic import ValidationError

    try:
        _model(section).model_validate(values)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
    else:
        return {}
    refused: dict[str, str | None] = {}
    for error in errors:
        key = str(error["loc"][0])
        if key not in refused:
            unknown = error["type"] == "extra_forbidden"
            refused[key] = None if unknown else _problem(section, key, error)
    return {key: refused[key] for key in values if key in refused}


def _checked(section: type[Any], key: str, value: Any) -> tuple[Any, str | None]:
    """``value`` as the setting stores it, or the reason it cannot be used."""
    problem = _refused(section, {key: value}).get(key)
    if problem is not None:
        return None, problem
    return getattr(_model(section).model_validate({key: value}), key), None


def _apply(section: Any, values: dict[str, Any], where: str, problems: list[str]) -> Any:
    refused = _refused(type(section), values)
    for key, problem in refused.items():
        if problem is None:
            problems.append(f"{where}: unknown key {_shown(key)} (ignored)")
        else:
            problems.append(f"{where}.{key}: {problem} (default used)")
    kept = {k: v for k, v in values.items() if k not in refused}
    checked = _model(type(section)).model_validate(kept)
    return replace(section, **{key: getattr(checked, key) for key in kept})


def _parse(raw: str) -> dict[str, Any]:
    """Parse TOML; every way it can fail (deep nesting, a number of 5,000 digits) is a
    ValueError whose message says where and why."""
    try:
        return tomllib.loads(raw)
    except RecursionError:
        raise ValueError("nested too deeply to read") from None


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
        data = _parse(raw)
    except ValueError as exc:
        return SettingsLoad(settings, [f"{path}: {exc}; using defaults"], path)
    for key, value in data.items():
        if key in SECTIONS:
            if not isinstance(value, dict):
                problems.append(f"{path}: [{key}] must be a table (ignored)")
                continue
            section = getattr(settings, key)
            setattr(settings, key, _apply(section, value, f"{path}: [{key}]", problems))
        elif key == "log_level":
            if isinstance(value, str) and value.upper() in LOG_LEVELS:
                settings.log_level = value.upper()
            else:
                problems.append(
                    f"{path}: log_level must be one of {', '.join(LOG_LEVELS)} (default used)"
                )
        else:
            problems.append(f"{path}: unknown key {_shown(key)} (ignored)")
    return SettingsLoad(settings, problems, path)


class SettingsFileError(Exception):
    """The settings file cannot be changed safely; it was left as it was."""


def update_settings_file(changes: dict[str, Any], path: Path | None = None) -> Path:
    """Set ``changes`` (``{"model.path": "m.gguf", "server.url": ""}``) in the settings file
    and leave everything else in it as it was, byte for byte: comments, order, other keys,
    unknown ones too. Only the keys given are written, so a flag given for one run never
    ends up in the file. A file that cannot be parsed is refused (SettingsFileError) and
    not touched: replacing it would lose what the user wrote.
    """
    import tomlkit
    from tomlkit.exceptions import TOMLKitError

    path = path or settings_path()
    checked: dict[tuple[str, str], Any] = {}
    for dotted, value in changes.items():
        name, _, key = dotted.partition(".")
        section = SECTIONS.get(name)
        if section is None or key not in {f.name for f in fields(section)}:
            raise ValueError(f"no setting {dotted!r}")
        stored, problem = _checked(section, key, value)
        if problem is not None:
            raise ValueError(f"{dotted}: {problem}")
        checked[name, key] = stored
    target = Path(os.path.realpath(path))
    try:
        raw = target.read_bytes()
    except FileNotFoundError:
        raw = b""
    except OSError as exc:
        raise SettingsFileError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
        _parse(text)
        document = tomlkit.parse(text)
    except UnicodeDecodeError:
        raise SettingsFileError(f"{path} is not UTF-8 text; it was not changed") from None
    except (ValueError, TOMLKitError, RecursionError) as exc:
        raise SettingsFileError(
            f"{path} cannot be read ({exc}); it was not changed: fix it, then try again"
        ) from None
    for (name, key), value in checked.items():
        table = document.get(name)
        if table is None:
            if value == getattr(SECTIONS[name](), key):
                continue  # absent already means this value
            table = tomlkit.table()
            document[name] = table
        if not isinstance(table, dict):
            raise SettingsFileError(f"{path}: [{name}] is not a table; it was not changed")
        table[key] = value
    updated = tomlkit.dumps(document)
    try:
        tomllib.loads(updated)
    except tomllib.TOMLDecodeError as exc:  # a tomlkit fault: never write what cannot be read
        raise SettingsFileError(f"cannot update {path} ({exc}); it was not changed") from None
    if updated.encode("utf-8") == raw:
        return path
    from agentworld_tui.world.store import write_atomic

    try:
        mode = stat.S_IMODE(target.stat().st_mode) if raw else None
        write_atomic(target, updated.encode("utf-8"))
        if mode is not None:
            target.chmod(mode)
    except OSError as exc:
        raise SettingsFileError(f"cannot write {path}: {exc.strerror or exc}") from None
    return path


def setup_logging(level: str = "INFO") -> Path | None:
    """Log to a file in the data dir (llama.cpp's own messages included), never the screen.

    Every record is sanitized on its way to the file: log lines quote servers, files and
    model output.
    """
    from agentworld_tui.world.sanitize import SanitizingFormatter

    root = logging.getLogger("agentworld")
    for old in list(root.handlers):
        root.removeHandler(old)
    root.propagate = False
    numeric = logging.getLevelName(level.upper())
    root.setLevel(numeric if isinstance(numeric, int) else logging.INFO)
    path = log_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handler = logging.FileHandler(path, encoding="utf-8")
    except OSError:
        root.addHandler(logging.NullHandler())
        return None
    handler.setFormatter(
        SanitizingFormatter("%(asctime)s %(levelname)s %(name)s [%(threadName)s]: %(message)s")
    )
    root.addHandler(handler)
    return path
