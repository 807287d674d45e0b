"""Exports field for field, and AgentWorldBench import, replay and continue."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentworld_tui.domains import DOMAINS, get_domain
from agentworld_tui.world.domain import Scenario
from agentworld_tui.world.export import (
    agentworldbench_jsonl,
    benchmark_records,
    json_transcript,
    markdown_transcript,
    sent_messages,
)
from agentworld_tui.world.session import Message, Session, new_session
from agentworld_tui.world.trajectories import MAX_PROBLEMS as REPLAY_PROBLEMS
from agentworld_tui.world.trajectories import (
    Replay,
    TrajectoryError,
    load_benchmark,
    observation_diff,
    recorded_action,
    sample_session,
    trajectory_session,
)

TERMINAL = get_domain("terminal")
SCENARIO = Scenario("box", "A box", "An Ubuntu machine.", state="user@box:~$ ")


def evaluator_messages(line: dict[str, Any]) -> list[Message]:
    """What an evaluator sends for one benchmark line, built from its fields alone."""
    turn = line["turn_idx"] - 1
    messages = [{"role": "system", "content": line["system_str"]}]
    for i in range(turn):
        messages.append({"role": "user", "content": line["prompt"][i]})
        messages.append({"role": "assistant", "content": line["response"][i]})
    messages.append({"role": "user", "content": line["current_prompt"]})
    return messages


class Recorder:
    """Plays turns on a session as the engine path does, keeping each prompt it built."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.sent: dict[int, list[Message]] = {}

    def play(self, command: str, observation: str, status: str = "complete", **budget: Any) -> None:
        session = self.session
        turn = session.begin_turn(TERMINAL.parse_action(command, session.scenario))
        prompt = session.prompt(turn, **budget)
        turn.omitted_turns = prompt.omitted_turns
        self.sent[turn.number] = prompt.messages
        session.finish_turn(
            turn,
            observation=observation,
            reasoning=f"thinking about {command}",
            status=status,  # type: ignore[arg-type]
        )


def recorded_session() -> Recorder:
    session, _ = new_session(TERMINAL, SCENARIO)
    rec = Recorder(session)
    rec.play("ls", "a.txt  notes `x`\nuser@box:~$ ")
    rec.play("cat a.txt", "", status="no_answer")  # no answer: never part of a later prompt
    rec.play("cat a.txt", "hello ```\nuser@box:~$ ")
    rec.play("top", "top - 10:00:01 up 3 days", status="interrupted")  # partial, but shown
    # a small budget: the oldest turns no longer fit and are left out of this prompt
    rec.play("echo done", "done\nuser@box:~$ ", count_tokens=len, budget=2300)
    # regenerate the last turn: the shown answer is the new one
    session.regenerate()
    last = session.turns[-1]
    prompt = session.prompt(last, count_tokens=len, budget=2300)
    last.omitted_turns = prompt.omitted_turns
    rec.sent[last.number] = prompt.messages
    session.finish_turn(last, observation="done!\nuser@box:~$ ", reasoning="", status="complete")
    return rec


def test_agentworldbench_lines_rebuild_the_very_messages_sent() -> None:
    rec = recorded_session()
    session = rec.session
    assert session.turns[4].omitted_turns > 0  # the budget really left turns out
    lines = [json.loads(line) for line in agentworldbench_jsonl([session]).splitlines()]
    shown = [t for t in session.turns if t.shown]
    assert len(lines) == len(shown) == 4  # the turn without an answer has no line

    for line, turn in zip(lines, shown, strict=True):
        assert set(line) == {
            "task",
            "id",
            "prompt",
            "response",
            "current_prompt",
            "system_str",
            "turn_idx",
            "total_turns",
        }
        assert line["task"] == "terminal"
        assert line["id"] == f"{session.id}-b1-t{turn.number}"
        assert line["system_str"] == session.system_prompt
        assert line["current_prompt"] == turn.user_message
        assert line["prompt"][line["turn_idx"] - 1] == turn.user_message
        assert line["response"][line["turn_idx"] - 1] == turn.observation  # its reference
        assert line["total_turns"] == len(line["prompt"]) == len(line["response"])
        assert evaluator_messages(line) == rec.sent[turn.number]
        assert sent_messages(session, turn) == rec.sent[turn.number]

    first = lines[0]
    assert first["turn_idx"] == 1 and first["total_turns"] == 4
    assert first["response"][2] == "top - 10:00:01 up 3 days"  # interrupted, as shown
    assert lines[3]["turn_idx"] < 4  # counted after the turns left out


