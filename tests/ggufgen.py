"""Generate tiny real GGUF models for tests and benchmarks.

A *scripted* model runs the real llama.cpp graph but its output is known: one layer with
zero block weights (so the hidden state is the input token's embedding), one-hot
embeddings, and an output matrix that is a next-token table. Greedy or sampled, it writes
its script and then ``<|im_end|>``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

CHATML_THINK_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}"
    "{{ '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false -%}"
    "{{ '<think>\\n\\n</think>\\n\\n' }}"
    "{%- else -%}"
    "{{ '<think>\\n' }}"
    "{%- endif -%}"
    "{%- endif -%}"
)

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")


@lru_cache(maxsize=1)
def byte_symbols() -> tuple[str, ...]:
    """GPT-2's byte-to-unicode table: the symbol for each byte value 0..255."""
    printable = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    codes = printable[:]
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            codes.append(256 + extra)
            extra += 1
    table = dict(zip(printable, codes, strict=True))
    return tuple(chr(table[b]) for b in range(256))


def to_symbols(text: str | bytes) -> str:
    """The vocabulary string of a piece; a ``bytes`` piece may hold part of a character."""
    table = byte_symbols()
    data = text if isinstance(text, bytes) else text.encode("utf-8")
    return "".join(table[b] for b in data)


def split_script(script: str, min_len: int = 3) -> list[str]:
    """Split ``script`` into pieces that are all distinct and longer than one byte.

    llama.cpp refuses a vocabulary with duplicate strings, and a single-byte piece would
    collide with a base token.
    """
    pieces: list[str] = []
    seen: set[str] = set()
    i = 0
    while i < len(script):
        j = min(len(script), i + min_len)
        while j < len(script) and (script[i:j] in seen or len(script[i:j].encode()) < 2):
            j += 1
        piece = script[i:j]
        if piece in seen or len(piece.encode()) < 2:
            if not pieces:
                raise ValueError("script too short to split into distinct pieces")
            seen.discard(pieces[-1])
            pieces[-1] += piece
            piece = pieces[-1]
            if piece in seen:
                raise ValueError(f"cannot split script into distinct pieces near {piece!r}")
        else:
            pieces.append(piece)
        seen.add(piece)
        i = j
    return pieces


Piece = str | bytes


@dataclass(frozen=True)
class ScriptTable:
    """Vocabulary, one-hot embeddings and next-token output matrix of a scripted model."""

    vocab: list[str]
    n_embd: int
    embd: np.ndarray
    out: np.ndarray


