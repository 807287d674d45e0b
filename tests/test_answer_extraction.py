"""Issue 27, item 1, end to end: what a small model writes reaches the turn whole.

A real model (Qwen2.5-0.5B) lost the beginning of MCP answers in which it wrote the
opening tag a second time: "the last block wins" kept what followed the repeated tag only.
Here scripted GGUF models write such outputs through the real llama.cpp, and a real
OpenAI-compatible server sends them, into MCP turns of the app's own ``Session``; the turn
keeps the whole answer, the raw output as generated, and a note of what was left out.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from faultserver import FaultServer, Reply
from test_engine_llama import collect

from agentworld_tui.domains.mcp import McpDomain
from agentworld_tui.engines.base import GenerationControl, GenerationParams
from agentworld_tui.engines.remote import RemoteEngine
from agentworld_tui.simulator import run_turn
from agentworld_tui.world.prompts import load_scenarios
from agentworld_tui.world.session import Session, new_session

MCP = McpDomain()
CALL = '{"name": "read_text_file", "arguments": {"path": "/home/maya/notes/inbox.md"}}'
REASONING = "The file exists; the server returns its metadata and text."
ANSWER = (
    '{\n  "path": "/home/maya/notes/inbox.md",\n  "size": 28,\n'
    '  "content": "buy milk <predicted_observation>"\n}'
)
REPEATED = ANSWER.replace('  "size"', '<predicted_observation>\n  "size"')
NOTE = "a repeated <predicted_observation> tag kept as text"
OUTPUTS = {
    "tag in a value": (f"<predicted_observation>\n{ANSWER}\n</predicted_observation>", ANSWER),
    "tag repeated mid-answer": (f"<predicted_observation>\n{REPEATED}\n", REPEATED),
}
GREEDY = GenerationParams(temperature=0.0, max_tokens=400)


def mcp_session() -> Session:
    scenario = next(s for s in load_scenarios("mcp")[0] if s.name == "filesystem")
    return new_session(MCP, scenario)[0]


def play(engine: object, params: GenerationParams) -> tuple[Session, str]:
    """One MCP turn through ``run_turn``; returns the session and the streamed answer."""
    session = mcp_session()
    turn = session.begin_turn(MCP.parse_action(CALL, session.scenario))
    run = collect(run_turn(engine, session, turn, params, GenerationControl()))  # type: ignore[arg-type]
    assert turn.status == "complete", turn.note
    return session, run.answer


@pytest.mark.parametrize("output", OUTPUTS)
@pytest.mark.parametrize("thinking", ["on", "off", "skipped"])
def test_a_scripted_model_that_repeats_the_tag_keeps_its_whole_answer(
    scripted_model, llama_engine, output: str, thinking: str
) -> None:
    text, answer = OUTPUTS[output]
    script = {
        "on": f"{REASONING}</think>\n\n{text}",
        "off": text,
        "skipped": f"{REASONING}\n{text}",  # thinking on, and no </think> ever comes
    }[thinking]
    engine = llama_engine(scripted_model(script, n_ctx_train=16384), n_ctx=8192)
    params = GenerationParams(temperature=0.0, max_tokens=400, enable_thinking=thinking != "off")
    session, streamed = play(engine, params)
    turn = session.turns[-1]
    assert turn.observation == answer
    assert streamed.rstrip() == answer
    assert turn.raw == script
    assert turn.extraction == NOTE
    assert turn.reasoning == ("" if thinking == "off" else REASONING)

    # The session file carries the raw text and the note.
    again = Session.from_dict(session.to_dict(), MCP).turns[-1]
    assert (again.raw, again.extraction, again.observation) == (script, NOTE, answer)


def test_a_clean_answer_has_no_note_and_keeps_its_raw_text(scripted_model, llama_engine) -> None:
    script = f"{REASONING}</think>\n<predicted_observation>\n{{}}\n</predicted_observation>"
    model = scripted_model(script, n_ctx_train=16384)
    session, _ = play(llama_engine(model, n_ctx=8192), GREEDY)
    turn = session.turns[-1]
    assert (turn.observation, turn.extraction, turn.raw) == ("{}", "", script)


def test_the_raw_text_has_the_close_the_engine_wrote(scripted_model, llama_engine) -> None:
    """A reasoning budget makes the engine write the close itself: the raw text shows it
    where it went into the model's sequence."""
    pieces = [f"step {i:02d}; " for i in range(30)]
    engine = llama_engine(scripted_model(pieces, n_ctx_train=16384), n_ctx=8192)
    params = GenerationParams(temperature=0.0, max_tokens=12, reasoning_budget=3)
    session, _ = play(engine, params)
    raw = session.turns[-1].raw
    assert raw.startswith("step 00; step 01; step 02; </think>\n\n")


# -- a server ------------------------------------------------------------------------------


@pytest.fixture
def server() -> Iterator[FaultServer]:
    with FaultServer() as running:
        yield running


def remote(server: FaultServer) -> RemoteEngine:
    engine = RemoteEngine(server.url, timeout=5.0)
    engine.load()
    return engine


def test_a_server_with_a_reasoning_parser_keeps_the_whole_answer_and_raw_text(
    server: FaultServer,
) -> None:
    text, answer = OUTPUTS["tag repeated mid-answer"]
    content = [text[:30], text[30:61], text[61:]]
    server.queue(Reply(reasoning=["The file ", "exists."], content=content))
    session, streamed = play(remote(server), GREEDY)
    turn = session.turns[-1]
    assert (turn.observation, streamed.rstrip()) == (answer, answer)
    assert turn.raw == "<think>The file exists.</think>" + text
    assert turn.extraction == NOTE


def test_a_server_without_a_parser_sends_the_raw_text_as_it_is(server: FaultServer) -> None:
    text, answer = OUTPUTS["tag in a value"]
    script = f"{REASONING}</think>\n{text}\nThat is the file."
    server.queue(Reply(content=[script[:50], script[50:]]))
    session, _ = play(remote(server), GREEDY)
    turn = session.turns[-1]
    assert turn.observation == answer
    assert turn.raw == script
    assert turn.extraction == f"text outside the observation block left out; {NOTE}"
