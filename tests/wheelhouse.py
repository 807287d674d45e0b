"""A wheelhouse made from the packages installed in this environment, for installs that must
not reach a package index.

A fresh pipx install (tests/test_docs_walkthrough.py) resolves the project's requirements
again; pointed at this folder with ``--no-index --find-links`` it gets exactly the versions
the tests run with here, llama-cpp-python's compiled build included, without a download or
a compile. Each installed distribution is packed back into a wheel from the files its
``RECORD`` lists inside site-packages: scripts are left out (pip writes them again from
``entry_points.txt``), and so are editable installs (the project itself comes from its own
wheel).
"""

from __future__ import annotations

import base64
import csv
import hashlib
import importlib.metadata as metadata
import io
import json
import re
import zipfile
from collections.abc import Iterable
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

LEFT_OUT = {"RECORD", "INSTALLER", "REQUESTED", "direct_url.json"}


def _installed() -> dict[str, metadata.Distribution]:
    found: dict[str, metadata.Distribution] = {}
    for dist in metadata.distributions():
        found.setdefault(canonicalize_name(dist.metadata["Name"]), dist)
    return found


def _is_editable(dist: metadata.Distribution) -> bool:
    direct = json.loads(dist.read_text("direct_url.json") or "{}")
    return bool(direct.get("dir_info", {}).get("editable"))


def closure(requirements: Iterable[str]) -> list[metadata.Distribution]:
    """The installed distributions that ``requirements`` need, their extras' included."""
    installed = _installed()
    done: set[tuple[str, str]] = set()
    queue = [(Requirement(text), "") for text in requirements]
    queue += [(r, extra) for r, _ in list(queue) for extra in r.extras]
    while queue:
        requirement, extra = queue.pop()
        name = canonicalize_name(requirement.name)
        if (name, extra) in done:
            continue
        done.add((name, extra))
        dist = installed.get(name)
        if dist is None:
            raise LookupError(f"{requirement} is not installed here")
        environment = {**default_environment(), "extra": extra}
        for text in dist.requires or []:
            needed = Requirement(text)
            if needed.marker is None or needed.marker.evaluate(environment):
                queue.append((needed, ""))
                queue.extend((needed, more) for more in needed.extras)
    return [installed[name] for name in sorted({name for name, _ in done})]


def repack(dist: metadata.Distribution, folder: Path) -> Path:
    """Pack one installed distribution back into a wheel in ``folder``."""
    if _is_editable(dist):
        raise ValueError(f"{dist.metadata['Name']} is an editable install")
    info = next(
        f for f in dist.files or [] if f.parent.name.endswith(".dist-info") and f.name == "WHEEL"
    )
    dist_info = info.parent.as_posix()
    tags = [
        line.split(":", 1)[1].strip().split("-")
        for line in info.read_text().splitlines()
        if line.startswith("Tag:")
    ]
    tag = "-".join(".".join(dict.fromkeys(part[i] for part in tags)) for i in range(3))
    name = re.sub(r"[-_.]+", "_", dist.metadata["Name"]).lower()
    wheel = folder / f"{name}-{dist.version}-{tag}.whl"
    record: list[tuple[str, str, str]] = []
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_STORED) as archive:
        for file in dist.files or []:
            posix = file.as_posix()
            if posix.startswith("..") or "__pycache__" in file.parts:
                continue
            if file.parent.as_posix() == dist_info and file.name in LEFT_OUT:
                continue
            path = Path(str(file.locate()))
            if not path.is_file():
                continue
            data = path.read_bytes()
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            record.append((posix, f"sha256={digest.decode()}", str(len(data))))
            archive.writestr(zipfile.ZipInfo(posix, date_time=(1980, 1, 1, 0, 0, 0)), data)
        text = io.StringIO()
        writer = csv.writer(text, lineterminator="\n")
        writer.writerows([*record, (f"{dist_info}/RECORD", "", "")])
        archive.writestr(f"{dist_info}/RECORD", text.getvalue())
    return wheel


def build(folder: Path, requirements: Iterable[str]) -> list[Path]:
    """Every wheel ``requirements`` need, packed from this environment into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    return [repack(dist, folder) for dist in closure(requirements)]