def test_lines_are_ids_unique_and_json_escapes_terminal_controls() -> None:
    session, _ = new_session(TERMINAL, SCENARIO)
    rec = Recorder(session)
    rec.play("printf", "\x1b]52;c;aGk=\x07 \u202e evil \x9b31m\nuser@box:~$ ")
    text = agentworldbench_jsonl([session, session])
    assert "\x1b" not in text and "\u202e" not in text and "\x9b" not in text
    a, b = (json.loads(line) for line in text.splitlines())
    assert a["response"][0] == session.turns[0].observation  # exact after decoding
    assert a == b  # the same session twice gives the same records
    assert benchmark_records(Session(TERMINAL, SCENARIO, "sys")) == []


def test_markdown_transcript_reads_well_and_shows_no_controls() -> None:
    rec = recorded_session()
    session = rec.session
    session.turns[0].observation = "\x1b[2Jcleared" + session.turns[0].observation
    plain = markdown_transcript([session], title="Demo")
    assert plain.startswith("# Demo\n\n## Terminal: A box")
    for turn in session.turns:
        assert f"### Turn {turn.number}: {turn.action.label}" in plain
    assert "thinking about" not in plain
    assert "\x1b" not in plain and "cleared" in plain
    assert "*no answer*" in plain
    assert "*interrupted*" in plain
    # an observation holding ``` is fenced with a longer fence
    assert "````\nhello ```\nuser@box:~$ \n````" in plain
    assert "1 earlier answer(s) to this action kept" in plain
    with_reasoning = markdown_transcript([session], reasoning=True)
    assert "<details><summary>Reasoning</summary>" in with_reasoning
    assert "thinking about ls" in with_reasoning


HOSTILE = (
    "Evil \x1b]0;title\x07\n# Injected heading\n<script>x</script> [a](javascript:x) "
    "![i](http://t/p.png) *b* _c_ `d` ~~e~~ &amp; | f ###"
)
HOSTILE_SHOWN = (
    "Evil # Injected heading <script>x</script> [a](javascript:x) "
    "![i](http://t/p.png) *b* _c_ `d` ~~e~~ &amp; | f ###"
)
HOSTILE_PROSE = "\n".join(
    [
        "A box.",
        "# a heading",
        "- a list",
        "1. a numbered list",
        "    indented code",
        "===",
        "> a quote",
        "---",
        "<details><summary>html</summary>",
        "| a | b |",
        "|---|---|",
        "```",
        "[link]: http://t/ref",
    ]
)


def hostile_session() -> Session:
    """Every text of a session that a shared file could set, set to Markdown and HTML."""
    from agentworld_tui.world.fictional_world import world_from_dict
    from agentworld_tui.world.judgement import Verdict

    scenario = Scenario("box", HOSTILE, HOSTILE_PROSE, state="$ ")
    session, _ = new_session(TERMINAL, scenario)
    session.world = world_from_dict({"name": "w", "title": HOSTILE, "premise": "p"})
    turn = session.begin_turn(TERMINAL.parse_action("ls", scenario))
    session.finish_turn(turn, observation="a", reasoning="", status="interrupted", note=HOSTILE)
    turn.action = type(turn.action)(turn.action.domain, turn.action.payload, HOSTILE)
    turn.control = HOSTILE
    turn.judgement = Verdict(None, error=HOSTILE, judge=HOSTILE).to_dict()
    return session


