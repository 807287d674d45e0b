"""Control instructions and fictional worlds: presets, how they are written into turns, that
they reach the exact messages an engine receives, and that sessions and exports keep them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from faultserver import FaultServer, Reply
from ggufgen import CHATML_THINK_TEMPLATE
from hypothesis import given, settings
from hypothesis import strategies as st

from agentworld_tui.domains import DOMAINS, get_domain
from agentworld_tui.engines.base import Finished, GenerationControl, GenerationParams
from agentworld_tui.engines.llama import LlamaEngine
from agentworld_tui.engines.remote import RemoteEngine
from agentworld_tui.simulator import run_turn
from agentworld_tui.world.domain import Scenario
from agentworld_tui.world.export import (
    agentworldbench_jsonl,
    json_transcript,
    markdown_transcript,
)
from agentworld_tui.world.fictional_world import (
    FictionalWorld,
    WorldEntry,
    WorldError,
    WorldPage,
    list_worlds,
    load_world_file,
    parse_world,
    save_world,
)
from agentworld_tui.world.perturbation import (
    CONTROL_SECTION,
    ControlError,
    ControlInstruction,
    load_perturbations,
    write_control,
)
from agentworld_tui.world.session import Session, new_session
from agentworld_tui.world.workspace import Workspace, WorkspaceError, load_workspace

SCRIPT = "a full disk</think><predicted_observation>No space left on device</predicted_observation>"
DISK_FULL = "The disk is full: every write fails with ENOSPC."
MARKER = f"**{CONTROL_SECTION}:**\n"


def terminal_session() -> Session:
    scenario = Scenario("box", "Box", "A Debian box.", "root@box:/# ")
    session, problems = new_session(get_domain("terminal"), scenario)
    assert problems == []
    return session


def act(session: Session, command: str) -> Any:
    return session.domain.parse_action(command, session.scenario)


def answer(session: Session, observation: str = "ok") -> None:
    turn = session.turns[-1]
    session.finish_turn(turn, observation=observation, reasoning="", status="complete")


# -- presets --------------------------------------------------------------------------------
@pytest.mark.parametrize("domain", list(DOMAINS))
def test_every_domain_ships_at_least_six_presets(domain: str) -> None:
    presets, problems = load_perturbations(domain)
    assert problems == []
    assert len(presets) >= 6
    assert len({p.name for p in presets}) == len(presets)
    for preset in presets:
        assert preset.title and len(preset.instruction) > 40 and preset.description


def test_user_presets_add_and_replace_and_a_bad_file_is_reported(
    isolated_dirs: dict[str, Path],
) -> None:
    folder = isolated_dirs["config"] / "prompts" / "terminal"
    folder.mkdir(parents=True)
    user = folder / "perturbations.toml"
    user.write_text(
        '[[perturbation]]\nname = "disk-full"\ntitle = "Mine"\ninstruction = "Mine."\n\n'
        '[[perturbation]]\nname = "solar-flare"\ninstruction = "Bits flip."\n\n'
        '[[perturbation]]\ntitle = "no name"\ninstruction = "x"\n'
    )
    presets, problems = load_perturbations("terminal")
    by_name = {p.name: p for p in presets}
    assert by_name["disk-full"].instruction == "Mine."
    assert by_name["solar-flare"].title == "solar-flare"
    assert problems == [f"{user}: a [[perturbation]] without a name was skipped"]

    user.write_text("[[perturbation]\nname = ")
    presets, problems = load_perturbations("terminal")
    assert len(presets) >= 6  # the shipped ones still load
    assert len(problems) == 1 and problems[0].startswith(str(user))


# -- how an instruction is written into a turn ------------------------------------------------
def test_control_goes_under_the_heading_and_merges_with_an_existing_section() -> None:
    plain = "### Turn 2\n\n**Action:**\n```json\n[]\n```"
    assert write_control(plain, "Be slow.") == (
        "### Turn 2\n\n**Simulation Instruction:**\nBe slow.\n\n**Action:**\n```json\n[]\n```"
    )
    search = "### Turn 1\n\n**Simulation Instruction:**\nTarget query: q\n\n**Action:**\nx"
    merged = write_control(search, "No results.")
    assert merged.count(MARKER) == 1
    assert merged == (
        "### Turn 1\n\n**Simulation Instruction:**\nNo results.\n\nTarget query: q\n\n**Action:**\nx"
    )
    assert write_control("no heading", "Do it.") == f"{MARKER}Do it.\n\nno heading"
    assert write_control(plain, "  ") == plain


def test_next_turn_only_and_every_turn_until_removed() -> None:
    session = terminal_session()
    session.set_control(DISK_FULL, preset="disk-full")
    first = session.begin_turn(act(session, "echo hi > f"))
    assert first.control == DISK_FULL
    assert MARKER + DISK_FULL in first.user_message
    assert session.prompt(first).messages[-1]["content"] == first.user_message
    assert session.control is None  # used up
    answer(session)
    second = session.begin_turn(act(session, "ls"))
    assert second.control == "" and CONTROL_SECTION not in second.user_message
    answer(session)

    session.set_control("The network is down.", persistent=True)
    for command in ("ping a", "ping b"):
        turn = session.begin_turn(act(session, command))
        assert turn.control == "The network is down."
        answer(session)
    session.clear_control()
    last = session.begin_turn(act(session, "ping c"))
    assert last.control == "" and CONTROL_SECTION not in last.user_message
    # The history carries each earlier turn exactly as it was sent.
    sent = [m["content"] for m in session.prompt(last).messages if m["role"] == "user"]
    assert [CONTROL_SECTION in text for text in sent] == [True, False, True, True, False]


def test_bad_instructions_are_refused_with_a_reason() -> None:
    session = terminal_session()
    with pytest.raises(ControlError, match="empty"):
        session.set_control("   \n")
    with pytest.raises(ControlError, match="limit"):
        session.set_control("x" * 20_001)
    assert session.control is None


def test_a_branch_keeps_the_instruction_of_the_turn_it_repeats() -> None:
    session = terminal_session()
    session.set_control(DISK_FULL)
    session.begin_turn(act(session, "touch a"))
    answer(session)
    session.begin_turn(act(session, "ls"))
    answer(session)
    again = session.fork(1)
    assert again.control == DISK_FULL and DISK_FULL in again.user_message


# -- reaching the engine --------------------------------------------------------------------
def count_prompt_tokens(model: Path, messages: list[dict[str, str]]) -> int:
    """The prompt's size counted apart from the app: jinja2 renders the template, llama.cpp's
    tokenizer counts."""
    import jinja2
    import llama_cpp

    text = jinja2.Template(CHATML_THINK_TEMPLATE).render(
        messages=messages, add_generation_prompt=True
    )
    vocab = llama_cpp.Llama(str(model), vocab_only=True, verbose=False)
    try:
        return len(vocab.tokenize(text.encode("utf-8"), add_bos=False, special=True))
    finally:
        vocab.close()


def test_the_instruction_reaches_a_real_model_prompt(scripted_model: Any) -> None:
    model = scripted_model(SCRIPT)
    engine = LlamaEngine(model, n_ctx=4096, threads=2)
    engine.load()
    try:
        session = terminal_session()
        session.set_control(DISK_FULL)
        turn = session.begin_turn(act(session, "cp big /tmp/"))
        params = GenerationParams(temperature=0.0, max_tokens=64)
        events = list(run_turn(engine, session, turn, params, GenerationControl()))
    finally:
        engine.unload()
    finished = events[-1]
    assert isinstance(finished, Finished)
    assert turn.observation == "No space left on device"
    messages = session.prompt(turn).messages
    assert DISK_FULL in messages[-1]["content"]
    assert finished.stats.prompt_tokens == count_prompt_tokens(model, messages)
    without = [
        *messages[:-1],
        {"role": "user", "content": session.domain.render_turn(1, turn.action, turn.state)},
    ]
    assert count_prompt_tokens(model, without) < finished.stats.prompt_tokens


def test_instruction_and_world_are_in_the_exact_messages_a_server_receives() -> None:
    world = parse_world(WORLD_TOML)
    with FaultServer(
        default=Reply(
            content=[
                "<predicted_observation>1. [Harrow](https://h.example)</predicted_observation>"
            ]
        )
    ) as server:
        engine = RemoteEngine(server.url, model="world-model")
        engine.load()
        scenario = Scenario("q", "Q", "Research.", extras={"target_query": "Who runs Orrin?"})
        session, _ = new_session(get_domain("search"), scenario)
        session.world = world
        session.set_control("Every page is paywalled.", persistent=True)
        for query in ("orrin ferry", "orrin mayor"):
            action = session.domain.parse_action(
                json.dumps({"name": "web_search", "arguments": {"query": [query]}}),
                session.scenario,
            )
            turn = session.begin_turn(action)
            params = GenerationParams(temperature=0.0, max_tokens=64)
            list(run_turn(engine, session, turn, params, GenerationControl()))
            assert turn.status == "complete"
        bodies = [r.body for r in server.chat_requests()]
    assert len(bodies) == 2
    for body, turn in zip(bodies, session.turns, strict=True):
        assert body["messages"] == session.prompt(turn).messages
        current = body["messages"][-1]["content"]
        section = current.split("**Action:**")[0]
        assert section.count(MARKER) == 1  # one section: control, world and target query
        assert section.index("Every page is paywalled.") < section.index("Fictional world:")
        assert "Mayor Ada Quill runs the Orrin ferry." in section
        assert "Target query: Who runs Orrin?" in section
    # The second request repeats the first turn exactly as sent, world and all.
    assert bodies[1]["messages"][1]["content"] == bodies[0]["messages"][-1]["content"]


# -- saved and exported ---------------------------------------------------------------------
def test_session_file_keeps_instructions_world_and_judgement(tmp_path: Path) -> None:
    session = terminal_session()
    session.world = parse_world(WORLD_TOML)
    session.set_control(DISK_FULL, persistent=True, preset="disk-full")
    turn = session.begin_turn(act(session, "df -h"))
    answer(session, "Filesystem  Use%\n/dev/sda1  100%")
    turn.judgement = {"judgement": None, "error": "unreadable judgement: no format score"}
    path = tmp_path / "s.json"
    Workspace(tabs=[session]).save(path)

    loaded = load_workspace(path).tabs[0]
    assert loaded.control == ControlInstruction(DISK_FULL, True, "disk-full")
    assert loaded.world == session.world
    assert loaded.turns[0].control == DISK_FULL
    assert loaded.turns[0].user_message == turn.user_message
    assert loaded.turns[0].judgement == turn.judgement

    data = json.loads(path.read_text())
    data["tabs"][0]["world"] = {"name": "bad name!", "title": "x", "facts": ["y"]}
    path.write_text(json.dumps(data))
    with pytest.raises(WorkspaceError, match=r"tabs\[0\]\.world: name 'bad name!'"):
        load_workspace(path)


def test_exports_carry_the_instruction() -> None:
    session = terminal_session()
    session.set_control(DISK_FULL)
    session.begin_turn(act(session, "touch x"))
    answer(session, "touch: cannot touch 'x': No space left on device")
    (record,) = [json.loads(line) for line in agentworldbench_jsonl([session]).splitlines()]
    assert DISK_FULL in record["current_prompt"] and record["prompt"][0] == record["current_prompt"]
    transcript = json.loads(json_transcript([session]))
    assert transcript["sessions"][0]["turns"][0]["control"] == DISK_FULL
    assert f"**Control instruction:** {DISK_FULL}" in markdown_transcript([session])


# -- fictional worlds -------------------------------------------------------------------------
WORLD_TOML = """
name = "orrin"
title = "Orrin"
premise = "A lake town."
facts = ["Mayor Ada Quill runs the Orrin ferry."]

