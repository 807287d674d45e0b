"""The llama.cpp engine on real llama.cpp, with scripted GGUF models whose output is known."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import jinja2
import llama_cpp
import pytest
from ggufgen import CHATML_THINK_TEMPLATE, split_script

from agentworld_tui.domains.terminal import TerminalDomain
from agentworld_tui.engines.answer import CLOSE_REASONING
from agentworld_tui.engines.base import (
    AnswerDelta,
    EngineError,
    EngineEvent,
    Finished,
    GenerationControl,
    GenerationParams,
    PromptProgress,
    ReasoningDelta,
)
from agentworld_tui.engines.llama import LlamaEngine
from agentworld_tui.engines.prefix import common_prefix
from agentworld_tui.simulator import run_turn
from agentworld_tui.world.domain import Scenario
from agentworld_tui.world.session import Session

REASONING = "The agent lists files. The cwd is ~/project and it holds a README and src."
OBSERVATION = "user@devbox:~/project$ ls\nREADME.md  src\nuser@devbox:~/project$"
SCRIPT = f"{REASONING}</think>\n<predicted_observation>\n{OBSERVATION}\n</predicted_observation>"
MESSAGES = [
    {"role": "system", "content": "You are a Linux terminal."},
    {"role": "user", "content": "### Turn 1\n\n**Action:**\n```json\nls\n```"},
]
GREEDY = GenerationParams(temperature=0.0)
# Pieces of a long reasoning, all distinct, for streams that must be stopped part-way.
LONG_REASONING = [f"step {i:03d}; " for i in range(300)]


@dataclass
class Run:
    events: list[EngineEvent] = field(default_factory=list)
    reasoning: str = ""
    answer: str = ""
    """The answer view at the end: deltas appended, a reset clears it."""

    @property
    def finished(self) -> Finished:
        last = self.events[-1]
        assert isinstance(last, Finished)
        return last

    def add(self, event: EngineEvent) -> None:
        self.events.append(event)
        if isinstance(event, ReasoningDelta):
            self.reasoning += event.text
        elif isinstance(event, AnswerDelta):
            self.answer = ("" if event.reset else self.answer) + event.text


def collect(
    events: Iterator[EngineEvent], on_event: Callable[[EngineEvent, Run], None] | None = None
) -> Run:
    run = Run()
    for event in events:
        run.add(event)
        if on_event is not None:
            on_event(event, run)
    return run


def from_another_thread(request: Callable[[], None]) -> None:
    """Call ``request`` on another thread and wait until it has been called."""
    done = threading.Event()

    def call() -> None:
        request()
        done.set()

    threading.Thread(target=call, daemon=True).start()
    assert done.wait(10)


def p_eval(engine: LlamaEngine) -> int:
    """Prompt tokens llama.cpp itself counted as batch-evaluated in this context."""
    return int(llama_cpp.llama_perf_context(engine._llm.ctx).n_p_eval)


# -- output -----------------------------------------------------------------------------


def test_greedy_output_is_the_script(scripted_model, llama_engine) -> None:
    engine = llama_engine(scripted_model(SCRIPT))
    run = collect(engine.stream(MESSAGES, GREEDY, GenerationControl()))
    done = run.finished
    assert (done.reasoning, done.observation, done.closed_reasoning) == (
        REASONING,
        OBSERVATION,
        True,
    )
    assert run.reasoning.strip() == REASONING
    assert run.answer.rstrip() == OBSERVATION
    stats = done.stats
    assert stats.stop_reason == "eos"
    assert stats.generated_tokens == len(split_script(SCRIPT))
    assert stats.prompt_tokens == stats.evaluated_prompt_tokens > 0
    assert 0 < stats.reasoning_tokens < stats.generated_tokens
    assert stats.n_ctx == 2048
    progress = [e for e in run.events if isinstance(e, PromptProgress)]
    assert progress and progress[-1].evaluated == progress[-1].total == stats.prompt_tokens
    # Reasoning streams before the answer starts.
    kinds = [type(e) for e in run.events if isinstance(e, ReasoningDelta | AnswerDelta)]
    assert kinds.index(AnswerDelta) > kinds.index(ReasoningDelta)
    assert ReasoningDelta not in kinds[kinds.index(AnswerDelta) :]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_sampled_output_at_the_recommended_temperature_is_the_script(
    scripted_model, llama_engine, seed: int
) -> None:
    engine = llama_engine(scripted_model(SCRIPT))
    params = GenerationParams(temperature=0.6, top_p=0.95, top_k=20, seed=seed)
    done = collect(engine.stream(MESSAGES, params, GenerationControl())).finished
    assert (done.reasoning, done.observation) == (REASONING, OBSERVATION)


def test_the_same_engine_answers_again(scripted_model, llama_engine) -> None:
    engine = llama_engine(scripted_model(SCRIPT))
    first = collect(engine.stream(MESSAGES, GREEDY, GenerationControl())).finished
    second = collect(engine.stream(MESSAGES, GREEDY, GenerationControl())).finished
    assert second.observation == first.observation == OBSERVATION
    # The whole prompt was cached; one token is evaluated again for fresh logits.
    assert second.stats.evaluated_prompt_tokens == 1


def test_multibyte_characters_split_across_tokens(scripted_model, llama_engine) -> None:
    pieces: list[str | bytes] = [
        b"ok \xe6\x97",  # 日 split after two bytes
        b"\xa5\xe6\x9c\xac",
        b"\xe8\xaa\x9e \xf0\x9f",  # 😀 split in half
        b"\x98\x80 caf\xc3",
        b"\xa9</think>",
        "<predicted_observation>",
        b"\xe2\x94",  # ─ at the very start of the answer
        b"\x80\xe2\x94\x80 r\xc3",
        b"\xa9sum\xc3\xa9",
        "</predicted_observation>",
    ]
    engine = llama_engine(scripted_model(pieces))
    run = collect(engine.stream(MESSAGES, GREEDY, GenerationControl()))
    assert run.finished.reasoning == "ok 日本語 😀 café"
    assert run.finished.observation == "── résumé"
    deltas = [e.text for e in run.events if isinstance(e, ReasoningDelta | AnswerDelta)]
    assert not any("\ufffd" in d for d in deltas)
    assert run.reasoning == "ok 日本語 😀 café"
    assert run.answer == "── résumé"


# -- stopping and steering ----------------------------------------------------------------


def test_cancel_from_another_thread_keeps_the_partial_text(scripted_model, llama_engine) -> None:
    engine = llama_engine(scripted_model(LONG_REASONING))
    control = GenerationControl()

    def on_event(event: EngineEvent, run: Run) -> None:
        if isinstance(event, ReasoningDelta) and len(run.reasoning) >= 30 and not control.cancelled:
            from_another_thread(control.cancel)

    run = collect(engine.stream(MESSAGES, GREEDY, control), on_event)
    done = run.finished
    assert done.stats.stop_reason == "cancelled"
    assert done.reasoning and "".join(LONG_REASONING).startswith(done.reasoning)
    assert 3 <= done.stats.generated_tokens < len(LONG_REASONING)
    assert done.observation == ""


def test_cancel_while_the_prompt_is_evaluated(scripted_model, llama_engine) -> None:
    engine = llama_engine(scripted_model(SCRIPT), n_batch=16)
    control = GenerationControl()
    long_prompt = [MESSAGES[0], {"role": "user", "content": "x " * 300}]

    def on_event(event: EngineEvent, run: Run) -> None:
        if isinstance(event, PromptProgress) and not control.cancelled:
            from_another_thread(control.cancel)

    run = collect(engine.stream(long_prompt, GREEDY, control), on_event)
    assert run.finished.stats.stop_reason == "cancelled"
    assert run.finished.stats.generated_tokens == 0
    progress = [e for e in run.events if isinstance(e, PromptProgress)]
    assert len(progress) == 1
    # What was read before the stop is counted, as the progress said.
    assert run.finished.stats.evaluated_prompt_tokens == progress[0].evaluated == 16
    assert run.finished.stats.prompt_tokens == progress[0].total


def test_cancel_through_run_turn_marks_the_turn_interrupted(scripted_model, llama_engine) -> None:
    engine = llama_engine(scripted_model(LONG_REASONING))
    session = new_terminal_session()
    turn = session.begin_turn(DOMAIN.parse_action("ls", SCENARIO))
    control = GenerationControl()

    def on_event(event: EngineEvent, run: Run) -> None:
        if isinstance(event, ReasoningDelta) and not control.cancelled:
            from_another_thread(control.cancel)

    collect(run_turn(engine, session, turn, GREEDY, control), on_event)
    assert turn.status == "interrupted"
    assert turn.note == "stopped by you"
    assert turn.reasoning and "".join(LONG_REASONING).startswith(turn.reasoning)


ANSWER_SCRIPT = [*LONG_REASONING[:40], "</think>", "<predicted_observation>", "$ ls", "\nsrc"]


def restarted_reasoning() -> str:
    """The reasoning the scripted model writes again after a close the engine wrote."""
    return "".join(LONG_REASONING[:40]).strip()


def test_answer_now_closes_the_reasoning_and_continues_in_the_same_generation(
    scripted_model, llama_engine
) -> None:
    path = scripted_model(ANSWER_SCRIPT)
    baseline_engine = llama_engine(path)
    before = p_eval(baseline_engine)
    baseline = collect(baseline_engine.stream(MESSAGES, GREEDY, GenerationControl())).finished
    baseline_p_eval = p_eval(baseline_engine) - before

    engine = llama_engine(path)
    before = p_eval(engine)
    control = GenerationControl()
    asked: list[int] = []

    def on_event(event: EngineEvent, run: Run) -> None:
        if isinstance(event, ReasoningDelta) and event.generated == 3 and not asked:
            asked.append(event.generated)
            from_another_thread(control.answer_now)

    run = collect(engine.stream(MESSAGES, GREEDY, control), on_event)
    done = run.finished
    assert done.stats.stop_reason == "eos"
    assert done.closed_reasoning
    assert done.stats.reasoning_tokens == 3
    # The scripted model starts its script over after "</think>\n\n", and closes that
    # reasoning again: the reasoning ends at the last close before the answer.
    assert done.reasoning == "".join(LONG_REASONING[:3]) + "\n\n" + restarted_reasoning()
    assert done.observation == "$ ls\nsrc"
    assert run.answer == "$ ls\nsrc"
    assert done.stats.evaluated_prompt_tokens == baseline.stats.evaluated_prompt_tokens
    # llama.cpp's own counter: the prompt was evaluated once, plus the injected close (and
    # the reasoning token decoded just before it: llama.cpp books every token decoded
    # between two reads of the logits as prompt when there are several).
    close = engine._llm.tokenize(CLOSE_REASONING.encode(), add_bos=False, special=True)
    assert p_eval(engine) - before == baseline_p_eval + len(close) + 1
    # The context holds prompt, three reasoning tokens, then the close, in one sequence.
    prompt_tokens = done.stats.prompt_tokens
    held = list(engine._llm.input_ids[: engine._llm.n_tokens])
    assert held[prompt_tokens + 3 : prompt_tokens + 3 + len(close)] == close


def test_reasoning_budget_caps_the_reasoning(scripted_model, llama_engine) -> None:
    engine = llama_engine(scripted_model(ANSWER_SCRIPT))
    params = GenerationParams(temperature=0.0, reasoning_budget=5)
    done = collect(engine.stream(MESSAGES, params, GenerationControl())).finished
    assert done.stats.reasoning_tokens == 5
    assert done.reasoning == "".join(LONG_REASONING[:5]) + "\n\n" + restarted_reasoning()
    assert done.observation == "$ ls\nsrc"


def test_thinking_off_renders_a_closed_think_block(scripted_model, llama_engine) -> None:
    script = f"<predicted_observation>\n{OBSERVATION}\n</predicted_observation>"
    engine = llama_engine(scripted_model(script))
    params = GenerationParams(temperature=0.0, enable_thinking=False)
    full, _ = engine.render(MESSAGES, params)
    assert full.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    run = collect(engine.stream(MESSAGES, params, GenerationControl()))
    assert run.finished.reasoning == ""
    assert run.finished.observation == OBSERVATION
    assert run.finished.stats.reasoning_tokens == 0
    assert not any(isinstance(e, ReasoningDelta) for e in run.events)


DOMAIN = TerminalDomain()
SCENARIO = Scenario("demo", "Demo", "A small Python project.", state="user@devbox:~/project$ ")


def new_terminal_session() -> Session:
    return Session(DOMAIN, SCENARIO, "You are a Linux terminal. " + SCENARIO.description)


def test_max_tokens_while_reasoning_gives_no_answer(scripted_model, llama_engine) -> None:
    engine = llama_engine(scripted_model(SCRIPT))
    session = new_terminal_session()
    turn = session.begin_turn(DOMAIN.parse_action("ls", SCENARIO))
    params = GenerationParams(temperature=0.0, max_tokens=5)
    run = collect(run_turn(engine, session, turn, params, GenerationControl()))
    assert run.finished.stats.stop_reason == "max_tokens"
    assert run.finished.stats.generated_tokens == 5
    assert turn.status == "no_answer"
    assert turn.note == "no answer: the model stopped while reasoning (max tokens)"
    assert turn.observation == ""


# -- untrusted model files ------------------------------------------------------------------


@pytest.mark.parametrize(
    "template",
    [
        "{{ ''.__class__.__mro__[1].__subclasses__() }}",
        "{{ cycler.__init__.__globals__.os.popen('touch MARKER').read() }}",
        "{{ joiner.__init__.__globals__['os'].system('touch MARKER') }}",
        "{% set _ = messages.append({'role': 'user', 'content': 'x'}) %}{{ messages }}",
        "{{ messages.pop() }}",
        "{{ raise_exception('this template takes no system message') }}",
        "{{ raise_exception('two\\nlines \\x1b]0;title\\x07 and an escape') }}",
        "{{ 1 / 0 }}",
        "{% macro again() %}{{ again() }}{% endmacro %}{{ again() }}",
        "{{ range(10 ** 9) | list }}",
    ],
)
def test_chat_template_runs_in_a_sandbox(
    scripted_model, llama_engine, template: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    engine = llama_engine(scripted_model(SCRIPT, chat_template=template))
    with pytest.raises(EngineError) as caught:
        collect(engine.stream(MESSAGES, GREEDY, GenerationControl()))
    assert "chat template" in str(caught.value)
    assert "\n" not in str(caught.value) and "\x1b" not in str(caught.value)
    assert not (tmp_path / "MARKER").exists()
    if "no system message" in template:
        assert "this template takes no system message" in str(caught.value)
    # Through run_turn the failure is the turn's error, not an exception.
    session = new_terminal_session()
    turn = session.begin_turn(DOMAIN.parse_action("ls", SCENARIO))
    run = collect(run_turn(engine, session, turn, GREEDY, GenerationControl()))
    assert run.finished.error and turn.status == "error"


def test_chat_template_helpers_work(scripted_model, llama_engine) -> None:
    template = (
        "{{ strftime_now('%Y') | length }}|{{ {'a': 'é'} | tojson }}|"
        "{% for m in messages %}{{ m['role'] }};{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n<think>\n{% endif %}"
    )
    engine = llama_engine(scripted_model(SCRIPT, chat_template=template))
    full, _ = engine.render(MESSAGES, GREEDY)
    assert full.startswith('4|{"a": "é"}|system;user;')
    assert collect(engine.stream(MESSAGES, GREEDY, GenerationControl())).finished.observation == (
        OBSERVATION
    )


def test_a_template_that_does_not_compile_is_an_engine_error(scripted_model) -> None:
    engine = LlamaEngine(scripted_model(SCRIPT, chat_template="{% for %}"), n_ctx=256)
    with pytest.raises(EngineError, match="chat template"):
        engine.load()
    assert not engine.loaded


def check_load_error(path: Path, *expected: str, capfd: pytest.CaptureFixture[str]) -> None:
    engine = LlamaEngine(path, n_ctx=256)
    with pytest.raises(EngineError) as caught:
        engine.load()
    message = str(caught.value)
    assert "\n" not in message
    for part in expected:
        assert part in message
    assert not engine.loaded
    out, err = capfd.readouterr()
    assert out == "" and err == ""  # llama.cpp's own messages go to the log, not the screen


def test_missing_model_file(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    check_load_error(tmp_path / "nope.gguf", "not found", "nope.gguf", capfd=capfd)


def test_folder_instead_of_a_model(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    check_load_error(tmp_path, "folder", capfd=capfd)


def test_file_that_is_not_gguf(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "model.gguf"
    path.write_text("<html>404 Not Found</html>")
    check_load_error(path, "not a GGUF", capfd=capfd)


def test_truncated_model_file(scripted_model, capfd: pytest.CaptureFixture[str]) -> None:
    path = scripted_model(SCRIPT)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    check_load_error(path, "could not load", path.name, "truncated", capfd=capfd)


def test_stream_without_a_loaded_model(scripted_model) -> None:
    engine = LlamaEngine(scripted_model(SCRIPT))
    with pytest.raises(EngineError, match="no model"):
        collect(engine.stream(MESSAGES, GREEDY, GenerationControl()))


# -- the cache across turns ---------------------------------------------------------------


def tokenizer(path: Path) -> Callable[[str], list[int]]:
    """The model's tokenizer, loaded apart from the engine (vocabulary only)."""
    vocab = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
    return lambda text: list(vocab.tokenize(text.encode(), add_bos=False, special=True))


