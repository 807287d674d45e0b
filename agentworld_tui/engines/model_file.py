"""A local model file before llama.cpp loads it: checked, and its GGUF header read.

Both in-process engines refuse a missing, non-GGUF or truncated file with a clear message
before the native library sees it, and read from the header what they need first: the
context the model was trained for, its chat template and the kind of cache it keeps.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentworld_tui.engines.base import EngineError

log = logging.getLogger("agentworld.engine")

DEFAULT_N_CTX = 32768
"""The context a model gets when none is asked for, unless it was trained for less."""
CHECKPOINTED_KEYS = (".ssm.", ".wkv.", ".shortconv.", ".attention.sliding_window")
"""Header keys (after the architecture's name) of a cache that cannot be cut back anywhere."""


def check_gguf(path: Path) -> None:
    """Refuse a missing, non-GGUF or truncated file with a clear message before llama.cpp."""
    if not path.exists():
        raise EngineError(f"model file not found: {path}")
    if path.is_dir():
        raise EngineError(f"{path} is a folder; give the path of a .gguf file")
    try:
        with path.open("rb") as handle:
            magic = handle.read(4)
    except OSError as exc:
        raise EngineError(f"cannot read the model file {path}: {exc}") from exc
    if magic != b"GGUF":
        raise EngineError(f"{path} is not a GGUF model file (it does not start with 'GGUF')")


def context_size(requested: int, trained: int) -> int:
    """The context to load: the one asked for, else the default or the trained one if less."""
    return requested or min(DEFAULT_N_CTX, trained or DEFAULT_N_CTX)


@dataclass(frozen=True)
class ModelHeader:
    """What an engine reads from a GGUF header before llama.cpp loads the file."""

    template: str | None = None
    bos: str = ""
    eos: str = ""
    trained_context: int = 0
    checkpointed: bool = False
    """The model keeps a state that cannot be cut back to any position (recurrent layers,
    or a sliding attention window): a cache goes back only to its checkpoints."""


def model_metadata(path: Path) -> ModelHeader:
    """The chat template, BOS and EOS texts, trained context and kind of cache from the
    GGUF header (all unknown when it cannot be read: llama.cpp says why when it loads)."""
    import gguf

    try:
        reader = gguf.GGUFReader(str(path))

        def value(name: str) -> Any:
            found = reader.get_field(name)
            return None if found is None else found.contents()

        def token_text(key: str) -> str:
            index = value(key)
            tokens = reader.get_field("tokenizer.ggml.tokens")
            if not isinstance(index, int) or tokens is None or not 0 <= index < len(tokens.data):
                return ""
            return bytes(tokens.parts[tokens.data[index]]).decode("utf-8", "replace")

        arch = value("general.architecture")
        trained = value(f"{arch}.context_length") if isinstance(arch, str) else None
        template = value("tokenizer.chat_template")
        own = f"{arch}." if isinstance(arch, str) else "\0"
        return ModelHeader(
            template if isinstance(template, str) else None,
            token_text("tokenizer.ggml.bos_token_id"),
            token_text("tokenizer.ggml.eos_token_id"),
            int(trained) if isinstance(trained, int) else 0,
            any(
                k.startswith(own) and f".{k[len(own) :]}".startswith(CHECKPOINTED_KEYS)
                for k in reader.fields
            ),
        )
    except Exception as exc:  # a damaged header
        log.warning("cannot read the GGUF header of %s: %s", path, exc)
        return ModelHeader()
