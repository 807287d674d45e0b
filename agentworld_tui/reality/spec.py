"""What twin to start: one value that every front-end builds the same way (the command
line from its flags, the app from its dialog, the Python environment from its arguments),
checked in one place, started in one place, and described in the session file without a
secret."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args
from urllib.parse import urlsplit

from agentworld_tui.reality.observation import RealObservation
from agentworld_tui.reality.sandbox import BackendChoice, SandboxOptions
from agentworld_tui.reality.twin import Twin, TwinRunner

TWIN_DOMAINS = ("terminal", "swe", "mcp")
"""The domains that have a twin. Web, Android, OS (and Search) have none: their real
counterparts (a browser, a phone, a desktop) are not something this project drives."""

Deliver = Literal["real", "sim"]
"""Which side of a twinned turn the agent receives: reality's answer, or the world model's
prediction (the other side is recorded beside it)."""
DELIVER_SIDES: tuple[Deliver, ...] = get_args(Deliver)
SANDBOX_DOMAINS = ("terminal", "swe")
WORKDIRS = {"terminal": "/app", "swe": "/testbed"}
"""Where the seeded copy is inside the sandbox, as the domains' scenarios have it."""
TWIN_BACKENDS: tuple[BackendChoice, ...] = ("auto", "podman", "docker", "bwrap", "unshare")
"""The sandbox backends one may ask for; the host is asked for with ``on_host`` only."""

_SECRET_NAME = re.compile(r"(?i)(?:token|secret|passw(?:or)?d|api[_-]?key|auth|credential)")


class TwinStartError(Exception):
    """A twin that cannot be made or did not start; the message is one line."""


@dataclass(frozen=True)
class TwinSpec:
    """A twin to start.

    Terminal and SWE twins act in a sandbox seeded from ``seed`` (a copy of the folder, at
    ``workdir`` inside), with no network unless ``network``, in a container of ``image``
    where podman or docker has one; only ``on_host`` runs them on this machine itself. An
    MCP twin is the real server ``command`` starts (stdio) or ``url`` names (streamable
    HTTP).
    """

    domain: str
    seed: str = ""
    workdir: str = ""
    """Inside the sandbox; empty for the domain's own (``WORKDIRS``)."""
    backend: BackendChoice = "auto"
    network: bool = False
    on_host: bool = False
    image: str = ""
    command: tuple[str, ...] = field(default=())
    url: str = ""

    @property
    def kind(self) -> str:
        """ "sandbox", "host", "mcp-command" or "mcp-url"."""
        if self.domain == "mcp":
            return "mcp-url" if self.url else "mcp-command"
        return "host" if self.on_host else "sandbox"

    def problem(self) -> str:
        """Why this twin cannot be made (one line), or ""."""
        if self.domain not in TWIN_DOMAINS:
            return (
                f"the {self.domain} domain has no twin (twins exist for "
                f"{', '.join(TWIN_DOMAINS)}): it runs in simulation only"
            )
        if self.domain == "mcp":
            if self.command and self.url:
                return "an MCP twin is one server: give its command or its URL, not both"
            if not self.command and not self.url:
                return "an MCP twin is a real server: give its command or its URL"
            if self.url and urlsplit(self.url).scheme not in ("http", "https"):
                return f"the MCP twin's URL must start with http:// or https://: {self.url}"
            sandboxed = [
                name
                for name, given in (
                    ("a seed folder", self.seed),
                    ("a working folder", self.workdir),
                    ("a sandbox backend", self.backend != "auto"),
                    ("a container image", self.image),
                    ("the network switch", self.network),
                    ("running on the host", self.on_host),
                )
                if given
            ]
            if sandboxed:
                return f"an MCP twin is the server itself: {sandboxed[0]} is for terminal and swe twins"
            return ""
        if self.command or self.url:
            return f"the {self.domain} twin is a sandbox: a server command or URL is for MCP twins"
        if self.backend not in TWIN_BACKENDS:
            return f"unknown sandbox backend {self.backend!r} (one of {', '.join(TWIN_BACKENDS)})"
        if self.on_host and self.backend != "auto":
            return f"running on the host and the {self.backend} sandbox exclude each other"
        if self.image and self.backend not in ("auto", "podman", "docker"):
            return f"a container image needs podman or docker, not {self.backend}"
        if self.seed and not Path(self.seed).expanduser().is_dir():
            return f"the folder to seed the twin from is not a folder: {self.seed}"
        workdir = self.workdir or WORKDIRS[self.domain]
        if not workdir.startswith("/") or workdir.rstrip("/") in ("", "/proc", "/dev"):
            return f"the twin's working folder must be an absolute path: {workdir}"
        return ""

    def sandbox_options(self) -> SandboxOptions:
        return SandboxOptions(
            seed=Path(self.seed).expanduser() if self.seed else None,
            workdir=self.workdir or WORKDIRS.get(self.domain, "/work"),
            network=self.network,
            backend="host" if self.on_host else self.backend,
            unsafe_host=self.on_host,
            image=self.image or None,
        )

    def twin(self) -> Twin:
        """The twin, not started; a TwinStartError when the spec has a problem."""
        problem = self.problem()
        if problem:
            raise TwinStartError(problem)
        if self.domain == "mcp":
            return make_twin("mcp", command=list(self.command) or None, url=self.url)
        return make_twin(self.domain, sandbox=self.sandbox_options())

    def start(self, *, grace: float | None = None) -> tuple[TwinRunner, RealObservation]:
        """The twin started on a runner of its own, and its first observation (a terminal's
        first screen); a TwinStartError saying why in one line when it did not start."""
        twin = self.twin()
        runner = TwinRunner(twin) if grace is None else TwinRunner(twin, grace=grace)
        first = runner.start()
        if not first.ok:
            runner.close()
            raise TwinStartError(first.error or f"the twin did not start ({first.status.value})")
        return runner, first

    def describe(self) -> dict[str, Any]:
        """What the session file says about this twin: enough to know what acted for real,
        never a secret (a URL's user, password and query and the values of arguments
        named like secrets are left out)."""
        out: dict[str, Any] = {"domain": self.domain, "kind": self.kind}
        if self.domain == "mcp":
            if self.url:
                out["url"] = public_url(self.url)
            else:
                out["command"] = public_command(self.command)
            return out
        out["backend"] = "host" if self.on_host else self.backend
        out["seed"] = str(Path(self.seed).expanduser().resolve()) if self.seed else ""
        out["workdir"] = self.workdir or WORKDIRS.get(self.domain, "/work")
        out["network"] = self.network or self.on_host
        if self.image:
            out["image"] = self.image
        return out


