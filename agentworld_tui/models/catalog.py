"""The model catalog: which GGUF repositories and quantizations the app offers.

The shipped ``models.toml`` is read first, then ``models.toml`` in the user's config dir,
which adds entries or changes shipped ones field by field (matched by name). A malformed
file never stops the app: each problem becomes a message naming the file and the line, and
whatever could be read is kept (the shipped entries at the least). A number out of its
range (negative, NaN, infinite, absurdly large) is such a problem too; an entry built by code
has its numbers clamped into range, so no caller meets one. A name with terminal controls
is refused and a description has them removed: a models.toml may be a file someone sent.
"""

from __future__ import annotations

import math
import re
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from agentworld_tui.world.folders import shipped, user_file
from agentworld_tui.world.sanitize import one_line, sanitize

REPO_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")
QUANT_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_MODEL_HEADER = re.compile(r"^\s*\[\[\s*model\s*\]\]")
MAX_SIZE_GB = 10_000.0
"""Above any GGUF file made so far, many times over."""
MAX_KV_BYTES_PER_TOKEN = 1 << 26
MAX_LAYERS = 4096
_RANGES: dict[str, float] = {
    "size_gb": MAX_SIZE_GB,
    "kv_bytes_per_token": MAX_KV_BYTES_PER_TOKEN,
    "n_layers": MAX_LAYERS,
}
"""The largest value each numeric key may have; all must be 0 or more."""

_KNOWN_KEYS: dict[str, type | tuple[type, ...]] = {
    "name": str,
    "repo": str,
    "quant": str,
    "size_gb": (int, float),
    "description": str,
    "fallback": bool,
    "kv_bytes_per_token": int,
    "n_layers": int,
}


@dataclass(frozen=True)
class CatalogEntry:
    """One downloadable model: a Hub repository and the quantization tag to pick in it."""

    name: str
    repo: str
    quant: str
    size_gb: float = 0.0
    """Approximate download size; 0 when unknown."""
    description: str = ""
    fallback: bool = False
    """A general-purpose model offered for small machines, not trained as a world model."""
    kv_bytes_per_token: int = 0
    """KV-cache bytes per context token (f16), for estimates before download; 0 = unknown."""
    n_layers: int = 0
    """Transformer blocks, for partial-offload advice before download; 0 = unknown."""
    source: str = "shipped"
    """Where the entry (or its last override) came from."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "size_gb", float(_clamped(self.size_gb, MAX_SIZE_GB)))
        object.__setattr__(
            self,
            "kv_bytes_per_token",
            int(_clamped(self.kv_bytes_per_token, MAX_KV_BYTES_PER_TOKEN)),
        )
        object.__setattr__(self, "n_layers", int(_clamped(self.n_layers, MAX_LAYERS)))

    @property
    def size_bytes(self) -> int:
        return int(self.size_gb * 1e9)

    @property
    def spec(self) -> str:
        """``REPO:QUANT``: what ``agentworld models pull`` also accepts."""
        return f"{self.repo}:{self.quant}"


def _clamped(value: float, high: float) -> float:
    """``value`` within 0..high; NaN (and anything not a number) counts as 0 (unknown)."""
    if not isinstance(value, int | float) or _is_nan(value) or value < 0:
        return 0
    return min(value, high)


def _is_nan(value: float) -> bool:
    return isinstance(value, float) and math.isnan(value)


@dataclass
class Catalog:
    entries: list[CatalogEntry] = field(default_factory=list)
    default: str = ""
    """Name of the recommended entry."""
    problems: list[str] = field(default_factory=list)

    def get(self, name: str) -> CatalogEntry | None:
        for entry in self.entries:
            if entry.name == name:
                return entry
        lowered = name.lower()
        for entry in self.entries:
            if entry.name.lower() == lowered:
                return entry
        return None

    def recommended(self) -> CatalogEntry | None:
        return self.get(self.default) if self.default else None

    def siblings(self, entry: CatalogEntry) -> list[CatalogEntry]:
        """Entries that are the same model in other quantizations (same repository)."""
        return [e for e in self.entries if e.repo == entry.repo and e.name != entry.name]


class CatalogError(ValueError):
    """A model named on the command line that the catalog does not know."""


def resolve(catalog: Catalog, name_or_spec: str) -> CatalogEntry:
    """A catalog entry by name, or an ad-hoc entry from ``OWNER/REPO:QUANT``."""
    text = name_or_spec.strip()
    found = catalog.get(text)
    if found is not None:
        return found
    repo, sep, quant = text.rpartition(":")
    if sep and REPO_PATTERN.match(repo) and QUANT_PATTERN.match(quant):
        for entry in catalog.entries:
            if entry.repo.lower() == repo.lower() and entry.quant.lower() == quant.lower():
                return entry
        return CatalogEntry(name=f"{repo}:{quant}", repo=repo, quant=quant, source="command line")
    names = ", ".join(e.name for e in catalog.entries[:6])
    more = ", ..." if len(catalog.entries) > 6 else ""
    raise CatalogError(
        f"unknown model {text!r}: give a catalog name ({names}{more}; see "
        "'agentworld models list') or OWNER/REPO:QUANT"
    )


def user_catalog_path() -> Path | None:
    """The user's own models.toml (None when no front-end named the user's folder)."""
    return user_file("models.toml")


def load_catalog(user_path: Path | None = None) -> Catalog:
    """The shipped catalog with the user's additions and overrides applied."""
    catalog = Catalog()
    try:
        shipped_text = shipped("models.toml").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        catalog.problems.append(f"shipped models.toml: cannot read ({exc})")
    else:
        merge_catalog_text(catalog, shipped_text, "shipped models.toml", origin="shipped")
    path = user_path or user_catalog_path()
    if path is None:
        return catalog
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return catalog
    except (OSError, UnicodeDecodeError) as exc:
        catalog.problems.append(f"{path}: cannot read ({exc}); ignored")
        return catalog
    merge_catalog_text(catalog, text, str(path), origin=str(path))
    return catalog


