"""Checkpoints where the last action begins: a changed last turn re-reads only its action.

The engine saves a recurrent model's state at two points of each prompt: at the end of the
history (the next turn's prompt starts with it) and where the last user message's content
begins. The second is what a turn that ended without an answer (it is left out of the
history), an undone last turn followed by another action, or an edited last action shares
with the prompt that comes next; without it the whole prompt would be read again. These
tests play such sessions on generated recurrent (mamba) and hybrid (jamba) models through
the app's own ``Session`` and ``run_turn``, with a byte budget that holds only a few states.
"""

from __future__ import annotations

from pathlib import Path

import gguf
import llama_cpp
import numpy as np
import pytest
from ggufgen import write_qwen35moe_model, write_recurrent_model
from test_engine_llama import (
    DOMAIN,
    GREEDY,
    OBSERVATION,
    SCENARIO,
    SCRIPT,
    collect,
    new_terminal_session,
    rendered,
    tokenizer,
)
from test_hybrid_cache import conversation, last_logits

from agentworld_tui.engines.base import Finished, GenerationControl, GenerationParams
from agentworld_tui.engines.llama import LlamaEngine
from agentworld_tui.engines.prefix import common_prefix
from agentworld_tui.simulator import run_turn
from agentworld_tui.world.session import Session, Turn

TARGET = 1.1
USER_HEADER = "<|im_start|>user\n"
ASSISTANT_HEADER = "<|im_start|>assistant\n"
# Stops inside the script's reasoning: the turn has no answer and is left out of the history.
CUT_SHORT = GenerationParams(temperature=0.0, max_tokens=4)


