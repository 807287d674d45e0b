"""Which files of a repository hold a given quantization.

Catalog entries name a quantization tag (``Q4_K_M``, ``UD-Q4_K_XL``), not a file: file
names change between uploads. A tag matches a ``.gguf`` path when it stands alone in the
name (case-insensitive, not part of a longer tag: ``Q4_K`` is not ``Q4_K_M``, ``Q4_K_M`` is
not ``UD-Q4_K_M`` or ``IQ4_K_M``). Vision projector files (``mmproj``) are never picked. A
model split into ``-00001-of-00003.gguf`` parts is one choice made of all its parts.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

SPLIT_PATTERN = re.compile(r"^(?P<stem>.+)-(?P<part>\d{5})-of-(?P<count>\d{5})\.gguf$", re.I)
_TAG_IN_NAME = re.compile(
    r"(?<![A-Za-z0-9])((?:UD-)?(?:I?Q\d+(?:_[A-Z0-9]+)*|BF16|F16|F32|MXFP4(?:_MOE)?))"
    r"(?![A-Za-z0-9])",
    re.I,
)


@dataclass(frozen=True)
class ModelFiles:
    """The file, or all parts of a split file, that make up one quantization."""

    paths: tuple[str, ...]
    """Repository paths, parts in order; the first is what llama.cpp is given."""

    @property
    def first(self) -> str:
        return self.paths[0]

    @property
    def is_split(self) -> bool:
        return len(self.paths) > 1


class QuantNotFoundError(LookupError):
    pass


def is_model_file(path: str) -> bool:
    name = path.rsplit("/", 1)[-1].lower()
    return name.endswith(".gguf") and "mmproj" not in path.lower()


def tag_matches(path: str, quant: str) -> bool:
    """True when ``quant`` stands as a whole tag in the file's path."""
    tag = re.escape(quant)
    pattern = re.compile(rf"(?<![A-Za-z0-9])(?<!UD-)(?<!UD_){tag}(?![A-Za-z0-9_])", re.I)
    if quant.upper().startswith("UD-"):
        pattern = re.compile(rf"(?<![A-Za-z0-9]){tag}(?![A-Za-z0-9_])", re.I)
    name = path
    split = SPLIT_PATTERN.match(path.rsplit("/", 1)[-1])
    if split:
        name = path[: len(path) - len(path.rsplit("/", 1)[-1])] + split["stem"]
    return bool(pattern.search(name))


def quant_tags(paths: Iterable[str]) -> list[str]:
    """The quantization tags seen in a repository's file names, for 'did you mean' messages."""
    seen: dict[str, None] = {}
    for path in paths:
        if not is_model_file(path):
            continue
        name = path.rsplit("/", 1)[-1]
        split = SPLIT_PATTERN.match(name)
        stem = split["stem"] if split else name[: -len(".gguf")]
        found = _TAG_IN_NAME.findall(stem)
        if found:
            seen.setdefault(found[-1].upper(), None)
    return list(seen)


def choose_files(paths: Iterable[str], quant: str, repo: str = "") -> ModelFiles:
    """The file (or complete set of split parts) of ``quant`` among ``paths``.

    When several candidates match (rare: two conversions in one repository), the one
    nearest the repository root with the shortest name is taken, so the choice is stable.
    """
    listed = list(paths)
    singles: list[tuple[str, ...]] = []
    split_sets: dict[tuple[str, int], dict[int, str]] = {}
    for path in listed:
        if not is_model_file(path) or not tag_matches(path, quant):
            continue
        folder, _, name = path.rpartition("/")
        split = SPLIT_PATTERN.match(name)
        if split:
            key = (f"{folder}/{split['stem']}", int(split["count"]))
            split_sets.setdefault(key, {})[int(split["part"])] = path
        else:
            singles.append((path,))
    candidates = list(singles)
    incomplete: list[str] = []
    for (stem, count), parts in split_sets.items():
        if sorted(parts) == list(range(1, count + 1)):
            candidates.append(tuple(parts[i] for i in range(1, count + 1)))
        else:
            missing = [i for i in range(1, count + 1) if i not in parts]
            incomplete.append(f"{stem.lstrip('/')} (parts {missing} missing)")
    where = f" in {repo}" if repo else ""
    if not candidates:
        if incomplete:
            raise QuantNotFoundError(
                f"the split file for {quant}{where} is incomplete: {'; '.join(incomplete)}"
            )
        tags = quant_tags(listed)
        hint = f"; available: {', '.join(tags)}" if tags else "; the repository has no GGUF files"
        raise QuantNotFoundError(f"no GGUF file{where} matches quantization {quant}{hint}")
    candidates.sort(key=lambda files: (files[0].count("/"), len(files[0]), files[0]))
    return ModelFiles(candidates[0])