def test_markdown_export_shows_texts_from_a_file_literally() -> None:
    from markdown_it import MarkdownIt

    markdown = markdown_transcript([hostile_session()], title=HOSTILE)
    assert "\x1b" not in markdown and "\x07" not in markdown
    parser = MarkdownIt("commonmark").enable(["table", "strikethrough"])
    tokens = parser.parse(markdown)
    kinds = {t.type for t in tokens}
    # the structure is the export's own: nothing a file's text could start
    for forbidden in (
        "bullet_list_open",
        "ordered_list_open",
        "blockquote_open",
        "code_block",
        "hr",
        "table_open",
    ):
        assert forbidden not in kinds, forbidden
    for token in tokens:
        if token.type == "html_block":  # only the export's own <details> blocks
            assert token.content.startswith(("<details><summary>System prompt", "</details>"))
        if token.type == "fence":
            assert token.info in ("markdown", "")
    headings = [
        (tokens[i].tag, tokens[i + 1]) for i, t in enumerate(tokens) if t.type == "heading_open"
    ]
    assert [tag for tag, _ in headings] == ["h1", "h2", "h3"]
    for tag, inline in headings:
        assert inline.children is not None
        assert {c.type for c in inline.children} == {"text"}  # no link, image, html, emphasis
        shown = "".join(c.content for c in inline.children)
        expected = {"h1": "", "h2": "Terminal: ", "h3": "Turn 1: "}[tag] + HOSTILE_SHOWN
        assert shown == expected
    # the other lines that carry a file's text show it as written too
    inlines = [t for t in tokens if t.type == "inline"]
    texts = ["".join(c.content for c in t.children or [] if c.type == "text") for t in inlines]
    for label in (
        "Fictional world: ",
        "Control instruction: ",
        "interrupted: ",
        f"Judged by {HOSTILE_SHOWN}: no judgement (",
    ):
        assert any(label + HOSTILE_SHOWN in text for text in texts), label
    links = [c for t in inlines for c in t.children or [] if c.type in ("link_open", "image")]
    assert links == []
    description = next(t for t in texts if t.startswith("A box."))
    assert "# a heading" in description and "1. a numbered list" in description
    assert "[link]: http://t/ref" in description


def test_an_empty_title_falls_back_and_plain_names_stay_readable() -> None:
    session, _ = new_session(TERMINAL, Scenario("box", "web_search demo", "plain words"))
    markdown = markdown_transcript([session], title="")
    assert markdown.startswith("# AgentWorld session\n\n## Terminal: web_search demo\n")
    assert "plain words" in markdown


def test_json_transcript_has_every_turn_exactly() -> None:
    rec = recorded_session()
    session = rec.session
    data = json.loads(json_transcript([session], reasoning=True))
    assert data["format"] == "agentworld-transcript"
    (out,) = data["sessions"]
    assert out["domain"] == "terminal" and out["system_prompt"] == session.system_prompt
    assert [t["observation"] for t in out["turns"]] == [t.observation for t in session.turns]
    assert [t["status"] for t in out["turns"]] == [t.status for t in session.turns]
    assert out["turns"][0]["reasoning"] == "thinking about ls"
    lean = json.loads(json_transcript([session]))
    assert "reasoning" not in lean["sessions"][0]["turns"][0]
    assert "reasoning" not in lean["sessions"][0]["turns"][-1]["attempts"][0]


# -- import ----------------------------------------------------------------------------------
def turn_text(number: int, action: Any, state: str | None = None) -> str:
    parts = [f"### Turn {number}"]
    if state is not None:
        parts.append(f"**Current State:**\n```\n{state}\n```")
    parts.append(f"**Action:**\n```json\n{json.dumps(action)}\n```")
    return "\n\n".join(parts)


def write_trajectory(
    handle: Any, task: str, first_id: int, system: str, turns: list[tuple[str, str]]
) -> None:
    """Lines in the benchmark's layout: every line holds the whole lists, one per turn."""
    prompts = [p for p, _ in turns]
    responses = [r for _, r in turns]
    for i, prompt in enumerate(prompts, 1):
        line = {
            "task": task,
            "id": first_id + i,
            "prompt": prompts,
            "response": responses,
            "current_prompt": prompt,
            "system_str": system,
            "turn_idx": i,
            "total_turns": len(prompts),
        }
        handle.write(json.dumps(line) + "\n")