def script_table(
    script: str | Sequence[Piece],
    *,
    logit_gap: float = 10.0,
    multiple: int = 64,
    extra: Sequence[str] = (),
) -> ScriptTable:
    """The next-token table that makes a model write ``script`` then ``<|im_end|>``.

    ``script`` may be given as ready pieces (all distinct, each a vocabulary entry); a
    ``bytes`` piece is taken byte for byte, so a piece may end in the middle of a
    multi-byte character. ``extra`` tokens (such as ``<think>``) join the vocabulary
    before the special ones (a piece of the script may be one of them).
    """
    pieces: list[Piece] = split_script(script) if isinstance(script, str) else list(script)
    symbols = list(byte_symbols())
    piece_tokens = [to_symbols(p) for p in pieces]
    extra_tokens = [to_symbols(t) for t in extra if to_symbols(t) not in piece_tokens]
    vocab = symbols + piece_tokens + extra_tokens + list(SPECIAL_TOKENS)
    if len(set(vocab)) != len(vocab):
        raise ValueError("script pieces must be distinct and not single bytes")
    n_vocab = len(vocab)
    n_embd = -(-n_vocab // multiple) * multiple
    first_piece = len(symbols)
    im_end = vocab.index("<|im_end|>")

    embd = np.zeros((n_vocab, n_embd), dtype=np.float32)
    embd[np.arange(n_vocab), np.arange(n_vocab)] = 1.0
    out = np.zeros((n_vocab, n_embd), dtype=np.float32)
    scale = logit_gap / np.sqrt(n_embd)  # rms-norm scales a one-hot vector by sqrt(n_embd)
    successors = {symbols.index(byte_symbols()[ord("\n")]): first_piece}
    for k in range(len(pieces)):
        successors[first_piece + k] = first_piece + k + 1 if k + 1 < len(pieces) else im_end
    for token, nxt in successors.items():
        out[nxt, token] = scale
    # Every other token leads to <|im_end|> too, so stray prompts end at once.
    for i in range(n_vocab):
        if i not in successors:
            out[im_end, i] = scale
    return ScriptTable(vocab, n_embd, embd, out)


def write_scripted_model(
    path: Path,
    script: str | Sequence[Piece],
    *,
    arch: str = "qwen2",
    chat_template: str = CHATML_THINK_TEMPLATE,
    n_ctx_train: int = 4096,
    logit_gap: float = 10.0,
) -> Path:
    """Write a model whose every generation is ``script`` followed by ``<|im_end|>``.

    ``script`` may be given as ready pieces (see ``script_table``).
    """
    import gguf

    table = script_table(script, logit_gap=logit_gap)
    n_embd = table.n_embd
    n_head = 4
    n_ff = 64
    head_dim = n_embd // n_head

    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_name("scripted-test-model")
    writer.add_context_length(n_ctx_train)
    writer.add_embedding_length(n_embd)
    writer.add_block_count(1)
    writer.add_feed_forward_length(n_ff)
    writer.add_head_count(n_head)
    writer.add_head_count_kv(n_head)
    writer.add_rope_dimension_count(head_dim)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    _add_tokenizer(writer, table.vocab, chat_template)

    zeros = np.zeros
    writer.add_tensor("token_embd.weight", table.embd)
    writer.add_tensor("output_norm.weight", np.ones(n_embd, dtype=np.float32))
    writer.add_tensor("output.weight", table.out)
    blk = "blk.0."
    writer.add_tensor(blk + "attn_norm.weight", np.ones(n_embd, dtype=np.float32))
    for name in ("attn_q", "attn_k", "attn_v"):
        writer.add_tensor(blk + name + ".weight", zeros((n_embd, n_embd), dtype=np.float32))
        if arch == "qwen2":
            writer.add_tensor(blk + name + ".bias", zeros(n_embd, dtype=np.float32))
    writer.add_tensor(blk + "attn_output.weight", zeros((n_embd, n_embd), dtype=np.float32))
    writer.add_tensor(blk + "ffn_norm.weight", np.ones(n_embd, dtype=np.float32))
    writer.add_tensor(blk + "ffn_gate.weight", zeros((n_ff, n_embd), dtype=np.float32))
    writer.add_tensor(blk + "ffn_up.weight", zeros((n_ff, n_embd), dtype=np.float32))
    writer.add_tensor(blk + "ffn_down.weight", zeros((n_embd, n_ff), dtype=np.float32))
    _finish(writer)
    return path


def write_recurrent_model(
    path: Path,
    script: str | Sequence[Piece],
    *,
    chat_template: str = CHATML_THINK_TEMPLATE,
    n_ctx_train: int = 4096,
    n_layer: int = 2,
    d_state: int = 16,
    d_conv: int = 4,
    mixing: float = 0.0,
    seed: int = 0,
    hybrid: bool = False,
) -> Path:
    """A scripted model on llama.cpp's ``mamba`` architecture (recurrent state, no KV cache).

    ``hybrid`` makes it a ``jamba`` model instead: Mamba layers alternating with attention
    layers (zero weights), so llama.cpp keeps a recurrent state *and* a KV cache, like the
    real Qwen-AgentWorld model. With ``mixing`` 0 the Mamba blocks still run and keep a real recurrent state but add
    nothing to the residual, so the output is the script. A small ``mixing`` gives the
    blocks random weights whose output perturbs the logits (the script still wins by the
    logit gap), so a wrongly restored state shows in the logits.
    """
    import gguf

    table = script_table(script)
    n_embd = table.n_embd
    d_inner = 2 * n_embd
    dt_rank = max(1, n_embd // 16)
    rng = np.random.default_rng(seed)

    def weight(*shape: int, scale: float = 1.0) -> np.ndarray:
        if mixing == 0.0:
            return np.zeros(shape, dtype=np.float32)
        std = scale / np.sqrt(shape[-1])  # unit-variance outputs for unit-variance inputs
        return (rng.standard_normal(shape) * std).astype(np.float32)

    n_head, n_ff = 4, 64
    attention = [hybrid and i % 2 == 1 for i in range(n_layer)]
    writer = gguf.GGUFWriter(str(path), "jamba" if hybrid else "mamba")
    writer.add_name("scripted-recurrent-test-model")
    writer.add_context_length(n_ctx_train)
    writer.add_embedding_length(n_embd)
    writer.add_block_count(n_layer)
    if hybrid:
        writer.add_feed_forward_length(n_ff)
        writer.add_head_count(n_head)
        writer.add_head_count_kv([n_head if a else 0 for a in attention])
    else:
        writer.add_feed_forward_length(0)
        writer.add_head_count(0)
    writer.add_ssm_conv_kernel(d_conv)
    writer.add_ssm_inner_size(d_inner)
    writer.add_ssm_state_size(d_state)
    writer.add_ssm_time_step_rank(dt_rank)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    _add_tokenizer(writer, table.vocab, chat_template)

    writer.add_tensor("token_embd.weight", table.embd)
    writer.add_tensor("output_norm.weight", np.ones(n_embd, dtype=np.float32))
    writer.add_tensor("output.weight", table.out)
    # numpy shapes are (out, in): the reverse of llama.cpp's {ne0, ne1}.
    zeros, ones = np.zeros, np.ones
    for i in range(n_layer):
        blk = f"blk.{i}."
        writer.add_tensor(blk + "attn_norm.weight", ones(n_embd, dtype=np.float32))
        if hybrid:
            writer.add_tensor(blk + "ffn_norm.weight", ones(n_embd, dtype=np.float32))
            writer.add_tensor(blk + "ffn_gate.weight", zeros((n_ff, n_embd), dtype=np.float32))
            writer.add_tensor(blk + "ffn_up.weight", zeros((n_ff, n_embd), dtype=np.float32))
            writer.add_tensor(blk + "ffn_down.weight", zeros((n_embd, n_ff), dtype=np.float32))
        if attention[i]:
            for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
                writer.add_tensor(f"{blk}{name}.weight", zeros((n_embd, n_embd), np.float32))
            continue
        if hybrid:  # Jamba's Mamba layers norm dt, B and C
            writer.add_tensor(blk + "ssm_dt_norm.weight", ones(dt_rank, dtype=np.float32))
            writer.add_tensor(blk + "ssm_b_norm.weight", ones(d_state, dtype=np.float32))
            writer.add_tensor(blk + "ssm_c_norm.weight", ones(d_state, dtype=np.float32))
        writer.add_tensor(blk + "ssm_in.weight", weight(2 * d_inner, n_embd))
        writer.add_tensor(blk + "ssm_conv1d.weight", weight(d_inner, d_conv))
        writer.add_tensor(blk + "ssm_conv1d.bias", np.zeros(d_inner, dtype=np.float32))
        writer.add_tensor(blk + "ssm_x.weight", weight(dt_rank + 2 * d_state, d_inner))
        writer.add_tensor(blk + "ssm_dt.weight", weight(d_inner, dt_rank))
        writer.add_tensor(blk + "ssm_dt.bias", np.full(d_inner, -2.0, dtype=np.float32))
        # A = -exp(A_log) < 0: the state decays and stays bounded; the slow modes remember
        # tokens from hundreds of positions back, so the whole history shapes the logits.
        a = -np.tile(np.geomspace(0.001, 1.0, d_state, dtype=np.float32), (d_inner, 1))
        writer.add_tensor(blk + "ssm_a", a)
        writer.add_tensor(blk + "ssm_d", np.zeros(d_inner, dtype=np.float32))
        writer.add_tensor(blk + "ssm_out.weight", weight(n_embd, d_inner, scale=mixing))
    _finish(writer)
    return path


THINK_TOKENS = ("<think>", "</think>")


def write_qwen35moe_model(
    path: Path,
    script: str | Sequence[Piece],
    *,
    chat_template: str = CHATML_THINK_TEMPLATE,
    n_ctx_train: int = 8192,
    n_layer: int = 4,
    n_expert: int = 8,
    n_expert_used: int = 2,
    mixing: float = 0.0,
    seed: int = 0,
    d_state: int = 16,
    dt_rank: int = 4,
) -> Path:
    """A scripted miniature of the real model's architecture, llama.cpp's ``qwen35moe``.

    Three of every four layers are Gated DeltaNet (a recurrent state of fixed size), the
    fourth gated attention (a query that carries its own output gate, a KV cache); every
    layer's feed-forward is a mixture of experts with a shared expert. Its vocabulary has
    ``<think>`` and ``</think>`` as single tokens, as the real one does, so a prompt ends
    in the same few tokens. With ``mixing`` 0 the blocks run but add nothing to the
    residual, so the output is the script; a small ``mixing`` gives them random weights
    whose output perturbs the logits (the script still wins by the logit gap), so a
    wrongly restored state shows in the logits. ``d_state`` (the head size of a
    DeltaNet layer) and ``dt_rank`` (its heads) size the recurrent state: the real
    model's are 128 and 32, over 30 such layers.
    """
    import gguf

    table = script_table(script, extra=THINK_TOKENS)
    n_embd = table.n_embd
    n_head, n_head_kv, head_dim = 4, 2, 16
    n_group, d_conv = 2, 4
    key_dim, value_dim = d_state * n_group, d_state * dt_rank
    n_ff_exp, n_ff_shexp = 32, 32
    arch = "qwen35moe"
    rng = np.random.default_rng(seed)

    def weight(*shape: int, scale: float = 1.0) -> np.ndarray:
        if mixing == 0.0:
            return np.zeros(shape, dtype=np.float32)
        std = scale / np.sqrt(shape[-1])
        return (rng.standard_normal(shape) * std).astype(np.float32)

    def ones(n: int) -> np.ndarray:
        return np.ones(n, dtype=np.float32)

    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_name("scripted-qwen35moe-test-model")
    writer.add_context_length(n_ctx_train)
    writer.add_embedding_length(n_embd)
    writer.add_block_count(n_layer)
    writer.add_feed_forward_length(n_ff_exp)
    writer.add_head_count(n_head)
    writer.add_head_count_kv(n_head_kv)
    writer.add_key_length(head_dim)
    writer.add_value_length(head_dim)
    writer.add_rope_dimension_count(head_dim)
    writer.add_rope_dimension_sections([4, 2, 2, 0])
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_expert_count(n_expert)
    writer.add_expert_used_count(n_expert_used)
    writer.add_expert_feed_forward_length(n_ff_exp)
    writer.add_expert_shared_feed_forward_length(n_ff_shexp)
    writer.add_ssm_conv_kernel(d_conv)
    writer.add_ssm_inner_size(value_dim)
    writer.add_ssm_state_size(d_state)
    writer.add_ssm_time_step_rank(dt_rank)
    writer.add_ssm_group_count(n_group)
    writer.add_full_attention_interval(4)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    _add_tokenizer(writer, table.vocab, chat_template, user_defined=THINK_TOKENS)

    writer.add_tensor("token_embd.weight", table.embd)
    writer.add_tensor("output_norm.weight", ones(n_embd))
    writer.add_tensor("output.weight", table.out)
    # numpy shapes are (out, in): the reverse of llama.cpp's {ne0, ne1}.
    for i in range(n_layer):
        blk = f"blk.{i}."
        writer.add_tensor(blk + "attn_norm.weight", ones(n_embd))
        writer.add_tensor(blk + "post_attention_norm.weight", ones(n_embd))
        if (i + 1) % 4 == 0:  # gated attention: the query projection holds the gate too
            writer.add_tensor(blk + "attn_q.weight", weight(2 * n_head * head_dim, n_embd))
            writer.add_tensor(blk + "attn_k.weight", weight(n_head_kv * head_dim, n_embd))
            writer.add_tensor(blk + "attn_v.weight", weight(n_head_kv * head_dim, n_embd))
            writer.add_tensor(blk + "attn_q_norm.weight", ones(head_dim))
            writer.add_tensor(blk + "attn_k_norm.weight", ones(head_dim))
            out = weight(n_embd, n_head * head_dim, scale=mixing)
            writer.add_tensor(blk + "attn_output.weight", out)
        else:  # Gated DeltaNet
            conv_dim = 2 * key_dim + value_dim
            writer.add_tensor(blk + "attn_qkv.weight", weight(conv_dim, n_embd))
            writer.add_tensor(blk + "attn_gate.weight", weight(value_dim, n_embd))
            writer.add_tensor(blk + "ssm_conv1d.weight", weight(conv_dim, d_conv))
            writer.add_tensor(blk + "ssm_dt.bias", np.zeros(dt_rank, dtype=np.float32))
            # A = -exp(A_log) < 0: the state decays and stays bounded.
            a = -np.geomspace(0.01, 1.0, dt_rank, dtype=np.float32)
            writer.add_tensor(blk + "ssm_a", a)
            writer.add_tensor(blk + "ssm_beta.weight", weight(dt_rank, n_embd))
            writer.add_tensor(blk + "ssm_alpha.weight", weight(dt_rank, n_embd))
            writer.add_tensor(blk + "ssm_norm.weight", ones(d_state))
            writer.add_tensor(blk + "ssm_out.weight", weight(n_embd, value_dim, scale=mixing))
        writer.add_tensor(blk + "ffn_gate_inp.weight", weight(n_expert, n_embd))
        writer.add_tensor(blk + "ffn_gate_exps.weight", weight(n_expert, n_ff_exp, n_embd))
        writer.add_tensor(blk + "ffn_up_exps.weight", weight(n_expert, n_ff_exp, n_embd))
        down = weight(n_expert, n_embd, n_ff_exp, scale=mixing)
        writer.add_tensor(blk + "ffn_down_exps.weight", down)
        writer.add_tensor(blk + "ffn_gate_inp_shexp.weight", weight(n_embd))
        writer.add_tensor(blk + "ffn_gate_shexp.weight", weight(n_ff_shexp, n_embd))
        writer.add_tensor(blk + "ffn_up_shexp.weight", weight(n_ff_shexp, n_embd))
        down = weight(n_embd, n_ff_shexp, scale=mixing)
        writer.add_tensor(blk + "ffn_down_shexp.weight", down)
    _finish(writer)
    return path


def write_random_model(
    path: Path,
    *,
    n_embd: int = 768,
    n_layer: int = 12,
    n_ff: int = 2048,
    n_head: int = 12,
    n_vocab_extra: int = 0,
    n_ctx_train: int = 8192,
    seed: int = 0,
    f32: bool = False,
) -> Path:
    """A llama-architecture model with random weights (about 100M parameters by default),
    in F16 or, with ``f32``, F32 (which every build here runs).

    Its output is noise, but its speed is that of a real model of its size.
    """
    import gguf

    rng = np.random.default_rng(seed)
    vocab = list(byte_symbols())
    vocab += [f"<extra_{i}>" for i in range(n_vocab_extra)]
    vocab += list(SPECIAL_TOKENS)
    n_vocab = len(vocab)
    head_dim = n_embd // n_head

    def rand(*shape: int) -> np.ndarray:
        weights = rng.standard_normal(shape, dtype=np.float32) * 0.02
        return weights if f32 else weights.astype(np.float16)

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("random-bench-model")
    writer.add_context_length(n_ctx_train)
    writer.add_embedding_length(n_embd)
    writer.add_block_count(n_layer)
    writer.add_feed_forward_length(n_ff)
    writer.add_head_count(n_head)
    writer.add_head_count_kv(n_head)
    writer.add_rope_dimension_count(head_dim)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32 if f32 else gguf.LlamaFileType.MOSTLY_F16)
    _add_tokenizer(writer, vocab, CHATML_THINK_TEMPLATE)
    writer.add_tensor("token_embd.weight", rand(n_vocab, n_embd))
    writer.add_tensor("output_norm.weight", np.ones(n_embd, dtype=np.float32))
    writer.add_tensor("output.weight", rand(n_vocab, n_embd))
    for i in range(n_layer):
        blk = f"blk.{i}."
        writer.add_tensor(blk + "attn_norm.weight", np.ones(n_embd, dtype=np.float32))
        writer.add_tensor(blk + "attn_q.weight", rand(n_embd, n_embd))
        writer.add_tensor(blk + "attn_k.weight", rand(n_embd, n_embd))
        writer.add_tensor(blk + "attn_v.weight", rand(n_embd, n_embd))
        writer.add_tensor(blk + "attn_output.weight", rand(n_embd, n_embd))
        writer.add_tensor(blk + "ffn_norm.weight", np.ones(n_embd, dtype=np.float32))
        writer.add_tensor(blk + "ffn_gate.weight", rand(n_ff, n_embd))
        writer.add_tensor(blk + "ffn_up.weight", rand(n_ff, n_embd))
        writer.add_tensor(blk + "ffn_down.weight", rand(n_embd, n_ff))
    _finish(writer)
    return path


def _add_tokenizer(
    writer: object, vocab: list[str], chat_template: str, user_defined: Sequence[str] = ()
) -> None:
    import gguf

    assert isinstance(writer, gguf.GGUFWriter)
    normal, control = gguf.TokenType.NORMAL, gguf.TokenType.CONTROL

    def kind(token: str) -> int:
        if token in SPECIAL_TOKENS:
            return control
        return gguf.TokenType.USER_DEFINED if token in user_defined else normal

    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("qwen2")
    writer.add_token_list(vocab)
    writer.add_token_types([kind(t) for t in vocab])
    sym = byte_symbols()
    writer.add_token_merges([f"{sym[ord('Q')]} {sym[ord('Z')]}"])
    writer.add_eos_token_id(vocab.index("<|im_end|>"))
    writer.add_bos_token_id(vocab.index("<|endoftext|>"))
    writer.add_pad_token_id(vocab.index("<|endoftext|>"))
    writer.add_add_bos_token(False)
    writer.add_chat_template(chat_template)


def _finish(writer: object) -> None:
    import gguf

    assert isinstance(writer, gguf.GGUFWriter)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
