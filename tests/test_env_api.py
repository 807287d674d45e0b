"""The Python environment API (issue 30 item 1) against a real OpenAI-compatible server.

``faultserver.FaultServer`` on 127.0.0.1 is the world model: every step goes through the
simulator service and the real remote engine, and the requests it received show what the
model was sent.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from faultserver import FaultServer, Reply

from agentworld_tui.agents.env import (
    ActionError,
    EnvError,
    Environment,
    ToolCall,
    save_sessions,
)
from agentworld_tui.domains import get_domain
from agentworld_tui.world.perturbation import load_perturbations
from agentworld_tui.world.prompts import load_scenarios
from agentworld_tui.world.workspace import load_workspace

REPO = Path(__file__).resolve().parent.parent
SCREEN = "root@ad092d3df69c:/app# ls\nindex.html\nroot@ad092d3df69c:/app#"
USAGE = {"prompt_tokens": 321, "completion_tokens": 45}


def answer(text: str = SCREEN, reasoning: str = "The folder holds one file.") -> Reply:
    return Reply(
        reasoning=[reasoning],
        content=[f"<predicted_observation>\n{text}\n</predicted_observation>"],
        usage=USAGE,
    )


@pytest.fixture
def server() -> FaultServer:
    with FaultServer(default=answer()) as running:
        yield running


def sent_user_messages(server: FaultServer) -> list[str]:
    """The last user message of each chat request, in order."""
    return [r.body["messages"][-1]["content"] for r in server.chat_requests()]


def test_reset_gives_the_scenario_state_and_step_the_prediction_with_its_cost(server) -> None:
    scenario = next(s for s in load_scenarios("terminal")[0] if s.name == "web-server")
    with Environment("terminal", engine=server.url, scenario="web-server", seed=11) as env:
        first = env.reset()
        assert first.text == scenario.state and first.turn == 0
        step = env.step("ls\n")
    assert step.observation.text == SCREEN and step.turn == 1
    assert step.reasoning == "The folder holds one file."
    assert step.status == "complete" and step.note == "" and not step.failed
    assert step.cost.prompt_tokens == 321 and step.cost.generated_tokens == 45
    assert step.cost.evaluated_prompt_tokens == 321
    assert step.cost.seconds >= step.cost.generation_seconds > 0
    assert step.action.payload == [{"keystrokes": "ls\n", "duration": 1.0}]
    body = server.chat_requests()[0].body
    assert body["seed"] == 11
    # The model saw the scenario's state with the first action, as the app sends it.
    assert scenario.state.strip() in body["messages"][-1]["content"]


def test_the_history_goes_with_every_later_step(server) -> None:
    with Environment("terminal", engine=server.url) as env:
        env.reset()
        env.step("ls\n")
        env.step("cat index.html\n")
    messages = server.chat_requests()[-1].body["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert messages[2]["content"] == SCREEN


NATIVE_FORMS = [
    ("terminal", [{"keystrokes": "ls\n"}], "ls\n"),
    ("terminal", {"keystrokes": "ls\n"}, "ls\n"),
    ("mcp", {"name": "search_issues", "arguments": {"query": "crash"}}, None),
    ("web", {"name": "click", "arguments": {"bid": "12"}}, "click('12')"),
    ("android", {"action": "back"}, '{"action": "back"}'),
    ("os", {"code": "pyautogui.press('enter')"}, "pyautogui.press('enter')"),
    ("search", {"name": "web_search", "arguments": {"query": "rust"}}, None),
]


@pytest.mark.parametrize(("domain", "value", "text"), NATIVE_FORMS)
def test_native_forms_give_the_action_the_domain_makes_of_its_text(
    server, domain: str, value: object, text: str | None
) -> None:
    with Environment(domain, engine=server.url) as env:
        env.reset()
        if domain == "mcp":
            tool = env.tools[0]
            value = {"name": tool.name, "arguments": tool.skeleton()}
        made = env.action(value)
        written = text if text is not None else json.dumps(value)
        assert made == get_domain(domain).parse_action(written, env.session.scenario)
        step = env.step(value)
    assert step.action == made and step.status == "complete"


def test_a_tool_call_is_the_action_agent_tools_make(server) -> None:
    with Environment("terminal", engine=server.url) as env:
        env.reset()
        assert [t.name for t in env.tools] == ["send_keystrokes"]
        openai = env.openai_tools()[0]
        assert openai["type"] == "function" and openai["function"]["name"] == "send_keystrokes"
        step = env.call_tool("send_keystrokes", {"keystrokes": "pwd\n", "duration": 2})
    assert step.action.payload == [{"keystrokes": "pwd\n", "duration": 2.0}]


def test_a_refused_action_has_the_app_s_message_and_the_episode_goes_on(server) -> None:
    domain = get_domain("web")
    with Environment("web", engine=server.url) as env:
        env.reset()
        with pytest.raises(ActionError) as app_error:
            domain.parse_action("click(", env.session.scenario)
        with pytest.raises(ActionError) as refused:
            env.step("click(")
        assert str(refused.value) == str(app_error.value)
        with pytest.raises(ActionError, match="unknown tool 'rm'"):
            env.step(ToolCall("rm", {}))
        assert env.steps == 0 and env.turns == []
        assert server.chat_requests() == []
        step = env.step("click('12')")
    assert step.turn == 1 and step.status == "complete"


def test_an_unknown_domain_scenario_or_world_is_one_line() -> None:
    with pytest.raises(EnvError, match="unknown domain 'tty'; choose from terminal"):
        Environment("tty", engine="http://127.0.0.1:9/v1")
    with pytest.raises(EnvError, match="terminal has no scenario 'moon' \\(it has: python-project"):
        Environment("terminal", engine="http://127.0.0.1:9/v1", scenario="moon")
    with pytest.raises(EnvError, match="no fictional world 'atlantis'"):
        Environment("search", engine="http://127.0.0.1:9/v1", world="atlantis")
    with pytest.raises(EnvError, match="give an engine"):
        Environment("terminal")


def test_a_server_that_is_not_there_is_an_env_error_at_reset() -> None:
    from faultserver import free_port

    with (
        Environment("terminal", engine=f"http://127.0.0.1:{free_port()}/v1") as env,
        pytest.raises(EnvError, match="connection refused"),
    ):
        env.reset()


def test_a_schedule_sends_its_perturbations_at_their_turns(server, tmp_path: Path) -> None:
    presets = {p.name: p for p in load_perturbations("terminal")[0]}
    schedule = [
        {"calls": [2], "preset": "disk-full"},
        {"calls": ["4-"], "instruction": "The network is down from now on."},
    ]
    saved = tmp_path / "episode.json"
    with Environment("terminal", engine=server.url, schedule=schedule, session_file=saved) as env:
        env.reset()
        steps = [env.step(f"echo {n}\n") for n in range(1, 6)]
    assert [s.preset for s in steps] == ["", "disk-full", "", "", ""]
    assert [bool(s.perturbation) for s in steps] == [False, True, False, True, True]
    # Each step records the rules that applied to it, as an MCP turn does.
    assert [[(d.rule, d.fired) for d in s.schedule] for s in steps] == [
        [], [(1, True)], [], [(2, True)], [(2, True)],
    ]  # fmt: skip
    assert steps[1].to_dict()["schedule"] == [
        {
            "rule": 1,
            "draw": round(steps[1].schedule[0].draw, 6),
            "fired": True,
            "preset": "disk-full",
        }
    ]
    # The session file says which rules were drawn at which turn, as an MCP session does.
    (tab,) = load_workspace(saved).tabs
    assert [t.stats.get("schedule", []) for t in tab.turns] == [
        s.to_dict()["schedule"] for s in steps
    ]
    sent = sent_user_messages(server)
    assert presets["disk-full"].instruction in sent[1]
    assert "**Simulation Instruction:**" not in sent[0] + sent[2]
    assert all("The network is down from now on." in text for text in sent[3:])


def test_a_bad_schedule_says_which_rule(server) -> None:
    with pytest.raises(EnvError, match="rule 2: no terminal perturbation named 'x'"):
        Environment(
            "terminal",
            engine=server.url,
            schedule=[{"calls": [1], "preset": "disk-full"}, {"calls": [3], "preset": "x"}],
        )
    with pytest.raises(EnvError, match="rule 1: calls are numbers from 1"):
        Environment("terminal", engine=server.url, schedule=[{"calls": [0], "instruction": "x"}])
    with pytest.raises(EnvError, match=r"rule 1: unknown key 'turn' \(calls = \[N\] is turn N"):
        Environment("terminal", engine=server.url, schedule=[{"turn": 2, "instruction": "x"}])


def test_a_schedule_with_a_seed_draws_the_same_turns_every_episode(server) -> None:
    schedule = {"seed": 7, "rule": [{"calls": ["1-"], "probability": 0.5, "instruction": "Slow."}]}
    fired = []
    for _episode in range(2):
        with Environment("terminal", engine=server.url, schedule=schedule) as env:
            env.reset()
            fired.append([bool(env.step(f"echo {n}\n").perturbation) for n in range(1, 7)])
    assert fired[0] == fired[1]


def test_perturb_sends_a_preset_with_the_next_step_only(server) -> None:
    with Environment("terminal", engine=server.url) as env:
        env.reset()
        env.perturb(preset="disk-full")
        first = env.step("touch a\n")
        second = env.step("touch b\n")
        with pytest.raises(EnvError, match="no terminal perturbation named 'nope'"):
            env.perturb(preset="nope")
    assert first.preset == "disk-full" and first.perturbation
    assert second.perturbation == ""


def test_a_fictional_world_goes_with_every_turn(server) -> None:
    with Environment("search", engine=server.url, world="harrowmere") as env:
        env.reset()
        env.call_tool("web_search", {"query": "harbour council"})
        env.call_tool("web_search", {"query": "ferry times"})
    assert all("Fictional world:" in text for text in sent_user_messages(server))


def test_max_steps_ends_the_episode(server) -> None:
    with Environment("terminal", engine=server.url, max_steps=2) as env:
        env.reset()
        assert not env.step("ls\n").done
        assert env.step("ls\n").done
        with pytest.raises(EnvError, match="ended after 2 steps: reset it"):
            env.step("ls\n")
        env.reset()
        assert env.step("ls\n").turn == 1


def test_an_episode_saves_as_a_session_file_the_app_opens(server, tmp_path: Path) -> None:
    path = tmp_path / "episode.json"
    with Environment("terminal", engine=server.url, session_file=path) as env:
        env.reset()
        env.step("ls\n")
        assert load_workspace(path).tabs[0].turns[0].observation == SCREEN  # saved at once
        env.step("pwd\n")
        twin = env.fork()
        twin.step("whoami\n")
        copy = tmp_path / "both.json"
        save_sessions(copy, [env, twin])
        exported = json.loads(env.export("json"))
        markdown = env.export("markdown")
        twin.close()
    tabs = load_workspace(path).tabs
    assert [len(t.turns) for t in tabs] == [2, 3]  # the fork saved itself beside it
    both = load_workspace(copy).tabs
    assert [len(t.turns) for t in both] == [2, 3] and both[0].id != both[1].id
    assert exported["sessions"][0]["turns"][0]["observation"] == SCREEN
    assert "index.html" in markdown


def test_a_session_file_s_other_tabs_are_kept(server, tmp_path: Path) -> None:
    path = tmp_path / "mine.json"
    with Environment("terminal", engine=server.url) as first:
        first.reset()
        first.step("ls\n")
        first.save(path)
    with Environment("web", engine=server.url) as second:
        second.reset()
        second.step("click('3')")
        second.save(path)
    assert [t.domain.name for t in load_workspace(path).tabs] == ["terminal", "web"]


def test_async_steps_of_several_environments_run_at_once(tmp_path: Path) -> None:
    """Three environments on one simulator: their requests are in flight together (the
    server holds each until all three came)."""
    import threading

    from agentworld_tui.agents.env import open_simulator

    arrived = threading.Barrier(3, timeout=10)

    class Gathering(FaultServer):
        def next_reply(self) -> Reply:
            arrived.wait()
            return super().next_reply()

    with Gathering(default=answer()) as server:
        simulator = open_simulator(server.url, concurrency=3)
        envs = [Environment("terminal", simulator=simulator) for _ in range(3)]

        async def run() -> list[str]:
            for env in envs:
                await env.areset()
            steps = await asyncio.gather(*(env.astep(f"echo {i}\n") for i, env in enumerate(envs)))
            return [s.observation.text for s in steps]

        try:
            assert asyncio.run(run()) == [SCREEN] * 3
        finally:
            for env in envs:
                env.close()
            simulator.close()


def test_cancelling_an_async_step_stops_its_request_and_keeps_the_turn(tmp_path: Path) -> None:
    with FaultServer(default=Reply(hang=True)) as server:
        env = Environment("terminal", engine=server.url)

        async def run() -> None:
            await env.areset()
            task = asyncio.create_task(env.astep("sleep 100\n"))
            while not server.chat_requests():
                await asyncio.sleep(0.01)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            server.default = answer()
            step = await env.astep("ls\n")  # the cancelled turn settles first
            assert step.turn == 2 and step.status == "complete"

        try:
            asyncio.run(run())
            assert env.turns[0].status == "interrupted"
        finally:
            env.close()


def test_the_api_imports_neither_textual_nor_llama_cpp(server) -> None:
    code = textwrap.dedent(
        f"""
        import sys
        from agentworld_tui.agents.env import Environment, EnvironmentPool
        with Environment("terminal", engine={server.url!r}) as env:
            env.reset()
            step = env.step("ls\\n")
            fork = env.fork()
            fork.step("pwd\\n")
            fork.close()
        assert step.status == "complete", step
        print(sorted(m for m in ("textual", "llama_cpp", "openenv", "gymnasium") if m in sys.modules))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_generation_limits_come_with_the_api(server) -> None:
    """Without ``GenerationParams`` a step may generate 32,768 tokens (issue 44 item 5):
    it is exported beside ``Environment``, and its limits reach the server."""
    from agentworld_tui.agents.env import GenerationParams

    params = GenerationParams(max_tokens=256, temperature=0.2, enable_thinking=False)
    with Environment("terminal", engine=server.url, params=params) as env:
        env.reset()
        env.step("ls\n")
    body = server.chat_requests()[0].body
    assert (body["max_tokens"], body["temperature"]) == (256, 0.2)
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    training = (REPO / "docs" / "training.md").read_text()
    assert "GenerationParams(max_tokens=" in training


EXTRAS = "'openenv-core>=0.3,<0.4' 'gymnasium>=1.0,<2'"


def test_where_extras_are_named_pipx_users_are_told_what_works() -> None:
    """The extras are not on the package index: a pipx install adds them with ``pipx
    inject`` and runs the Python examples with the pipx environment's python."""
    for doc in ("README.md", "docs/training.md"):
        text = (REPO / doc).read_text()
        assert f"pipx inject agentworld-tui {EXTRAS}" in text, doc
    training = (REPO / "docs" / "training.md").read_text()
    assert "pipx environment --value PIPX_LOCAL_VENVS" in training
    assert "pip install 'agentworld-tui[openenv]'" not in training


def test_env_serve_without_openenv_names_the_pipx_way(monkeypatch, capsys) -> None:
    from agentworld_tui.cli import main

    monkeypatch.setitem(sys.modules, "agentworld_tui.agents.env.openenv_server", None)
    assert main(["env", "serve", "--domain", "terminal", "--server", "http://127.0.0.1:9/v1"]) == 2
    err = capsys.readouterr().err
    assert "pipx inject agentworld-tui 'openenv-core>=0.3,<0.4'" in err
    assert "pip install" in err and len(err.strip().splitlines()) == 1
