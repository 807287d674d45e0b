"""Exports of a session's shown branch: AgentWorldBench JSONL, a Markdown transcript, JSON.

AgentWorldBench lines follow the benchmark's layout (see DOMAINS.md). ``prompt`` and
``response`` hold the whole exported trajectory, as the benchmark's own files do: the turn
texts exactly as they were sent and the observations exactly as they were shown (an
interrupted turn's partial observation included, since later turns were built on it). The
line for turn ``turn_idx`` is scored against ``response[turn_idx - 1]``, its own
observation; an evaluator that sends ``system_str``, then ``prompt[i]`` / ``response[i]`` for
every ``i < turn_idx - 1``, then ``current_prompt``, sends the very messages the app sent.

Turns without an observation (no answer, an error) were never part of any later prompt and
have no reference to score against, so they have no line and no place in the lists.

A twinned session (turns that carry what a real twin answered) is exported as a benchmark
of reality: every observation in ``response`` is the real one where the twin answered,
and only the turns it answered have a line, so ``agentworld bench`` scores any world model
against what the user's own tools really did. Its lists hold every turn that was shown or
that reality answered. When
the oldest turns did not fit a turn's context, that turn's lists start after them, so its
``turn_idx`` counts from there. ``id`` is text: the session id, branch and turn number.

JSON keeps every text exactly; characters a terminal could act on are written as ``\\u``
escapes, so printing an export is safe. Markdown is for reading: model text is sanitized and
fenced, and every other text that came from a file (the session's name, a scenario's title
and description, action labels, notes) is escaped so that it shows as written and cannot
start a heading, a list, a link, an image or HTML of its own.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterable
from typing import Any

from agentworld_tui.world.sanitize import one_line, sanitize
from agentworld_tui.world.session import Message, Session, Turn

EXPORT_FORMATS = ("agentworldbench", "markdown", "json")
TRANSCRIPT_FORMAT = "agentworld-transcript"
# Characters JSON may leave raw that a terminal or editor could act on: C1 controls, bidi
# controls, line and paragraph separators (C0 controls are always escaped by json).
_UNSAFE_IN_JSON = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


def dump_json(data: Any, indent: int | None = None) -> str:
    """JSON with non-ASCII text kept readable but terminal-active characters escaped."""
    text = json.dumps(data, ensure_ascii=False, indent=indent)
    return _UNSAFE_IN_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def sent_history(session: Session, turn: Turn) -> list[Turn]:
    """The earlier turns whose action and observation went into ``turn``'s prompt."""
    earlier = [t for t in session.turns[: turn.number - 1] if t.shown]
    return earlier[turn.omitted_turns :]


def sent_messages(session: Session, turn: Turn) -> list[Message]:
    """The messages ``turn`` was sent with, rebuilt from what the session recorded."""
    messages: list[Message] = [{"role": "system", "content": session.system_prompt}]
    for t in sent_history(session, turn):
        messages.append({"role": "user", "content": t.user_message})
        messages.append({"role": "assistant", "content": t.shown_text})
    messages.append({"role": "user", "content": turn.user_message})
    return messages


def real_text(turn: Turn) -> str | None:
    """What the twin answered for ``turn``; None when it was not twinned or reality gave
    no answer (the twin failed, timed out or was gone)."""
    real = (turn.reality or {}).get("real")
    if not isinstance(real, dict) or real.get("status") != "ok":
        return None
    return str(real.get("text", ""))


def benchmark_records(session: Session) -> list[dict[str, Any]]:
    """One AgentWorldBench sample per turn that has an observation (in a twinned session,
    a real one), oldest first."""
    twinned = any(t.reality is not None for t in session.turns)
    if twinned:
        shown = [t for t in session.turns if t.shown or real_text(t) is not None]
    else:
        shown = [t for t in session.turns if t.shown]
    responses = {t.number: _reference(t) for t in shown}
    records: list[dict[str, Any]] = []
    for position, turn in enumerate(shown):
        if twinned and real_text(turn) is None:
            continue
        start = min(turn.omitted_turns, position)
        trajectory = shown[start:]
        records.append(
            {
                "task": session.domain.name,
                "id": f"{session.id}-b{session.branch_id}-t{turn.number}",
                "prompt": [t.user_message for t in trajectory],
                "response": [responses[t.number] for t in trajectory],
                "current_prompt": turn.user_message,
                "system_str": session.system_prompt,
                "turn_idx": position - start + 1,
                "total_turns": len(trajectory),
            }
        )
    return records