@pytest.fixture
def bench_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "AgentWorldBench"
    folder.mkdir()
    obs = "**Environment Observation:**\n"
    with (folder / "terminal_test.jsonl").open("w") as f:
        for k, cmd in ((100, "ls"), (200, "whoami")):
            write_trajectory(
                f,
                "terminal",
                k,
                f"You simulate a Linux terminal ({cmd}).",
                [
                    (
                        turn_text(1, [{"keystrokes": f"{cmd}\n", "duration": 1}], "root@x:/# "),
                        obs + f"{cmd} output\nroot@x:/# ",
                    ),
                    (turn_text(2, [{"keystrokes": "pwd\n", "duration": 1}]), obs + "/\nroot@x:/# "),
                    (
                        turn_text(3, [{"keystrokes": "C-c", "duration": 0.5}]),
                        obs + "^C\nroot@x:/# ",
                    ),
                ],
            )
        f.write("\n{broken json\n")
    with (folder / "mcp_test.jsonl").open("w") as f:
        write_trajectory(
            f,
            "agentworldbench/mcp",
            300,
            "You simulate these tools: get_weather(city).",
            [
                (turn_text(1, {"name": "get_weather", "arguments": {"city": "Oslo"}}), '{"t": 3}'),
                (turn_text(2, {"name": "get_weather", "arguments": {"city": "?"}}), "Error 404"),
            ],
        )
    with (folder / "web_test.jsonl").open("w") as f:
        write_trajectory(
            f,
            "web",
            400,
            "You simulate a browser's accessibility tree.",
            [
                (
                    turn_text(1, {"name": "click", "arguments": {"bid": "12"}}, "[12] link 'Home'"),
                    "[1] page 'Home'",
                ),
                (turn_text(2, {"name": "go_back", "arguments": {}}), "[1] page 'Start'"),
            ],
        )
    (folder / "README.md").write_text("not a benchmark file")
    (folder / "notes.jsonl").write_text('{"task": "terminal"}\n')  # not *_test.jsonl
    return folder


def test_import_a_benchmark_folder_lists_trajectories(bench_dir: Path) -> None:
    bench = load_benchmark(bench_dir)
    assert bench.samples == 10
    assert bench.domains() == ["mcp", "terminal", "web"]
    assert len(bench.trajectories) == 4
    assert len(bench.problems) == 1 and "terminal_test.jsonl:" in bench.problems[0]
    assert "invalid JSON" in bench.problems[0]
    terminal = [t for t in bench.trajectories if t.domain == "terminal"]
    assert [t.id for t in terminal] == ["101", "201"]
    assert [t.turn_count for t in terminal] == [3, 3]
    assert [s.turn_idx for s in terminal[0].samples] == [1, 2, 3]
    assert terminal[1].title == '[{"keystrokes": "whoami\\n", "duration": 1}]'
    assert bench.find("301") is not None and bench.find("301").domain == "mcp"  # type: ignore[union-attr]
    single = load_benchmark(bench_dir / "web_test.jsonl")
    assert [t.domain for t in single.trajectories] == ["web"]


def test_every_sample_rebuilds_a_session_with_its_conversation(bench_dir: Path) -> None:
    bench = load_benchmark(bench_dir)
    checked = set()
    for trajectory in bench.trajectories:
        if trajectory.domain not in DOMAINS:
            continue
        domain = get_domain(trajectory.domain)
        for sample in trajectory.samples:
            session = sample_session(sample, domain)
            current = session.turns[-1]
            assert current.status == "pending" and current.number == sample.turn_idx
            messages = session.prompt(current).messages
            assert messages == sample.conversation()
            line = {
                "system_str": sample.system_str,
                "prompt": list(sample.prompt),
                "response": list(sample.response),
                "current_prompt": sample.current_prompt,
                "turn_idx": sample.turn_idx,
            }
            assert messages == evaluator_messages(line)
            checked.add(trajectory.domain)
    assert "terminal" in checked


