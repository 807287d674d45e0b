"""The judge's prompts and messages: built as the official evaluator builds them, from the
project's prompts or from a folder the user points to (its layouts read tolerantly)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentworld_tui.judging.prompts import (
    JudgePromptsError,
    fill_user_template,
    judge_messages,
    load_judge_prompts,
    strip_marker,
)

DOMAINS = ("terminal", "mcp", "web")
TEMPLATE = (
    "{context}\n\n{world_model_input}\n\n{predicted_observation}\n\n{ground_truth}\n\n"
    'Answer with {{"scores": {{...}}}} in <final_evaluation> tags.'
)


def release_clone(root: Path) -> Path:
    """A folder laid out as the official release is: prompts/<domain>/judge_system_prompt.txt
    and the user template as a Python string in the evaluator's code."""
    for domain in ("terminal", "mcp"):
        folder = root / "prompts" / domain
        folder.mkdir(parents=True)
        (folder / "judge_system_prompt.txt").write_text(f"You judge {domain} simulations.")
        (folder / "system_prompt.txt").write_text("not a judge prompt")
    code = root / "eval" / "lwm_eval_utils"
    code.mkdir(parents=True)
    (code / "task_configs.py").write_text(
        "import os\nos.environ['RAN'] = '1'\n"  # parsed, never run
        f"JUDGE_USER_PROMPT = {TEMPLATE!r}\n"
    )
    return root


def test_a_clone_of_the_release_gives_its_system_prompts_and_its_user_template(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RAN", raising=False)
    prompts = load_judge_prompts(release_clone(tmp_path / "Qwen-AgentWorld"), DOMAINS)
    assert prompts.systems == {
        "terminal": "You judge terminal simulations.",
        "mcp": "You judge mcp simulations.",
    }
    assert prompts.user_template == TEMPLATE
    assert prompts.user_source == "JUDGE_USER_PROMPT in eval/lwm_eval_utils/task_configs.py"
    assert "RAN" not in __import__("os").environ
    assert prompts.problems == (
        f"{tmp_path / 'Qwen-AgentWorld'}: no judge system prompt for web; empty one used",
    )
    messages, _ = judge_messages(
        "terminal", [("### Turn 1\nls", "a")], "### Turn 2\npwd", "/app", "/root", prompts=prompts
    )
    assert messages[0] == {"role": "system", "content": "You judge terminal simulations."}
    assert messages[1]["content"] == (
        "# Context (Historical Interactions):\n\n### Turn 1\nls\na\n\n\n\n"
        "# Current Turn:\n\n### Turn 2\npwd\n\n"
        "**World Model Output (Simulated):**\n```\n/app\n```\n\n"
        "**Ground Truth (Real Output):**\n```\n/root\n```\n\n"
        'Answer with {"scores": {...}} in <final_evaluation> tags.'
    )
    # A domain the folder lacks is sent an empty system prompt, as the official evaluator does.
    web, _ = judge_messages("web", [], "t", "p", "g", prompts=prompts)
    assert web[0] == {"role": "system", "content": ""}


def test_other_layouts_and_names_are_read_too(tmp_path: Path) -> None:
    flat = tmp_path / "mine"
    (flat / "Terminal").mkdir(parents=True)
    (flat / "Terminal" / "Judge-System-Prompt.md").write_text("terminal judge")
    (flat / "mcp_judge_prompt.txt").write_text("mcp judge")
    (flat / "Terminal" / "judge_user_prompt.txt").write_text("T: {prediction} vs {reference}")
    (flat / "judge_user_template.txt").write_text("{{prediction}} / {{ground_truth}}")
    prompts = load_judge_prompts(flat, ("terminal", "mcp"))
    assert prompts.systems == {"terminal": "terminal judge", "mcp": "mcp judge"}
    assert prompts.user_source == "judge_user_template.txt"
    terminal, _ = judge_messages("terminal", [], "t", "P", "G", prompts=prompts)
    assert terminal[1]["content"] == (
        "T: **World Model Output (Simulated):**\n```\nP\n``` vs "
        "**Ground Truth (Real Output):**\n```\nG\n```"
    )
    mcp, _ = judge_messages("mcp", [], "t", "P", "G", prompts=prompts)
    assert mcp[1]["content"].startswith("**World Model Output (Simulated):**\n```\nP\n``` /")


def test_a_folder_without_the_user_template_uses_the_projects(tmp_path: Path) -> None:
    folder = tmp_path / "p"
    (folder / "web").mkdir(parents=True)
    (folder / "web" / "judge_system_prompt.txt").write_text("web judge")
    prompts = load_judge_prompts(folder, ("web",))
    assert prompts.user_source.startswith("the project's (shipped:judge_user_prompt.txt")
    assert "the project's" in prompts.label
    messages, _ = judge_messages("web", [], "t", "P", "G", prompts=prompts)
    assert "```\nP\n```" in messages[1]["content"]


@pytest.mark.parametrize("make", ["missing", "empty"])
def test_a_folder_without_any_judge_prompt_is_one_clear_error(tmp_path: Path, make: str) -> None:
    folder = tmp_path / "p"
    if make == "empty":
        (folder / "terminal").mkdir(parents=True)
        (folder / "terminal" / "judge_system_prompt.txt").write_text("  \n")
    with pytest.raises(JudgePromptsError) as caught:
        load_judge_prompts(folder, DOMAINS)
    assert "\n" not in str(caught.value)


def test_the_marker_is_stripped_from_prediction_and_reference_but_not_the_history() -> None:
    marked = "**Environment Observation:**\nroot@box:/app# "
    messages, _ = judge_messages("terminal", [("### Turn 1\nls", marked)], "t", marked, marked)
    user = messages[1]["content"]
    assert "### Turn 1\nls\n**Environment Observation:**\nroot@box" in user
    assert user.count("**Environment Observation:**") == 1
    assert "**World Model Output (Simulated):**\n```\nroot@box:/app#\n```" in user
    # Not at the start: every occurrence goes; at the start: that one.
    assert strip_marker("a **Environment Observation:** b", "web") == "a  b"
    assert strip_marker("x", "chess") == "x"


def test_a_history_turn_with_an_empty_observation_is_kept() -> None:
    messages, _ = judge_messages(
        "terminal", [("### Turn 1\nsleep 1", ""), ("### Turn 2\nls", "a")], "t", "p", "g"
    )
    assert "### Turn 1\nsleep 1\n\n\n### Turn 2\nls\na\n\n" in messages[1]["content"]


def test_the_template_fills_fields_as_python_format_does() -> None:
    values = {"context": "C", "world_model_input": "W", "ground_truth": "{G}"}
    text = "{{{context}}} {world_model_input} {unknown} {ground_truth} }}"
    assert fill_user_template(text, values) == "{C} W {unknown} {G} }"
