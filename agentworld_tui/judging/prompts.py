"""The judge's prompts and messages, built as the official AgentWorldBench evaluator builds
them, from the project's own prompts or from a folder the user points to.

A judge gets two messages: a system prompt for the domain, and a user message made from a
template with four fields: ``{context}`` (the earlier turns, each its action then its real
observation), ``{world_model_input}`` (the current turn), ``{predicted_observation}`` and
``{ground_truth}``. The observation marker is stripped from the prediction and the reference
(never from the context). The project ships its own system prompts and user template
(prompts/<domain>/judge_system_prompt.txt, prompts/judge_user_prompt.txt); a prompts folder
replaces them, for example a clone of the official release, so that a run is judged with the
prompts the published tables were judged with. docs/judging.md describes the layouts read.
"""

from __future__ import annotations

import ast
import hashlib
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from agentworld_tui.domains import DOMAINS
from agentworld_tui.world.folders import shipped, user_file
from agentworld_tui.world.prompts import load_template, render_template

if TYPE_CHECKING:
    from agentworld_tui.world.session import Session, Turn

Message = dict[str, str]

OBSERVATION_MARKER = "**Environment Observation:**"
USER_TEMPLATE_FILE = "judge_user_prompt.txt"
SYSTEM_STEMS = ("judge_system_prompt", "judge_system", "judge_prompt", "judge")
USER_STEMS = ("judge_user_prompt", "judge_user_template", "judge_user")
PROJECT_TEMPLATE = "the project's"
"""How ``user_source`` begins when a folder had no user template of its own."""
TEMPLATE_VARIABLE = "JUDGE_USER_PROMPT"
"""A Python string of this name in the folder's code is read as the user template."""
TEXT_SUFFIXES = ("", ".txt", ".md", ".prompt")
MAX_PROMPT_BYTES = 1 << 20
MAX_PYTHON_FILES = 2000
MAX_PYTHON_BYTES = 2 << 20
_SKIPPED_DIRS = {"node_modules", "venv", "site-packages", "__pycache__", "build", "dist"}

FIELDS = {
    "context": ("context", "history"),
    "world_model_input": ("world_model_input", "current_turn", "action"),
    "predicted_observation": ("predicted_observation", "prediction"),
    "ground_truth": ("ground_truth", "reference"),
}
"""Each field of the user template and the names it may go by."""
_FIELD_OF = {alias: name for name, aliases in FIELDS.items() for alias in aliases}
_FORMAT_FIELD = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}")
_DOUBLE_FIELD = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


class JudgePromptsError(Exception):
    """A prompts folder that cannot be used; the message is one line."""


def strip_marker(text: str, domain: str) -> str:
    """``text`` without the observation marker, as the official evaluator strips it from
    its domains' observations (here: every registered domain's): a leading marker only
    when the text starts with one, else every occurrence."""
    if domain not in DOMAINS:
        return text.strip()
    if text.startswith(OBSERVATION_MARKER):
        return text[len(OBSERVATION_MARKER) :].strip()
    return text.replace(OBSERVATION_MARKER, "").strip()


def fill_user_template(template: str, values: dict[str, str]) -> str:
    """Fill the template's fields (``{name}``, ``{{``/``}}`` for literal braces, as Python's
    str.format reads it; an unknown field stays as written). A template that uses none of
    the fields that way but writes them ``{{name}}`` (the project's other templates do) is
    filled in that style."""
    format_style = any(m.group(1) in _FIELD_OF for m in _FORMAT_FIELD.finditer(template))
    if not format_style and any(m.group(1) in _FIELD_OF for m in _DOUBLE_FIELD.finditer(template)):
        return _DOUBLE_FIELD.sub(
            lambda m: values.get(_FIELD_OF.get(m.group(1), ""), m.group(0)), template
        )

    def fill(match: re.Match[str]) -> str:
        token = match.group(0)
        if token in ("{{", "}}"):
            return token[0]
        name = _FIELD_OF.get(match.group(1))
        return values[name] if name is not None and name in values else token

    return _FORMAT_FIELD.sub(fill, template)