def test_recorded_actions_come_back_as_data() -> None:
    action = recorded_action("terminal", turn_text(4, [{"keystrokes": "ls\n", "duration": 1}]))
    assert action.payload == [{"keystrokes": "ls\n", "duration": 1}]
    odd = recorded_action("os", "### Turn 1\n\n**Action:**\n```python\npyautogui.click(3, 4)\n```")
    assert odd.payload == "pyautogui.click(3, 4)"
    bare = recorded_action("web", "click the button")
    assert bare.payload == "click the button"


def test_continue_a_trajectory_from_any_turn(bench_dir: Path, tmp_path: Path) -> None:
    trajectory = load_benchmark(bench_dir / "terminal_test.jsonl").trajectories[0]
    session = trajectory_session(trajectory, TERMINAL, upto=2)
    assert session.system_prompt == trajectory.system_str
    assert [t.observation for t in session.turns] == trajectory.responses[:2]
    turn = session.begin_turn(TERMINAL.parse_action("id", session.scenario))
    assert turn.number == 3 and turn.user_message.startswith("### Turn 3")
    messages = session.prompt(turn).messages
    assert messages[:-1] == trajectory.samples[2].conversation()[:-1]
    assert messages[-1]["content"] == turn.user_message
    with pytest.raises(TrajectoryError, match="3 recorded turns, not 5"):
        trajectory_session(trajectory, TERMINAL, upto=5)
    with pytest.raises(TrajectoryError, match="from the terminal domain, not"):
        trajectory_session(trajectory, get_domain("web"))


def test_replay_predicts_each_turn_from_the_recorded_history(
    bench_dir: Path, scripted_model: Any
) -> None:
    from agentworld_tui.engines.base import Finished, GenerationControl, GenerationParams
    from agentworld_tui.engines.llama import LlamaEngine
    from agentworld_tui.simulator import run_turn

    trajectory = load_benchmark(bench_dir / "terminal_test.jsonl").trajectories[0]
    model = scripted_model(
        "the user ran a command</think><predicted_observation>predicted screen\nroot@x:/# "
        "</predicted_observation>"
    )
    engine = LlamaEngine(model, n_ctx=2048, threads=2)
    engine.load()
    try:
        replay = Replay(trajectory, TERMINAL)
        params = GenerationParams(max_tokens=128, temperature=0.0)
        steps = []
        while (step := replay.next_step()) is not None:
            sent = replay.session.prompt(step.turn).messages
            assert sent == trajectory.samples[step.number - 1].conversation()
            events = list(run_turn(engine, replay.session, step.turn, params, GenerationControl()))
            assert isinstance(events[-1], Finished)
            steps.append(step)
    finally:
        engine.unload()
    assert [s.number for s in steps] == [1, 2, 3]
    for step in steps:
        assert step.turn.observation == "predicted screen\nroot@x:/#"
        assert step.reference == trajectory.responses[step.number - 1]
        diff = step.diff()
        assert diff[:2] == ["--- recorded", "+++ predicted"]
        assert "+predicted screen" in diff
    # the recorded history is untouched by the predictions
    assert [t.observation for t in replay.session.turns] == trajectory.responses
    carry_on = replay.continue_from(1)
    assert len(carry_on.turns) == 1 and carry_on is not replay.session
    assert observation_diff("same", "same") == []


def test_an_export_imports_back_as_the_same_trajectory(tmp_path: Path) -> None:
    rec = recorded_session()
    session = rec.session
    session.turns[4].omitted_turns = 0  # one whole trajectory, as the benchmark's files are
    path = tmp_path / "terminal_test.jsonl"
    path.write_text(agentworldbench_jsonl([session]))
    bench = load_benchmark(tmp_path)
    (trajectory,) = bench.trajectories
    shown = [t for t in session.turns if t.shown]
    assert trajectory.prompts == [t.user_message for t in shown]
    assert trajectory.responses == [t.observation for t in shown]
    for sample, turn in zip(trajectory.samples, shown, strict=True):
        rebuilt = sample_session(sample, TERMINAL)
        assert rebuilt.prompt(rebuilt.turns[-1]).messages == sent_messages(session, turn)