def merge_catalog_text(catalog: Catalog, text: str, where: str, *, origin: str) -> None:
    """Apply one models.toml to ``catalog``; problems are appended, never raised."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        catalog.problems.append(f"{where}: {exc}; file ignored")
        return
    except ValueError:  # an integer longer than Python converts
        catalog.problems.append(f"{where}: a number with too many digits; file ignored")
        return
    except RecursionError:
        catalog.problems.append(f"{where}: nested too deeply; file ignored")
        return
    header_lines = [
        number
        for number, line in enumerate(text.splitlines(), start=1)
        if _MODEL_HEADER.match(line)
    ]
    lines = text.splitlines()
    for key, value in data.items():
        if key == "default":
            if isinstance(value, str) and value.strip():
                catalog.default = value.strip()
            else:
                line = _key_line(lines, "default", 0, len(lines))
                catalog.problems.append(
                    f"{where}:{line}: default must be a model name (a string); ignored"
                )
        elif key == "model":
            if not isinstance(value, list):
                line = _key_line(lines, "model", 0, len(lines))
                catalog.problems.append(
                    f"{where}:{line}: 'model' must be a list of [[model]] tables; ignored"
                )
                continue
            for index, table in enumerate(value):
                start = header_lines[index] if index < len(header_lines) else 0
                end = header_lines[index + 1] if index + 1 < len(header_lines) else len(lines) + 1
                _merge_entry(catalog, table, where, origin, lines, start, end)
        else:
            line = _key_line(lines, key, 0, len(lines))
            catalog.problems.append(f"{where}:{line}: unknown key {key!r}; ignored")
    if catalog.default and catalog.get(catalog.default) is None:
        line = _key_line(lines, "default", 0, len(lines)) if "default" in data else "?"
        catalog.problems.append(
            f"{where}:{line}: default {catalog.default!r} names no catalog entry; ignored"
        )
        catalog.default = ""


def _key_line(lines: list[str], key: str, start: int, end: int) -> int | str:
    """The 1-based line where ``key =`` is set between ``start`` and ``end``, for messages."""
    pattern = re.compile(rf"^\s*{re.escape(key)}\s*=")
    for number in range(max(start, 1), min(end, len(lines) + 1)):
        if pattern.match(lines[number - 1]):
            return number
    return start or "?"


def _merge_entry(
    catalog: Catalog,
    table: Any,
    where: str,
    origin: str,
    lines: list[str],
    start: int,
    end: int,
) -> None:
    here = f"{where}:{start or '?'}"
    if not isinstance(table, dict):
        catalog.problems.append(f"{here}: a [[model]] entry must be a table; ignored")
        return
    name = table.get("name")
    if not isinstance(name, str) or not name.strip():
        catalog.problems.append(f"{here}: [[model]] without a name; entry ignored")
        return
    name = name.strip()
    if sanitize(name) != name or "\t" in name or "\n" in name:
        line = _key_line(lines, "name", start, end)
        catalog.problems.append(
            f"{where}:{line}: model {name!r}: the name has control or formatting characters; "
            "entry ignored"
        )
        return
    values: dict[str, Any] = {}
    for key, value in table.items():
        expected = _KNOWN_KEYS.get(key)
        line = _key_line(lines, key, start, end)
        if expected is None:
            catalog.problems.append(f"{where}:{line}: model {name!r}: unknown key {key!r}; ignored")
            continue
        if isinstance(value, bool) and expected is not bool:
            value = None
        if value is None or not isinstance(value, expected):
            catalog.problems.append(
                f"{where}:{line}: model {name!r}: {key} has the wrong type ({value!r}); "
                "entry ignored"
            )
            return
        values[key] = value
    problem = _check_values(values)
    if problem:
        line = _key_line(lines, problem[0], start, end)
        catalog.problems.append(f"{where}:{line}: model {name!r}: {problem[1]}; entry ignored")
        return
    if "size_gb" in values:
        values["size_gb"] = float(values["size_gb"])
    if "description" in values:
        values["description"] = one_line(values["description"])
    values["name"] = name
    existing = next((i for i, e in enumerate(catalog.entries) if e.name == name), None)
    if existing is not None:
        catalog.entries[existing] = replace(catalog.entries[existing], **values, source=origin)
        return
    missing = [key for key in ("repo", "quant") if key not in values]
    if missing:
        catalog.problems.append(
            f"{here}: model {name!r}: a new entry needs {' and '.join(missing)}; entry ignored"
        )
        return
    catalog.entries.append(CatalogEntry(**values, source=origin))


def _check_values(values: dict[str, Any]) -> tuple[str, str] | None:
    repo = values.get("repo")
    if repo is not None and not REPO_PATTERN.match(repo):
        return "repo", f"repo {repo!r} is not OWNER/NAME"
    quant = values.get("quant")
    if quant is not None and not QUANT_PATTERN.match(quant):
        return "quant", f"quant {quant!r} is not a quantization tag such as Q4_K_M"
    for key, high in _RANGES.items():
        value = values.get(key, 0)
        if _is_nan(value) or not 0 <= value <= high:
            shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:40] + "..."
            return key, f"{key} = {shown} is not between 0 and {high:g}"
    return None