def _reference(turn: Turn) -> str:
    real = real_text(turn)
    return turn.shown_text if real is None else real


def agentworldbench_jsonl(sessions: Iterable[Session]) -> str:
    lines = [dump_json(record) for session in sessions for record in benchmark_records(session)]
    return "".join(line + "\n" for line in lines)


def transcript_dict(sessions: Iterable[Session], *, reasoning: bool = False) -> dict[str, Any]:
    """The shown branch of each session as plain data, for scripts."""
    out: list[dict[str, Any]] = []
    for session in sessions:
        turns = []
        for turn in session.turns:
            data = turn.to_dict()
            if not reasoning:  # the raw output holds the reasoning too
                data.pop("reasoning")
                data.pop("raw")
                for attempt in data["attempts"]:
                    attempt.pop("reasoning", None)
                    attempt.pop("raw", None)
            turns.append(data)
        out.append(
            {
                "id": session.id,
                "domain": session.domain.name,
                "scenario": session.scenario.to_dict(),
                "system_prompt": session.system_prompt,
                "branch": session.branch_id,
                "branches": len(session.branches),
                "world": session.world.to_dict() if session.world is not None else None,
                "turns": turns,
            }
        )
    return {
        "format": TRANSCRIPT_FORMAT,
        "version": 1,
        "exported": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "sessions": out,
    }


def json_transcript(sessions: Iterable[Session], *, reasoning: bool = False) -> str:
    return dump_json(transcript_dict(sessions, reasoning=reasoning), indent=2) + "\n"


def markdown_transcript(
    sessions: Iterable[Session], *, reasoning: bool = False, title: str = ""
) -> str:
    """A readable transcript: each turn's action as sent, then the observation as shown."""
    parts: list[str] = [f"# {_inline(title) or 'AgentWorld session'}"]
    for session in sessions:
        parts.append(_session_markdown(session, reasoning))
    return "\n\n".join(parts) + "\n"


def _session_markdown(session: Session, reasoning: bool) -> str:
    scenario = session.scenario
    lines = [f"## {session.domain.title}: {_inline(scenario.title or scenario.name)}"]
    if scenario.description.strip():
        lines.append(_prose(scenario.description))
    if len(session.branches) > 1:
        lines.append(f"*Showing {session.branch.label} of {len(session.branches)} branches.*")
    lines.append(_details("System prompt", _fence(session.system_prompt, "markdown")))
    if session.world is not None:
        lines.append(f"*Fictional world: {_inline(session.world.title)}*")
    if not session.turns:
        lines.append("*No turns yet.*")
    for turn in session.turns:
        label = turn.action.label or f"turn {turn.number}"
        lines.append(f"### Turn {turn.number}: {_inline(label)}")
        if turn.control:
            lines.append(f"**Control instruction:** {_inline(turn.control)}")
        lines.append("**Sent to the model:**\n\n" + _fence(turn.user_message, "markdown"))
        if reasoning and turn.reasoning.strip():
            lines.append(_details("Reasoning", _fence(turn.reasoning.strip())))
        if turn.observation:
            lines.append("**Observation:**\n\n" + _fence(turn.observation))
        if turn.extraction:
            lines.append(f"*Extraction: {_inline(turn.extraction)}.*")
            if reasoning and turn.raw:
                lines.append(_details("The output as generated", _fence(turn.raw)))
        if turn.status != "complete" or turn.note:
            why = f": {_inline(turn.note)}" if turn.note.strip() else ""
            lines.append(f"*{turn.status.replace('_', ' ')}{why}*")
        if turn.attempts:
            lines.append(f"*{len(turn.attempts)} earlier answer(s) to this action kept.*")
        if turn.judgement:
            lines.append(_judgement_line(turn.judgement))
        if turn.reality is not None:
            lines.extend(_reality_lines(turn.reality))
    if session.twin is not None:
        lines.append(_twin_line(session.twin))
    return "\n\n".join(lines)