def rendered(messages: list[dict[str, str]]) -> str:
    """The prompt as the test model's ChatML template writes it (rendered here, not by
    the engine)."""
    env = jinja2.Environment()
    return env.from_string(CHATML_THINK_TEMPLATE).render(
        messages=messages, add_generation_prompt=True
    )


def play_session(engine: LlamaEngine, turns: int) -> tuple[Session, list[list[int]], list[int]]:
    """Play ``turns`` turns; returns the session, each turn's prompt tokens (tokenized
    independently) and each turn's evaluated prompt tokens from the engine's stats."""
    tokenize = tokenizer(engine.model_path)
    session = new_terminal_session()
    prompts: list[list[int]] = []
    evaluated: list[int] = []
    for n in range(turns):
        turn = session.begin_turn(DOMAIN.parse_action(f"cat notes-{n}.txt", SCENARIO))
        prompts.append(tokenize(rendered(session.prompt(turn).messages)))
        done = collect(run_turn(engine, session, turn, GREEDY, GenerationControl())).finished
        assert turn.status == "complete", turn.note
        assert turn.omitted_turns == 0, "give the engine a larger n_ctx"
        assert done.stats.prompt_tokens == len(prompts[-1])
        evaluated.append(done.stats.evaluated_prompt_tokens)
    return session, prompts, evaluated