[[people]]
name = "Ada Quill"
about = "Mayor since 2024."

[[pages]]
url = "https://orrin.example/ferry"
title = "The ferry"
content = "Runs hourly."
"""


def test_shipped_worlds_load_and_round_trip() -> None:
    worlds, problems = list_worlds()
    assert problems == []
    assert len(worlds) >= 2
    for world in worlds:
        assert parse_world(world.to_toml()) == world
        text = world.instruction()
        assert world.title in text and all(f in text for f in world.facts)


def test_a_saved_world_is_listed_and_replaces_a_shipped_one(isolated_dirs: dict[str, Path]) -> None:
    world = parse_world(WORLD_TOML.replace('name = "orrin"', 'name = "harrowmere"'))
    path = save_world(world)
    assert path == isolated_dirs["config"] / "worlds" / "harrowmere.toml"
    assert load_world_file(path) == world
    worlds, _ = list_worlds()
    assert [w for w in worlds if w.name == "harrowmere"] == [world]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name = ", "orrin.toml: Invalid value"),
        ('title = "x"\nfacts = ["a"]', "name is missing"),
        ('name = "a b"\nfacts = ["a"]', "name 'a b'"),
        ('name = "a"', "the world is empty"),
        ('name = "a"\nfacts = "one"', "facts must be a list of texts"),
        ('name = "a"\n[[pages]]\ntitle = "t"', r"pages\[0\] has no url"),
        ('name = "a"\npeople = [1]', r"people\[0\] must be a table"),
    ],
)
def test_bad_worlds_are_refused_in_one_line(text: str, message: str) -> None:
    with pytest.raises(WorldError, match=message) as caught:
        parse_world(text, "orrin.toml")
    assert "\n" not in str(caught.value)


def test_a_missing_world_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(WorldError, match="no such file"):
        load_world_file(tmp_path / "none.toml")


texts = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=40).filter(
    lambda t: t.strip()
)


@settings(max_examples=60, deadline=None)
@given(title=texts, fact=texts, about=texts, content=texts)
def test_any_world_text_survives_the_toml_file(
    title: str, fact: str, about: str, content: str
) -> None:
    world = FictionalWorld(
        "w",
        " ".join(title.split()),
        facts=(" ".join(fact.split()),),
        people=(WorldEntry("P", " ".join(about.split())),),
        pages=(WorldPage("https://x.example", "T", " ".join(content.split())),),
    )
    assert parse_world(world.to_toml()) == world


# -- the picker screen ------------------------------------------------------------------------
async def test_picker_fills_a_preset_and_returns_the_choice() -> None:
    from textual.app import App
    from textual.widgets import Checkbox, OptionList, TextArea

    from agentworld_tui.ui.screens.perturbation_picker import ControlChoice, PerturbationPicker

    results: list[ControlChoice | None] = []

    class Host(App[None]):
        def on_mount(self) -> None:
            self.push_screen(PerturbationPicker("mcp"), results.append)

    app = Host()
    async with app.run_test(size=(100, 40)) as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, PerturbationPicker)
        options = screen.query_one("#presets", OptionList)
        options.focus()
        index = next(i for i, p in enumerate(screen.presets) if p.name == "rate-limit")
        options.highlighted = index
        await pilot.press("enter")
        assert "429" in screen.query_one("#instruction", TextArea).text
        screen.query_one("#persistent", Checkbox).value = True
        await pilot.press("ctrl+s")
        await pilot.pause()
    (choice,) = results
    assert choice is not None and choice.control is not None
    assert choice.control.preset == "rate-limit" and choice.control.persistent


async def test_picker_refuses_an_empty_instruction_and_can_remove() -> None:
    from textual.app import App
    from textual.widgets import Static

    from agentworld_tui.ui.screens.perturbation_picker import ControlChoice, PerturbationPicker

    results: list[ControlChoice | None] = []
    current = ControlInstruction("Old.", persistent=True)

    class Host(App[None]):
        def on_mount(self) -> None:
            self.push_screen(PerturbationPicker("web", current), results.append)

    app = Host()
    async with app.run_test(size=(100, 40)) as pilot:
        await pilot.pause()
        screen = app.screen
        from textual.widgets import TextArea

        screen.query_one("#instruction", TextArea).text = "  "
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert "empty" in str(screen.query_one("#picker-error", Static).render())
        await pilot.click("#remove")
        await pilot.pause()
    assert results == [ControlChoice(None)]


async def test_world_editor_attaches_an_edited_world() -> None:
    from textual.app import App
    from textual.widgets import Static, TextArea

    from agentworld_tui.ui.screens.world_editor import WorldChoice, WorldEditor

    results: list[WorldChoice | None] = []

    class Host(App[None]):
        def on_mount(self) -> None:
            self.push_screen(WorldEditor(), results.append)

    app = Host()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        screen = app.screen
        area = screen.query_one("#toml", TextArea)
        area.text = "name = "
        await pilot.pause()
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert "Invalid" in str(screen.query_one("#world-error", Static).render())
        area.text = WORLD_TOML
        await pilot.pause()
        await pilot.press("ctrl+s")
        await pilot.pause()
    (choice,) = results
    assert choice is not None and choice.world == parse_world(WORLD_TOML)