@pytest.fixture(params=["mamba", "jamba", "qwen35moe"])
def recurrent_path(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    hybrid = request.param == "jamba"
    path = tmp_path / f"{request.param}.gguf"
    if request.param == "qwen35moe":
        return write_qwen35moe_model(path, SCRIPT)
    return write_recurrent_model(path, SCRIPT, hybrid=hybrid, n_layer=4 if hybrid else 2)


class Player:
    """Plays turns of a terminal session; keeps each turn's prompt tokens and stats."""

    def __init__(self, engine: LlamaEngine) -> None:
        self.engine = engine
        self.session: Session = new_terminal_session()
        self.tokenize = tokenizer(engine.model_path)
        self.prompts: list[list[int]] = []
        self.texts: list[str] = []
        self.finished: list[Finished] = []

    def play(self, turn: Turn, params: GenerationParams = GREEDY) -> Finished:
        text = rendered(self.session.prompt(turn).messages)
        self.texts.append(text)
        self.prompts.append(self.tokenize(text))
        done = collect(run_turn(self.engine, self.session, turn, params, GenerationControl()))
        assert turn.omitted_turns == 0, "give the engine a larger n_ctx"
        assert done.finished.stats.prompt_tokens == len(self.prompts[-1])
        self.finished.append(done.finished)
        return done.finished

    def action(self, command: str, params: GenerationParams = GREEDY) -> Finished:
        turn = self.session.begin_turn(DOMAIN.parse_action(command, SCENARIO))
        return self.play(turn, params)

    def new_tokens(self) -> int:
        """The last prompt's tokens that the one before it did not start with."""
        now, before = np.asarray(self.prompts[-1]), np.asarray(self.prompts[-2])
        return len(now) - common_prefix(now, before)

    def action_tail(self) -> int:
        """The last prompt's tokens from where its last user message's content begins."""
        text = self.texts[-1]
        head = text[: text.rindex(USER_HEADER) + len(USER_HEADER)]
        return len(self.prompts[-1]) - len(self.tokenize(head))

    def generation_prompt(self) -> int:
        text = self.texts[-1]
        return len(self.prompts[-1]) - len(self.tokenize(text[: text.rindex(ASSISTANT_HEADER)]))


def state_size(path: Path) -> int:
    """The size of one saved (recurrent) state of the model: it does not grow with context."""
    llm = llama_cpp.Llama(model_path=str(path), n_ctx=512, verbose=False)
    llm.eval(llm.tokenize(b"a few tokens", add_bos=False))
    size = int(llama_cpp.llama_state_seq_get_size_ext(llm.ctx, 0, 1))
    llm.close()
    return size


DETOURS = ["no answer", "undo", "edit", "retry"]


@pytest.mark.parametrize("detour", DETOURS)
def test_a_changed_last_turn_reads_only_its_action_again(
    recurrent_path, llama_engine, detour: str
) -> None:
    size = state_size(recurrent_path)
    budget = int(size * 2.5)  # room for the two checkpoints of one prompt, no more
    engine = llama_engine(recurrent_path, n_ctx=8192, state_budget_bytes=budget)
    player = Player(engine)
    for n in range(4):
        player.action(f"cat notes-{n}.txt")
    session = player.session

    if detour == "no answer":
        player.action("cat notes-4.txt", CUT_SHORT)
        assert session.turns[-1].status == "no_answer"
        done = player.action("cat notes-5.txt")
    elif detour == "undo":
        player.action("cat notes-4.txt")
        session.undo()
        done = player.action("ls -la")
    elif detour == "edit":  # edit the last action: a new branch from that turn
        player.action("cat notes-4.txt")
        done = player.play(session.fork(5, DOMAIN.parse_action("pwd", SCENARIO)))
        assert session.branch_id != 0 and len(session.branches) == 2
    else:
        player.action("cat notes-4.txt")
        done = player.play(session.regenerate())
    assert session.turns[-1].status == "complete"

    evaluated = done.stats.evaluated_prompt_tokens
    new = player.new_tokens()
    print(f"\n{detour}: evaluated {evaluated}, new {new}, prompt {len(player.prompts[-1])}")
    if detour == "retry":  # the end-of-history checkpoint: only the generation prompt
        assert evaluated == player.generation_prompt()
    else:  # the action's checkpoint: only the last user message's content and what follows
        assert evaluated == player.action_tail()
        assert evaluated < len(player.prompts[-1]) // 5
    if detour == "no answer":  # the prompt before was the unanswered one
        # "### Turn " is all that the action read again shares with the unanswered one.
        assert new < evaluated <= TARGET * new
    assert len(engine.states) == 2
    assert engine.states.size <= budget
    assert all(len(c.data) == size for c in engine.states._items)

    # And the session goes on from the changed turn as from any other.
    after = player.action("cat notes-9.txt")
    assert after.stats.evaluated_prompt_tokens <= TARGET * player.new_tokens()


def test_each_turn_after_an_unanswered_one_reads_only_what_is_new(
    recurrent_path, llama_engine
) -> None:
    engine = llama_engine(recurrent_path, n_ctx=8192)
    player = Player(engine)
    player.action("ls")
    ratios = []
    for n in range(4):
        player.action(f"cat notes-{n}.txt", CUT_SHORT)
        assert player.session.turns[-1].status == "no_answer"
        done = player.action(f"cat notes-{n}.txt")
        ratios.append(done.stats.evaluated_prompt_tokens / player.new_tokens())
    assert max(ratios) <= TARGET, ratios


def test_the_saved_state_is_the_recurrent_part_only(recurrent_path, llama_engine) -> None:
    """Only the recurrent part is saved: a hybrid model's attention cache is kept in the
    context and cut back, so the checkpoints do not grow with the history."""
    engine = llama_engine(recurrent_path, n_ctx=8192)
    player = Player(engine)
    for n in range(4):
        player.action(f"cat notes-{n}.txt")
    sizes = {len(c.data) for c in engine.states._items}
    assert sizes == {state_size(recurrent_path)}
    assert len(engine.states) == 8  # two per turn
    full = int(llama_cpp.llama_state_seq_get_size(engine._llm.ctx, 0))
    if "mamba" not in recurrent_path.name:
        assert full > 2 * max(sizes)  # the whole state holds the attention cache too
    else:
        assert full == max(sizes)  # a purely recurrent model has nothing else


def with_random_attention(path: Path, scale: float, seed: int = 1) -> Path:
    """Give a generated model's attention layers (jamba's, or a scripted transformer's)
    random weights (in place), small enough on the output that the script still wins; its
    logits then depend on what the attention cache holds, hundreds of positions back."""
    rng = np.random.default_rng(seed)
    reader = gguf.GGUFReader(path, "r+")
    changed = 0
    for tensor in reader.tensors:
        name = tensor.name.rsplit(".", 2)[-2]
        if name in ("attn_q", "attn_k", "attn_v", "attn_output") and tensor.data.ndim == 2:
            rows, cols = tensor.data.shape
            std = (scale if name == "attn_output" else 1.0) / np.sqrt(cols)
            tensor.data[...] = rng.standard_normal((rows, cols)) * std
            changed += 1
    reader.data.flush()
    del reader
    assert changed
    return path


def test_a_restored_partial_state_keeps_the_attention_cache_right(
    tmp_path: Path, llama_engine
) -> None:
    # Mamba blocks add nothing here (mixing 0): whatever the history does to the logits, it
    # does through the attention cache that the restore keeps and cuts back.
    path = write_recurrent_model(tmp_path / "jamba.gguf", SCRIPT, hybrid=True, n_layer=4)
    with_random_attention(path, scale=0.01)
    one_token = GenerationParams(temperature=0.0, max_tokens=1)

    restored = llama_engine(path)
    for n in range(7):
        collect(restored.stream(conversation(n), GREEDY, GenerationControl()))
    # The cache now holds turn 7's prompt and its answer; turn 7 again with another last
    # action restores the checkpoint where the last action begins.
    edited = conversation(6)
    edited[-1] = {"role": "user", "content": "ls -la"}
    done = collect(restored.stream(edited, one_token, GenerationControl())).finished
    assert done.stats.evaluated_prompt_tokens < done.stats.prompt_tokens // 10
    via_checkpoint = last_logits(restored)

    fresh = llama_engine(path)
    done = collect(fresh.stream(edited, one_token, GenerationControl())).finished
    assert done.stats.evaluated_prompt_tokens == done.stats.prompt_tokens
    np.testing.assert_allclose(via_checkpoint, last_logits(fresh), rtol=0, atol=1e-4)

    # The comparison has teeth: another first action, hundreds of tokens back, shows.
    other = conversation(6, "pwd")
    other[-1] = edited[-1]
    collect(fresh.stream(other, one_token, GenerationControl()))
    assert np.abs(last_logits(fresh) - via_checkpoint).max() > 1e-3


def test_a_checkpoint_the_cache_does_not_hold_is_not_restored(tmp_path: Path, llama_engine) -> None:
    """A hybrid's recurrent checkpoint needs the attention cache up to its position: after
    another conversation filled the cache, with no room to keep the first one's state whole
    (tests/test_conversation_states.py has that), the engine reads the prompt again."""
    path = write_recurrent_model(tmp_path / "jamba.gguf", SCRIPT, hybrid=True, n_layer=4)
    budget = int(state_size(path) * 4.5)  # the four recurrent checkpoints, no whole state
    engine = llama_engine(path, n_ctx=8192, state_budget_bytes=budget)
    first = conversation(3)
    collect(engine.stream(first, GREEDY, GenerationControl()))
    collect(engine.stream(conversation(3, "pwd"), GREEDY, GenerationControl()))
    assert len(engine.states) == 4
    assert not any(c.standalone for c in engine.states._items)
    done = collect(engine.stream(first, GREEDY, GenerationControl())).finished
    # Only the system prompt and the first user header are shared with what the cache holds.
    assert done.stats.evaluated_prompt_tokens > done.stats.prompt_tokens * 0.9
    assert done.observation == OBSERVATION


def test_a_purely_recurrent_checkpoint_needs_no_cache(tmp_path: Path, llama_engine) -> None:
    """A mamba model has no attention cache: its checkpoints stand alone, and the first
    conversation's end-of-history checkpoint serves it again after another one ran."""
    path = write_recurrent_model(tmp_path / "mamba.gguf", SCRIPT)
    budget = int(state_size(path) * 4.5)
    engine = llama_engine(path, n_ctx=8192, state_budget_bytes=budget)
    first = conversation(3)
    collect(engine.stream(first, GREEDY, GenerationControl()))
    collect(engine.stream(conversation(3, "pwd"), GREEDY, GenerationControl()))
    assert all(c.standalone for c in engine.states._items)
    done = collect(engine.stream(first, GREEDY, GenerationControl())).finished
    full, history = engine.render(first, GREEDY)
    generation_prompt = engine.count_tokens(full) - engine.count_tokens(history)
    assert done.stats.evaluated_prompt_tokens == generation_prompt
    assert done.observation == OBSERVATION