def new_since_previous(prompts: list[list[int]], n: int) -> int:
    import numpy as np

    now, before = np.asarray(prompts[n]), np.asarray(prompts[n - 1])
    return len(now) - common_prefix(now, before)


def test_kv_prefix_is_reused_across_turns(scripted_model, llama_engine) -> None:
    engine = llama_engine(scripted_model(SCRIPT))
    session, prompts, evaluated = play_session(engine, 5)
    assert evaluated[0] == len(prompts[0])
    for n in range(1, 5):
        new = new_since_previous(prompts, n)
        assert 0 < new < len(prompts[n]) // 2
        assert evaluated[n] == new, f"turn {n + 1}"
    # Earlier turns' reasoning is never part of the history.
    assert all(t.reasoning == REASONING for t in session.turns)
    assert REASONING not in rendered(session.prompt(session.turns[-1]).messages)


def test_answer_tag_without_a_closed_reasoning_reaches_the_answer_view(
    scripted_model, llama_engine
) -> None:
    engine = llama_engine(scripted_model("pondering<predicted_observation>$ id\nuid=0(root)"))
    run = collect(engine.stream(MESSAGES, GREEDY, GenerationControl()))
    assert run.finished.closed_reasoning is False
    assert run.finished.observation == "$ id\nuid=0(root)"
    assert run.answer == "$ id\nuid=0(root)"
    assert run.finished.reasoning == "pondering"