# -- where the prompts come from --------------------------------------------------------------
@dataclass(frozen=True)
class JudgePrompts:
    """The judge's system prompt per domain and its user template, and where they came from.

    ``folder`` is "" for the project's own prompts (with the user's overrides in the config
    dir); otherwise ``systems`` and ``user_templates`` hold what was read from the folder.
    """

    folder: str = ""
    systems: dict[str, str] = field(default_factory=dict)
    user_template: str = ""
    user_source: str = ""
    user_templates: dict[str, str] = field(default_factory=dict)
    """Per-domain user templates that replace ``user_template`` for their domain."""
    problems: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """One line for a score table: which prompts judged."""
        if not self.folder:
            return "the project's judge prompts"
        return f"{self.folder} (user template: {self.user_source})"

    def system(self, domain: str) -> tuple[str, list[str]]:
        """The domain's judge system prompt, and problems met reading it."""
        if self.folder:
            return self.systems.get(domain, ""), []
        template = load_template(domain, "judge_system_prompt")
        return template.text, list(template.problems)

    def user(self, domain: str) -> str:
        if domain in self.user_templates:
            return self.user_templates[domain]
        return self.user_template or shipped_user_template()[0]

    def fingerprint(self, domains: Sequence[str]) -> str:
        """A digest of every text that shapes the judge's messages for ``domains``."""
        digest = hashlib.sha256()
        for domain in sorted(domains):
            for part in (domain, self.system(domain)[0], self.user(domain)):
                digest.update(part.encode("utf-8", "surrogatepass") + b"\0")
        return digest.hexdigest()[:16]


def shipped_user_template() -> tuple[str, str]:
    """The project's user template (the user's own in the config dir replaces it) and where
    it was read from."""
    override = user_file("prompts", USER_TEMPLATE_FILE)
    text = _read_text(override) if override is not None else ""
    if text and override is not None:
        return text, str(override)
    resource = shipped("prompts").joinpath(USER_TEMPLATE_FILE)
    try:
        return resource.read_text(encoding="utf-8"), f"shipped:{USER_TEMPLATE_FILE}"
    except (OSError, UnicodeDecodeError):
        return "{context}\n\n{world_model_input}\n\n{predicted_observation}\n\n{ground_truth}", (
            "built in"
        )


def project_prompts() -> JudgePrompts:
    return JudgePrompts()


def load_judge_prompts(folder: Path, domains: Sequence[str]) -> JudgePrompts:
    """The judge prompts in ``folder`` for ``domains``; raises JudgePromptsError when it
    holds none. A domain the folder lacks is judged with an empty system prompt (as the
    official evaluator does) and reported among ``problems``."""
    root = folder.expanduser()
    if not root.is_dir():
        raise JudgePromptsError(f"{folder}: no such folder")
    bases = [b for b in (root, root / "prompts") if b.is_dir()]
    systems: dict[str, str] = {}
    user_templates: dict[str, str] = {}
    problems: list[str] = []
    for domain in domains:
        text = _first_text(_candidates(bases, domain, SYSTEM_STEMS), problems)
        if text is None:
            problems.append(f"{folder}: no judge system prompt for {domain}; empty one used")
            continue
        systems[domain] = text
        own_user = _first_text(_candidates(bases, domain, USER_STEMS), problems)
        if own_user is not None:
            user_templates[domain] = own_user
    if not systems:
        raise JudgePromptsError(
            f"{folder}: no judge system prompt found (looked for <domain>/judge_system_prompt.txt"
            " and prompts/<domain>/judge_system_prompt.txt)"
        )
    user, source = _common_user_template(root, bases, problems)
    if source.startswith(PROJECT_TEMPLATE) and set(systems) - set(user_templates):
        problems.append(
            f"{folder}: no judge user template found ({USER_TEMPLATE_FILE}, or "
            f"{TEMPLATE_VARIABLE} in its Python code); the project's template is used, so "
            "the messages are not the folder's own"
        )
    return JudgePrompts(str(root), systems, user, source, user_templates, tuple(problems))