def _reality_lines(reality: dict[str, Any]) -> list[str]:
    real = reality.get("real") or {}
    status = str(real.get("status", ""))
    head = (
        "**Reality** (delivered to the agent)"
        if reality.get("delivered") == "real"
        else ("**Reality**")
    )
    if status == "ok":
        out = [f"{head}:\n\n" + _fence(str(real.get("text", "")))]
    else:
        out = [f"*{head.strip('*')}: {_inline(status)}: {_inline(str(real.get('error', '')))}*"]
    divergence = reality.get("divergence")
    if isinstance(divergence, dict):
        verdict = "diverged" if divergence.get("diverged") else "matched"
        out.append(f"*Divergence {float(divergence.get('score', 0)):.3f}: {verdict}.*")
    if reality.get("judgement"):
        out.append(
            _judgement_line(reality["judgement"]).replace("*Judged", "*Judged against reality", 1)
        )
    return out


def _twin_line(twin: dict[str, Any]) -> str:
    parts = [
        f"*Twin: {_inline(str(twin.get('domain', '')))} ({_inline(str(twin.get('kind', '')))})"
    ]
    figures = twin.get("figures")
    if isinstance(figures, dict):
        share = figures.get("diverged_share")
        if isinstance(share, int | float):
            parts.append(f"{share:.0%} of {figures.get('steps', 0)} steps diverged")
        if figures.get("first_divergence") is not None:
            parts.append(f"first at turn {figures['first_divergence']}")
        if figures.get("check_passed") is not None:
            parts.append("the check passed" if figures["check_passed"] else "the check failed")
        if figures.get("deceived"):
            parts.append("deceived: the agent said done")
    return ", ".join(parts) + ".*"


def _judgement_line(data: dict[str, Any]) -> str:
    from agentworld_tui.world.judgement import DIMENSIONS, Verdict

    try:
        verdict = Verdict.from_dict(data)
    except (KeyError, TypeError, ValueError):
        return "*Judgement: damaged record.*"
    by = f" by {_inline(verdict.judge)}" if verdict.judge.strip() else ""
    judgement = verdict.judgement
    if judgement is None:
        return f"*Judged{by}: no judgement ({_inline(verdict.error)}).*"
    scores = ", ".join(f"{d} {judgement.scores[d]:g}" for d in DIMENSIONS)
    return (
        f"*Judged{by}: mean {judgement.total:.2f} of 5, score {judgement.normalised:.1f}"
        f" ({scores}).*"
    )


def _details(summary: str, body: str) -> str:
    return f"<details><summary>{summary}</summary>\n\n{body}\n\n</details>"


def _fence(text: str, lang: str = "") -> str:
    """A fenced block whose fence is longer than any run of backticks inside ``text``."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{lang}\n{sanitize(text).rstrip(chr(10))}\n{fence}"


# What CommonMark (with GFM tables and strikethrough) or HTML would act on inside a line: an
# underscore only at a word's edge, since "web_search" is never emphasis.
_MARKDOWN_ACTIVE = re.compile(r"[\\`*\[\]<>#|~&]|(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])")
_LIST_NUMBER = re.compile(r"^(\d{1,9})([.)])")


def _inline(text: str) -> str:
    """Untrusted text as one line of Markdown that shows exactly that text: controls
    removed, line breaks joined, and every character Markdown or HTML acts on escaped."""
    return _MARKDOWN_ACTIVE.sub(lambda m: "\\" + m.group(), one_line(text))


def _prose(text: str) -> str:
    """Untrusted text of several lines as paragraphs of plain Markdown: each line escaped
    as ``_inline`` does, with nothing at its start that would begin a list, a quote, a
    heading, a rule or a code block."""
    out: list[str] = []
    for raw in sanitize(text).strip().split("\n"):
        line = _inline(raw)
        if not line:
            if out and out[-1]:
                out.append("")
            continue
        if line[0] in "-+=":
            line = "\\" + line
        out.append(_LIST_NUMBER.sub(r"\1\\\2", line))
    return "\n".join(out)