def test_bad_benchmark_input_gives_one_line_reasons(tmp_path: Path) -> None:
    with pytest.raises(TrajectoryError, match="no such file or folder"):
        load_benchmark(tmp_path / "nothing")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(TrajectoryError, match=r"no \*_test\.jsonl files"):
        load_benchmark(empty)
    bad = tmp_path / "bad_test.jsonl"
    bad.write_text(
        '{"task": "terminal", "prompt": "one", "response": 3}\n'
        '{"task": "terminal", "prompt": ["a"], "turn_idx": 0}\n'
        "[1, 2]\n"
    )
    with pytest.raises(TrajectoryError) as info:
        load_benchmark(bad)
    assert "no benchmark samples found" in str(info.value)
    assert "response must be a list of texts" in str(info.value)
    binary = tmp_path / "bin_test.jsonl"
    binary.write_bytes(b"\xff\xfe{}\n")
    with pytest.raises(TrajectoryError, match="not UTF-8"):
        load_benchmark(binary)


def test_the_app_and_bench_read_benchmark_lines_alike(tmp_path: Path) -> None:
    """One reader serves replay and bench: the same samples, the same bad lines said (up
    to each one's limit, then counted), the same refusal of a file that is not UTF-8."""
    from agentworld_tui.evaluation.bench import MAX_PROBLEMS, BenchError, load_samples

    good = '{"task": "terminal", "id": "t", "prompt": ["ls"], "response": ["a"]}\n'
    path = tmp_path / "terminal_test.jsonl"
    path.write_text(good + "[1]\n\n" * 60 + good.replace('"t"', '"u"'))
    replay, bench = load_benchmark(path), load_samples(path)
    assert [s.id for t in replay.trajectories for s in t.samples] == ["t", "u"]
    assert [(s.id, s.source) for s in bench.samples] == [
        ("t", "terminal_test.jsonl:1"),
        ("u", "terminal_test.jsonl:122"),
    ]
    assert replay.problems[0] == "terminal_test.jsonl:2: a line must be a JSON object"
    assert replay.problems[-1] == f"{60 - REPLAY_PROBLEMS} more bad lines skipped"
    assert bench.problems[:MAX_PROBLEMS] == replay.problems[:MAX_PROBLEMS]
    assert bench.problems[-1] == f"{60 - MAX_PROBLEMS} more bad lines skipped"
    path.write_bytes(good.encode() + b"\xff\n")
    with pytest.raises(BenchError, match=r"terminal_test\.jsonl: not UTF-8 text"):
        load_samples(path)
    with pytest.raises(TrajectoryError, match=r"terminal_test\.jsonl: not UTF-8 text"):
        load_benchmark(path)


def test_exports_carry_the_output_as_generated_where_they_have_room() -> None:
    """The raw output (and what the extraction left out) goes into the JSON and Markdown
    exports with the reasoning; without it, neither (the raw text holds the reasoning)."""
    rec = recorded_session()
    session = rec.session
    turn = session.turns[0]
    turn.raw = "thinking about ls</think><predicted_observation>a</predicted_observation>b"
    turn.extraction = "text outside the observation block left out"
    full = json.loads(json_transcript([session], reasoning=True))
    assert full["sessions"][0]["turns"][0]["raw"] == turn.raw
    assert full["sessions"][0]["turns"][0]["extraction"] == turn.extraction
    lean = json.loads(json_transcript([session]))
    assert "raw" not in lean["sessions"][0]["turns"][0]
    shown = markdown_transcript([session], reasoning=True)
    assert "*Extraction: text outside the observation block left out.*" in shown
    assert "The output as generated" in shown and "</predicted_observation>b" in shown
    assert "The output as generated" not in markdown_transcript([session])
