"""A small quantized model to try a llama.cpp build on before any real model is chosen.

The crash that native builds have on CPUs that report AMX comes with quantized weights of
any model, so ``agentworld doctor`` tries the build on this one (``probe``) even when no
model is configured, and a new user hears about it before downloading gigabytes. One layer
of a llama-architecture model, its matrices quantized (Q8_0 by default), a byte-level
vocabulary: about a megabyte, written once into the cache folder.
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path

import numpy as np

N_EMBD = 256
N_FF = 512
N_HEAD = 4
SPECIAL = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")


@cache
def byte_vocabulary() -> tuple[str, ...]:
    """The byte-level vocabulary's 256 symbols: printable bytes stand for themselves, the
    others for the code points from 256 up, in byte order."""
    kept = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    symbols: dict[int, str] = {b: chr(b) for b in kept}
    extra = 0
    for b in range(256):
        if b not in symbols:
            symbols[b] = chr(256 + extra)
            extra += 1
    return tuple(symbols[b] for b in range(256))


def write_trial_model(path: Path, quant: str = "Q8_0") -> Path:
    """Write the model to ``path`` (through a temporary file, so a reader never sees half
    of it); ``quant`` names a type ``gguf.quants`` can write."""
    import gguf

    qtype = getattr(gguf.GGMLQuantizationType, quant)
    rng = np.random.default_rng(0)
    vocab = [*byte_vocabulary(), *SPECIAL]

    def weight(rows: int, cols: int) -> np.ndarray:
        values = rng.standard_normal((rows, cols), dtype=np.float32) * 0.02
        return np.asarray(gguf.quants.quantize(values, qtype))

    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    writer = gguf.GGUFWriter(str(partial), "llama")
    writer.add_name("agentworld build trial")
    writer.add_context_length(512)
    writer.add_embedding_length(N_EMBD)
    writer.add_block_count(1)
    writer.add_feed_forward_length(N_FF)
    writer.add_head_count(N_HEAD)
    writer.add_head_count_kv(N_HEAD)
    writer.add_rope_dimension_count(N_EMBD // N_HEAD)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("qwen2")
    writer.add_token_list(vocab)
    normal, control = gguf.TokenType.NORMAL, gguf.TokenType.CONTROL
    writer.add_token_types([control if t in SPECIAL else normal for t in vocab])
    writer.add_token_merges([f"{vocab[ord('a')]} {vocab[ord('b')]}"])
    writer.add_bos_token_id(vocab.index("<|endoftext|>"))
    writer.add_eos_token_id(vocab.index("<|im_end|>"))
    writer.add_add_bos_token(False)
    ones = np.ones(N_EMBD, dtype=np.float32)
    embeddings = rng.standard_normal((len(vocab), N_EMBD), dtype=np.float32) * 0.02
    writer.add_tensor("token_embd.weight", embeddings)
    writer.add_tensor("output_norm.weight", ones)
    writer.add_tensor("output.weight", weight(len(vocab), N_EMBD), raw_dtype=qtype)
    writer.add_tensor("blk.0.attn_norm.weight", ones)
    for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
        writer.add_tensor(f"blk.0.{name}.weight", weight(N_EMBD, N_EMBD), raw_dtype=qtype)
    writer.add_tensor("blk.0.ffn_norm.weight", ones)
    writer.add_tensor("blk.0.ffn_gate.weight", weight(N_FF, N_EMBD), raw_dtype=qtype)
    writer.add_tensor("blk.0.ffn_up.weight", weight(N_FF, N_EMBD), raw_dtype=qtype)
    writer.add_tensor("blk.0.ffn_down.weight", weight(N_EMBD, N_FF), raw_dtype=qtype)
    try:
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)
    return path


def trial_model(folder: Path, quant: str = "Q8_0") -> Path:
    """The model in ``folder``, written the first time it is asked for."""
    path = folder / f"build-trial-{quant.lower()}.gguf"
    return path if path.is_file() else write_trial_model(path, quant)
