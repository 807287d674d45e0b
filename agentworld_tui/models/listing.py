"""The Hub's listing of a repository, checked before any value in it names a file.

A file's name, its sha256 or git blob id, and the repository's commit all become parts of
paths in the cache, so a Hub that lies (or a proxy in between) could otherwise make a pull
write, link or delete outside it. Each value must have the exact shape the real Hub gives;
anything else is refused with a message that shows the value escaped and cut short, since
it is untrusted text.
"""

from __future__ import annotations

import math
import re

from agentworld_tui.world.sanitize import sanitize

COMMIT_PATTERN = re.compile(r"[0-9a-f]{40}")
SHA256_PATTERN = re.compile(r"[0-9a-f]{64}")
GIT_BLOB_PATTERN = re.compile(r"[0-9a-f]{40}")
MAX_FILE_BYTES = 1 << 53
"""Far above any file the Hub stores, and still exact as a float."""
MAX_NAME_BYTES = 255
"""The longest file or folder name most file systems accept."""
MAX_PATH_CHARS = 1024
SHOWN_CHARS = 120


class ListingError(ValueError):
    """A value of the listing that cannot be used; the message is one line."""


def shown(value: object) -> str:
    """An untrusted value as one safe line: escaped like a Python literal, cut short."""
    text = repr(value)
    if len(text) > SHOWN_CHARS:
        text = text[:SHOWN_CHARS] + "..."
    return sanitize(text).replace("\n", " ")


def checked_commit(value: object) -> str:
    if isinstance(value, str) and COMMIT_PATTERN.fullmatch(value.lower()):
        return value.lower()
    raise ListingError(f"commit {shown(value)} is not a 40-digit commit id")


def checked_sha256(value: object, path: str) -> str:
    if isinstance(value, str) and SHA256_PATTERN.fullmatch(value.lower()):
        return value.lower()
    raise ListingError(f"{shown(path)} has lfs.sha256 {shown(value)}, not a sha256 digest")


def checked_blob_id(value: object, path: str) -> str:
    if isinstance(value, str) and GIT_BLOB_PATTERN.fullmatch(value.lower()):
        return value.lower()
    raise ListingError(f"{shown(path)} has blobId {shown(value)}, not a git blob id")


def checked_size(value: object, path: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_FILE_BYTES:
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return checked_size(int(value), path)
    raise ListingError(f"{shown(path)} has size {shown(value)}, not a byte count")


def checked_path(value: object) -> str:
    """A file name from the listing that stays inside any folder it is joined to.

    Relative, forward slashes only, no empty, ``.`` or ``..`` parts, no backslash or colon
    (Windows drive letters and streams), nothing that ``sanitize`` would remove (controls,
    escapes, bidi overrides) and no tab or newline.
    """
    if not isinstance(value, str):
        raise ListingError(f"a file name {shown(value)} is not text")
    reason = _path_problem(value)
    if reason:
        raise ListingError(f"file name {shown(value)} {reason}")
    return value


def _path_problem(path: str) -> str:
    if not path:
        return "is empty"
    if len(path) > MAX_PATH_CHARS:
        return "is too long"
    if path.startswith("/"):
        return "is absolute"
    if "\\" in path or ":" in path:
        return "has a backslash or a colon"
    if sanitize(path) != path or "\t" in path or "\n" in path:
        return "has control or formatting characters"
    for part in path.split("/"):
        if part in ("", ".", ".."):
            return "has an empty, '.' or '..' part"
        if len(part.encode("utf-8")) > MAX_NAME_BYTES:
            return "has a part too long for a file system"
    return ""