def has_twin(domain: str) -> bool:
    return domain in TWIN_DOMAINS


def make_twin(
    domain: str,
    *,
    sandbox: SandboxOptions | None = None,
    command: list[str] | None = None,
    url: str = "",
) -> Twin:
    """The twin of ``domain``: a terminal or SWE twin in a sandbox made by ``sandbox``
    (seeded from its folder), or an MCP twin of the server ``command`` starts or ``url``
    names. Nothing starts until ``start``; an unknown domain is a ValueError."""
    if domain == "terminal":
        from agentworld_tui.reality.terminal_twin import TerminalTwin

        return TerminalTwin(sandbox or SandboxOptions(workdir="/app"))
    if domain == "swe":
        from agentworld_tui.reality.swe_twin import SweTwin

        return SweTwin(sandbox or SandboxOptions(workdir="/testbed"))
    if domain == "mcp":
        from agentworld_tui.reality.mcp_twin import McpTwin

        return McpTwin(command=command, url=url)
    raise ValueError(f"the {domain} domain has no twin; twins exist for {', '.join(TWIN_DOMAINS)}")


def public_url(url: str) -> str:
    """``url`` without its user name, password, query and fragment."""
    from agentworld_tui.engines.remote import display_url

    return display_url(url)


def public_command(command: tuple[str, ...] | list[str]) -> list[str]:
    """A server's command line with what looks like a secret replaced by ``***``: the value
    after a flag named like one (``--api-key X``, ``--token=X``), ``NAME=value`` pairs so
    named, and any URL's user, password and query."""
    out: list[str] = []
    hide_next = False
    for word in command:
        if hide_next:
            out.append("***")
            hide_next = False
            continue
        name, equals, _value = word.partition("=")
        if word.startswith("-") and _SECRET_NAME.search(name):
            if equals:
                out.append(f"{name}=***")
            else:
                out.append(word)
                hide_next = True
            continue
        if "://" in word and not word.startswith("-"):
            out.append(public_url(word))
            continue
        if equals and not word.startswith("-") and _SECRET_NAME.search(name):
            out.append(f"{name}=***")
            continue
        out.append(word)
    return out
