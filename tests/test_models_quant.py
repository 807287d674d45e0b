"""Picking a quantization's file (or split parts) among a repository's files."""

from __future__ import annotations

import pytest

from agentworld_tui.models.quant import (
    QuantNotFoundError,
    choose_files,
    quant_tags,
    tag_matches,
)

UNSLOTH_LIKE = [
    ".gitattributes",
    "README.md",
    "Qwen-AgentWorld-35B-A3B-Q3_K_M.gguf",
    "Qwen-AgentWorld-35B-A3B-Q4_K_M.gguf",
    "Qwen-AgentWorld-35B-A3B-UD-Q4_K_M.gguf",
    "Qwen-AgentWorld-35B-A3B-UD-Q4_K_XL.gguf",
    "Qwen-AgentWorld-35B-A3B-IQ4_XS.gguf",
    "Qwen-AgentWorld-35B-A3B-Q4_K.gguf",
    "Qwen-AgentWorld-35B-A3B-Q8_0.gguf",
    "mmproj-Q8_0.gguf",
    "mmproj-F16.gguf",
    "BF16/Qwen-AgentWorld-35B-A3B-BF16-00002-of-00003.gguf",
    "BF16/Qwen-AgentWorld-35B-A3B-BF16-00001-of-00003.gguf",
    "BF16/Qwen-AgentWorld-35B-A3B-BF16-00003-of-00003.gguf",
]


@pytest.mark.parametrize(
    ("quant", "expected"),
    [
        ("Q4_K_M", "Qwen-AgentWorld-35B-A3B-Q4_K_M.gguf"),
        ("q4_k_m", "Qwen-AgentWorld-35B-A3B-Q4_K_M.gguf"),
        ("UD-Q4_K_M", "Qwen-AgentWorld-35B-A3B-UD-Q4_K_M.gguf"),
        ("UD-Q4_K_XL", "Qwen-AgentWorld-35B-A3B-UD-Q4_K_XL.gguf"),
        ("Q4_K", "Qwen-AgentWorld-35B-A3B-Q4_K.gguf"),
        ("IQ4_XS", "Qwen-AgentWorld-35B-A3B-IQ4_XS.gguf"),
        ("Q8_0", "Qwen-AgentWorld-35B-A3B-Q8_0.gguf"),
    ],
)
def test_a_tag_picks_exactly_its_file(quant: str, expected: str) -> None:
    chosen = choose_files(UNSLOTH_LIKE, quant)
    assert chosen.paths == (expected,)
    assert not chosen.is_split


def test_split_parts_are_all_taken_in_order() -> None:
    chosen = choose_files(UNSLOTH_LIKE, "bf16")
    assert chosen.is_split
    assert chosen.paths == tuple(
        f"BF16/Qwen-AgentWorld-35B-A3B-BF16-0000{i}-of-00003.gguf" for i in (1, 2, 3)
    )
    assert chosen.first.endswith("-00001-of-00003.gguf")


def test_a_missing_part_is_reported() -> None:
    files = [p for p in UNSLOTH_LIKE if "00002-of" not in p]
    with pytest.raises(QuantNotFoundError, match=r"incomplete.*\[2\]"):
        choose_files(files, "BF16")


def test_mmproj_is_never_chosen() -> None:
    with pytest.raises(QuantNotFoundError):
        choose_files(["README.md", "mmproj-F16.gguf"], "F16")


def test_no_match_lists_the_available_tags() -> None:
    with pytest.raises(QuantNotFoundError) as info:
        choose_files(UNSLOTH_LIKE, "Q5_K_S", "unsloth/x")
    message = str(info.value)
    assert "unsloth/x" in message and "Q5_K_S" in message
    assert "Q4_K_M" in message and "UD-Q4_K_XL" in message and "BF16" in message
    assert "MMPROJ" not in message.upper()


def test_tag_boundaries() -> None:
    assert tag_matches("model-Q4_K_M.gguf", "Q4_K_M")
    assert not tag_matches("model-UD-Q4_K_M.gguf", "Q4_K_M")
    assert not tag_matches("model-Q4_K_M.gguf", "Q4_K")
    assert not tag_matches("model-IQ4_XS.gguf", "Q4_XS")
    assert not tag_matches("model-Q4_0_4_4.gguf", "Q4_0")
    assert tag_matches("qwen2.5-3b-instruct-q4_k_m.gguf", "Q4_K_M")
    assert tag_matches("x-Q4_K_M-00001-of-00002.gguf", "Q4_K_M")


def test_lowercase_fallback_repo_layout() -> None:
    files = [
        "qwen2.5-3b-instruct-q4_k_m.gguf",
        "qwen2.5-3b-instruct-q4_0.gguf",
        "qwen2.5-3b-instruct-fp16-00001-of-00002.gguf",
        "qwen2.5-3b-instruct-fp16-00002-of-00002.gguf",
    ]
    assert choose_files(files, "q4_k_m").paths == ("qwen2.5-3b-instruct-q4_k_m.gguf",)
    assert quant_tags(files)[:2] == ["Q4_K_M", "Q4_0"]


def test_two_conversions_choose_the_one_nearest_the_root() -> None:
    files = ["old/m-Q4_K_M.gguf", "m-Q4_K_M.gguf", "m-instruct-long-Q4_K_M.gguf"]
    assert choose_files(files, "Q4_K_M").paths == ("m-Q4_K_M.gguf",)