def _normal_stem(name: str) -> str:
    lowered = name.lower()
    for suffix in TEXT_SUFFIXES[1:]:
        if lowered.endswith(suffix):
            lowered = lowered[: -len(suffix)]
            break
    return re.sub(r"[-\s.]+", "_", lowered)


def _candidates(bases: list[Path], domain: str, stems: Sequence[str]) -> list[Path]:
    """Files that may hold ``domain``'s prompt, best first: ``<domain>/<stem>`` in a
    domain folder (any case, any of the suffixes), then ``<domain>_<stem>`` beside them."""
    found: list[tuple[int, int, str, Path]] = []
    for rank_base, base in enumerate(bases):
        for entry in _entries(base):
            if entry.is_dir() and entry.name.lower() == domain:
                for inner in _entries(entry):
                    stem = _normal_stem(inner.name)
                    if stem in stems and inner.is_file():
                        found.append((rank_base, stems.index(stem), inner.name, inner))
            elif entry.is_file():
                stem = _normal_stem(entry.name)
                for rank, wanted in enumerate(stems):
                    if stem == f"{domain}_{wanted}":
                        found.append((rank_base, len(stems) + rank, entry.name, entry))
    return [path for *_, path in sorted(found)]


def _entries(folder: Path) -> list[Path]:
    try:
        return sorted(folder.iterdir())
    except OSError:
        return []


def _first_text(paths: list[Path], problems: list[str]) -> str | None:
    for path in paths:
        text = _read_text(path, problems)
        if text:
            return text
    return None


def _read_text(path: Path, problems: list[str] | None = None) -> str:
    """The file's text, or "" (with a problem said) when it is missing, empty, too big or
    not UTF-8."""
    try:
        if not path.is_file():
            return ""
        if path.stat().st_size > MAX_PROMPT_BYTES:
            raise OSError("larger than 1 MiB")
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        if problems is not None:
            problems.append(f"{path}: unreadable ({exc}); skipped")
        return ""
    if not text.strip():
        if problems is not None:
            problems.append(f"{path}: empty; skipped")
        return ""
    return text


def _common_user_template(root: Path, bases: list[Path], problems: list[str]) -> tuple[str, str]:
    for base in bases:
        for entry in _entries(base):
            if entry.is_file() and _normal_stem(entry.name) in USER_STEMS:
                text = _read_text(entry, problems)
                if text:
                    return text, str(entry.relative_to(root))
    found = _template_in_code(root)
    if found is not None:
        return found
    text, source = shipped_user_template()
    return text, f"{PROJECT_TEMPLATE} ({source})"


def _template_in_code(root: Path) -> tuple[str, str] | None:
    """A string assigned to ``JUDGE_USER_PROMPT`` in the folder's Python code (the official
    release keeps its template there). The code is parsed, never run."""
    for path in _python_files(root):
        try:
            if path.stat().st_size > MAX_PYTHON_BYTES:
                continue
            tree = ast.parse(path.read_bytes())
        except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        for node in tree.body:
            targets: list[ast.expr] = []
            value: ast.expr | None = None
            if isinstance(node, ast.Assign):
                targets, value = node.targets, node.value
            elif isinstance(node, ast.AnnAssign):
                targets, value = [node.target], node.value
            named = any(isinstance(t, ast.Name) and t.id == TEMPLATE_VARIABLE for t in targets)
            if named and isinstance(value, ast.Constant) and isinstance(value.value, str):
                return value.value, f"{TEMPLATE_VARIABLE} in {path.relative_to(root)}"
    return None


def _python_files(root: Path, depth: int = 4) -> Iterator[Path]:
    """Python files under ``root``, shallow ones first, hidden and package folders skipped."""
    seen = 0
    level = [root]
    for _ in range(depth + 1):
        deeper: list[Path] = []
        for folder in level:
            for entry in _entries(folder):
                if entry.name.startswith(".") or entry.is_symlink():
                    continue
                if entry.is_dir():
                    if entry.name not in _SKIPPED_DIRS:
                        deeper.append(entry)
                elif entry.suffix == ".py":
                    seen += 1
                    if seen > MAX_PYTHON_FILES:
                        return
                    yield entry
        level = deeper


# -- the messages -------------------------------------------------------------------------------
def context_text(history: Sequence[tuple[str, str]], limit: int | None = None) -> str:
    """The ``{context}`` field: each earlier turn's text, a newline, its real observation,
    a blank line; under a heading. With ``limit`` (characters), the oldest turns are left
    out until it fits, and a line says how many."""
    blocks = _context_blocks(history)
    first = turns_left_out(history, limit)
    if not blocks:
        return ""
    note = f"({first} earlier turn(s) left out for length)\n\n" if first else ""
    return f"# Context (Historical Interactions):\n\n{note}" + "".join(blocks[first:])


def _context_blocks(history: Sequence[tuple[str, str]]) -> list[str]:
    return [f"{turn_text}\n{observation}\n\n" for turn_text, observation in history]


def turns_left_out(history: Sequence[tuple[str, str]], limit: int | None) -> int:
    """How many of the oldest turns ``context_text`` leaves out to fit ``limit``."""
    if limit is None:
        return 0
    sizes = [len(b) for b in _context_blocks(history)]
    size, first = sum(sizes), 0
    while first < len(sizes) and size > limit:
        size -= sizes[first]
        first += 1
    return first


def judge_messages_for(
    domain: str,
    history: Sequence[tuple[str, str]],
    current: str,
    prediction: str,
    ground_truth: str,
    prompts: JudgePrompts | None = None,
    *,
    history_chars: int | None = None,
) -> tuple[list[Message], list[str]]:
    """The judge's two messages for one turn, and problems met loading the prompts.

    ``history`` holds the earlier turns as (turn text, real observation); ``prediction`` is
    the extracted answer. ``history_chars`` trims the oldest turns to fit a small judge (the
    official evaluator never trims).
    """
    prompts = prompts or project_prompts()
    system, problems = prompts.system(domain)
    if not prompts.folder and _DOUBLE_FIELD.search(system):  # an older template, still filled
        system = render_template(
            system,
            {
                "history": context_text(history),
                "action": current,
                "prediction": prediction,
                "ground_truth": ground_truth,
            },
        )
    values = {
        "context": context_text(history, history_chars),
        "world_model_input": f"# Current Turn:\n\n{current}",
        "predicted_observation": (
            f"**World Model Output (Simulated):**\n```\n{strip_marker(prediction, domain)}\n```"
        ),
        "ground_truth": (
            f"**Ground Truth (Real Output):**\n```\n{strip_marker(ground_truth, domain)}\n```"
        ),
    }
    user = fill_user_template(prompts.user(domain), values).strip()
    return [{"role": "system", "content": system}, {"role": "user", "content": user}], problems


# -- the judge's prompt -------------------------------------------------------------------
def judge_messages(
    domain: str,
    history: Sequence[tuple[str, str]],
    action: str,
    prediction: str,
    ground_truth: str,
    *,
    history_chars: int | None = None,
    prompts: JudgePrompts | None = None,
) -> tuple[list[Message], list[str]]:
    """The messages that ask a judge about one turn, and problems met loading the prompts.

    Built as the official evaluator builds them (``judge_messages_for``): the domain's
    system prompt, then a user message with the history, the current turn, the prediction
    and the ground truth. ``history`` holds the earlier turns as (turn text, observation);
    with ``history_chars`` the oldest are left out until the history fits, and the judge
    is told how many. ``prompts`` defaults to the project's own.
    """
    return judge_messages_for(
        domain,
        history,
        action,
        prediction,
        ground_truth,
        prompts,
        history_chars=history_chars,
    )


def turn_judge_messages(
    session: Session,
    turn: Turn,
    reference: str,
    *,
    history_chars: int | None = None,
    prompts: JudgePrompts | None = None,
) -> tuple[list[Message], list[str]]:
    """The judge's messages for a turn of a session (what F11 sends): the history that
    turn was sent with, its observation and the real one the user gave."""
    from agentworld_tui.world.export import sent_history

    history = [(t.user_message, t.shown_text) for t in sent_history(session, turn)]
    return judge_messages(
        session.domain.name,
        history,
        turn.user_message,
        turn.observation,
        reference,
        history_chars=history_chars,
        prompts=prompts,
    )
