"""docs/agents.md and docs/training.md followed literally, from a fresh pipx install (issue 44).

What a new agent builder does on the README's first command: ``pipx install .`` into a
fresh pipx home, then the documented steps, each run from the code block the docs show it
in (the blocks whose fence says ``walkthrough:NAME``): capture a real MCP server's tools
(``tests/twinserver.py``, an MCP server written with the official SDK, in place of the
docs' npm server), serve them simulated over stdio and HTTP to the official SDK client,
inject the OpenEnv and Gymnasium extras with pipx, and run ``env serve`` with OpenEnv's
client, the Python API, Gymnasium's checker and a rollout, the Python examples with the
pipx environment's python. Only placeholders are replaced: the model path (a scripted
GGUF, ``tests/ggufgen.py``), the world model's server (``python -m llama_cpp.server`` on a
scripted GGUF, started as docs/training.md says; for the HTTP step one that answers after
6 s, ``tests/slotserver.py``, slower than httpx2's default timeout as real models are), the
policy server (``tests/policyserver.py``), folders of the reader's machine, the bind address
(the loopback, with the token the docs set), and each server's port (a free one, on both
sides, so that no other process on the machine can answer). A step that fails names the doc
line.

pipx installs from a wheelhouse packed from this environment's own packages
(``tests/wheelhouse.py``), never from an index, so the versions are the ones the other
tests run with and nothing is compiled or downloaded. It takes a few minutes (pipx's
install of the project and its dependencies, then every step), so it runs only when
``AGENTWORLD_WALKTHROUGH=1`` is set, in one process (its steps share one install):
``AGENTWORLD_WALKTHROUGH=1 python -m pytest -n 0 tests/test_docs_walkthrough.py``. Ctrl+B (an agent steered from the app) is covered by the
app's own tests (tests/test_app_agent.py, tests/test_mcp_steering.py).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import tomllib
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import pytest
from faultserver import free_port
from markdown_it import MarkdownIt
from policyserver import Call, PolicyServer, Say
from slotserver import SlotServer

ROOT = Path(__file__).resolve().parents[1]
DOCS = ("README.md", "docs/agents.md", "docs/training.md")
MARKER = "walkthrough:"

pytestmark = pytest.mark.slow

SCREEN = "root@box:/app# ls\nindex.html  notes.txt\nroot@box:/app#"
NOTES = {"count": 2, "notes": ["todo.md", "ideas.md"]}
"""What the local world model answers every call: it conforms to twinserver's list_notes
output schema."""
START_LIMIT_S = 180.0
STEP_LIMIT_S = 600.0
SLOW_CALL_S = 6.0
"""How long the world model behind the HTTP server takes: more than httpx2's default
timeout (5 s), less than any real model's call."""


def scripted_answer(observation: str) -> list[str]:
    """A world model's whole answer in few tokens, so that each step is quick."""
    from ggufgen import split_script

    pieces = split_script(observation, min_len=8)
    return ["ok", "</think>", "<predicted_observation>", *pieces, "</predicted_observation>"]


# -- the docs' code blocks ---------------------------------------------------------------------


@dataclass(frozen=True)
class Block:
    doc: str
    name: str
    line: int
    """The doc's line number of the block's first line of code."""
    text: str

    def fill(self, *pairs: tuple[str, str]) -> str:
        """The block with each placeholder replaced; a placeholder it no longer holds fails."""
        text = self.text
        for old, new in pairs:
            if old not in text:
                pytest.fail(
                    f"{self.doc} block {self.name!r} (line {self.line}) no longer holds "
                    f"{old!r}: this test's placeholders must follow the docs"
                )
            text = text.replace(old, new)
        return text

    def commands(self, text: str | None = None) -> list[tuple[int, str]]:
        """Each command line with its doc line number, continuation lines joined."""
        found: list[tuple[int, str]] = []
        pending: list[str] = []
        start = 0
        for number, line in enumerate((text or self.text).splitlines(), self.line):
            if not pending:
                if not line.strip() or line.lstrip().startswith("#"):
                    continue
                start = number
            if line.endswith("\\"):
                pending.append(line[:-1])
                continue
            found.append((start, " ".join([*pending, line]).strip()))
            pending = []
        return found

    def where(self, line: int) -> str:
        source = (ROOT / self.doc).read_text(encoding="utf-8").splitlines()[line - 1]
        return f"{self.doc}:{line}: {source.strip()}"


def doc_blocks() -> dict[str, Block]:
    blocks: dict[str, Block] = {}
    parser = MarkdownIt()
    for doc in DOCS:
        for token in parser.parse((ROOT / doc).read_text(encoding="utf-8")):
            if token.type != "fence" or token.map is None:
                continue
            names = [w[len(MARKER) :] for w in token.info.split() if w.startswith(MARKER)]
            for name in names:
                assert name not in blocks, f"two walkthrough blocks are named {name!r}"
                blocks[name] = Block(doc, name, token.map[0] + 2, token.content)
    return blocks


BLOCKS = doc_blocks()
USED = {
    "install", "capture", "coding-agent-stdio", "coding-agent-http", "desktop", "http-serve",
    "sdk-stdio", "sdk-http", "inject", "python", "python-api", "env-serve", "openenv-client",
    "gymnasium", "tasks", "rollout",
}  # fmt: skip


def test_every_walkthrough_block_is_walked() -> None:
    """Runs without the walk too: a block renamed or added in the docs is seen at once."""
    assert set(BLOCKS) == USED


# -- the machine of a new user -----------------------------------------------------------------


def project_requirements() -> list[str]:
    """What the project's install and the docs' ``pipx inject`` need, and what builds it."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    project = pyproject["project"]
    extras = project["optional-dependencies"]
    return [
        *project["dependencies"],
        *extras["openenv"],
        *extras["gym"],
        *pyproject["build-system"]["requires"],
        "pip",
    ]


def checkout_copy(folder: Path) -> Path:
    """The project's files as a fresh clone has them."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=False)
    if listed.returncode != 0:
        shutil.copytree(ROOT, folder, ignore=shutil.ignore_patterns(".git", ".venv", "__pycache__"))
        return folder
    for name in filter(None, listed.stdout.decode().split("\0")):
        source = ROOT / name
        if source.is_file():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, folder / name)
    return folder


def run_line(block: Block, line: int, command: str, cwd: Path, env: dict[str, str]) -> str:
    """Run one documented command to its end with bash; what it printed, or a failure that
    names the doc line."""
    try:
        done = subprocess.run(
            ["bash", "-c", command],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=STEP_LIMIT_S,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{block.where(line)}\ndid not end within {STEP_LIMIT_S} s: {exc.stderr}")
    if done.returncode != 0:
        pytest.fail(
            f"{block.where(line)}\nexited {done.returncode}\n"
            f"stdout: {done.stdout[-3000:]}\nstderr: {done.stderr[-3000:]}"
        )
    return done.stdout + done.stderr


@dataclass
class Walk:
    work: Path
    """Where the reader types the commands."""
    env: dict[str, str]
    first_start: str
    """The README's command after the install: the app."""
    world_url: str
    policy_url: str
    notes_model: Path
    twin_folder: Path

    def sh(self, block: Block, line: int, command: str) -> str:
        return run_line(block, line, command, self.work, self.env)

    def export(self, block: Block, line: int, command: str) -> None:
        match = re.fullmatch(r"export (\w+)=(.*)", command)
        assert match, block.where(line)
        name = match.group(1)
        self.env[name] = self.sh(block, line, f'{command}; printf %s "${name}"')

    @contextmanager
    def serving(self, block: Block, line: int, command: str, ready: str) -> Iterator[str]:
        """A documented server command, running until the block's checks are done; what it
        said when ``ready`` (a regular expression) appeared on its standard error."""
        log_path = self.work / f"server-{line}.log"
        with log_path.open("w") as log:
            process = subprocess.Popen(
                ["bash", "-c", f"exec {command}"],
                cwd=self.work,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            try:
                deadline = time.monotonic() + START_LIMIT_S
                while not re.search(ready, said := log_path.read_text()):
                    if process.poll() is not None or time.monotonic() > deadline:
                        pytest.fail(f"{block.where(line)}\ndid not start:\n{said[-3000:]}")
                    time.sleep(0.2)
                yield said
            finally:
                process.send_signal(signal.SIGINT)  # Ctrl+C, as the docs say
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait(timeout=30)
                    pytest.fail(f"{block.where(line)}\ndid not stop on Ctrl+C")

    def python(self, block: Block, code: str) -> str:
        """A documented Python example, run as docs/training.md says (the pipx environment's
        python); a traceback's line is the doc's line."""
        script = self.work / f"walk_{block.name.replace('-', '_')}.py"
        script.write_text("\n" * (block.line - 1) + code, encoding="utf-8")
        runner = BLOCKS["python"]
        ((line, command),) = runner.commands(
            runner.fill(("my_training.py", shlex.quote(str(script))))
        )
        try:
            done = subprocess.run(
                ["bash", "-c", command],
                cwd=self.work,
                env=self.env,
                capture_output=True,
                text=True,
                timeout=STEP_LIMIT_S,
            )
        except subprocess.TimeoutExpired as exc:
            pytest.fail(f"{block.doc} block {block.name!r} did not end: {exc.stderr}")
        if done.returncode != 0:
            lines = re.findall(rf'File "{re.escape(str(script))}", line (\d+)', done.stderr)
            where = block.where(int(lines[-1])) if lines else f"{block.doc}:{block.line}"
            pytest.fail(f"{where}\nfailed, run with {runner.where(line)}\n{done.stderr[-3000:]}")
        return done.stdout


def wait_for_server(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_LIMIT_S
    while True:
        if process.poll() is not None:
            pytest.fail(f"llama_cpp.server exited: {log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url + "/models", timeout=2) as reply:
                if reply.status == 200:
                    return
        except OSError:
            pass
        assert time.monotonic() < deadline, "llama_cpp.server did not become ready"
        time.sleep(0.2)


@contextmanager
def world_server(folder: Path) -> Iterator[str]:
    """The world model on a server, started as docs/training.md says of llama-cpp-python's
    server (``--interrupt_requests False``: several environments at once)."""
    from ggufgen import write_scripted_model

    model = write_scripted_model(folder / "world.gguf", scripted_answer(SCREEN), n_ctx_train=32768)
    port = free_port()
    log = folder / "world-server.log"
    with log.open("w") as out:
        command = [sys.executable, "-m", "llama_cpp.server", "--model", str(model)]
        command += ["--n_ctx", "32768", "--interrupt_requests", "False", "--n_threads", "2"]
        command += ["--host", "127.0.0.1", "--port", str(port)]
        process = subprocess.Popen(
            command,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        url = f"http://127.0.0.1:{port}/v1"
        try:
            wait_for_server(url, process, log)
            yield url
        finally:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=30)


def policy(body: dict[str, Any]) -> Call | Say:
    """A policy that calls its task's tool once, then says it is done."""
    if any(m.get("role") == "assistant" for m in body.get("messages", [])):
        return Say("Done: the answer is in the last observation.")
    names = [tool["function"]["name"] for tool in body.get("tools", [])]
    if "send_keystrokes" in names:
        return Call("send_keystrokes", {"keystrokes": "df -h\n"})
    return Call("web_search", {"query": "harbour council chair"})


@pytest.fixture(scope="module")
def walk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Walk]:
    """A fresh pipx install of the checkout, as the README says, with the extras injected
    as docs/training.md says; the world model's and the policy's servers."""
    if os.environ.get("AGENTWORLD_WALKTHROUGH") != "1":
        pytest.skip("the docs walkthrough takes minutes: set AGENTWORLD_WALKTHROUGH=1")
    import wheelhouse
    from ggufgen import write_scripted_model

    base = tmp_path_factory.mktemp("walkthrough")
    home, work, tools = base / "home", base / "work", base / "tools"
    for folder in (home, work, tools):
        folder.mkdir()
    wheelhouse.build(base / "wheelhouse", project_requirements())
    (tools / "pipx").symlink_to(Path(sys.executable).parent / "pipx")
    (tools / "python").symlink_to(Path(sys.base_prefix) / "bin" / "python3")
    pipx_bin = base / "pipx-bin"
    env = {
        "HOME": str(home),
        "PATH": os.pathsep.join([str(pipx_bin), str(tools), "/usr/local/bin", "/usr/bin", "/bin"]),
        "LANG": "C.UTF-8",
        "TMPDIR": os.environ.get("TMPDIR", "/tmp"),
        "PIPX_HOME": str(base / "pipx-home"),
        "PIPX_BIN_DIR": str(pipx_bin),
        "PIPX_MAN_DIR": str(base / "pipx-man"),
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(base / "wheelhouse"),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "HF_HUB_OFFLINE": "1",
    }
    install = BLOCKS["install"]
    ((line, command),) = install.commands()
    first, _, first_start = command.partition(" && ")
    run_line(install, line, first, checkout_copy(base / "checkout"), env)
    inject = BLOCKS["inject"]
    for line, command in inject.commands():
        run_line(inject, line, command, work, env)
    twin_folder = base / "notebook"
    twin_folder.mkdir()
    notes_model = write_scripted_model(
        base / "notes.gguf", scripted_answer(json.dumps(NOTES)), n_ctx_train=32768
    )
    with world_server(base) as world_url, PolicyServer(policy, model="my-agent") as policy_server:
        yield Walk(work, env, first_start, world_url, policy_server.url, notes_model, twin_folder)


# -- README: install and first start ------------------------------------------------------------


def test_readme_install_gives_an_app_that_starts_on_the_model_picker(walk: Walk) -> None:
    from ptyapp import PtyApp

    from agentworld_tui import __version__

    block = BLOCKS["install"]
    program = shutil.which(walk.first_start, path=walk.env["PATH"])
    assert program == str(Path(walk.env["PIPX_BIN_DIR"]) / "agentworld"), block.where(block.line)
    version = walk.sh(block, block.line, "agentworld --version")
    assert version.strip() == f"agentworld {__version__}"
    with PtyApp([], program=[program], env={**walk.env, "TERM": "xterm-256color"}) as app:
        app.wait_for("Choose a model", timeout=120)
        assert app.quit() == 0


# -- docs/agents.md ------------------------------------------------------------------------------


def twin_command(walk: Walk) -> str:
    """The real MCP server the docs capture, started by the same kind of command line."""
    return f"{sys.executable} {ROOT / 'tests' / 'twinserver.py'} stdio {walk.twin_folder}"


async def call_over_stdio(
    walk: Walk, block: Block, line: int, command: str, args: list[str], calls: dict[str, Any]
) -> dict[str, Any]:
    """Connect the SDK client to a documented stdio server; every call's result, checked."""
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    server = StdioServerParameters(command=command, args=args, env=walk.env, cwd=walk.work)
    results: dict[str, Any] = {}
    with anyio.fail_after(STEP_LIMIT_S):
        async with Client(server) as client:
            listed = {tool.name: tool for tool in (await client.list_tools()).tools}
            for name, arguments in calls.items():
                assert name in listed, f"{block.where(line)}\n{name} is not among {list(listed)}"
                result = await client.call_tool(name, arguments)
                check_result(block, line, listed[name], result)
                results[name] = result
    return results


def check_result(block: Block, line: int, tool: Any, result: Any) -> None:
    """Not an error; with an output schema, structured content that conforms to it."""
    where = block.where(line)
    assert not result.is_error, f"{where}\n{tool.name} answered an error: {result.content}"
    if tool.output_schema is not None:
        assert result.structured_content is not None, f"{where}\n{tool.name}: no structuredContent"
        jsonschema.validate(result.structured_content, tool.output_schema)
        text = result.content[0].text
        assert json.loads(text) == result.structured_content, where


async def test_captured_tools_are_served_over_stdio_to_the_sdk_client(walk: Walk) -> None:
    capture = BLOCKS["capture"]
    model = str(walk.notes_model)
    (tools_line, tools_command), (serve_line, serve_command) = capture.commands(
        capture.fill(
            ("npx -y @modelcontextprotocol/server-filesystem /tmp", twin_command(walk)),
            ("/home/me/models/agentworld-Q4_K_M.gguf", model),
        )
    )
    walk.sh(capture, tools_line, tools_command)
    captured = json.loads((walk.work / "tools.json").read_text())
    captured_tools = {t["name"]: t for t in captured.get("tools", captured)}
    from twinserver import TOOLS

    assert set(captured_tools) == {t["name"] for t in TOOLS}, capture.where(tools_line)
    assert captured_tools["list_notes"]["outputSchema"] == TOOLS[2]["outputSchema"]

    program, *args = shlex.split(serve_command)
    results = await call_over_stdio(
        walk, capture, serve_line, program, args, {"list_notes": {}, "read_note": {"name": "todo"}}
    )
    assert results["list_notes"].structured_content == NOTES
    assert results["read_note"].content[0].text == json.dumps(NOTES)

    agent = BLOCKS["coding-agent-stdio"]
    config = json.loads(
        agent.fill(
            ("/home/me/sim/tools.json", str(walk.work / "tools.json")),
            ("/home/me/models/agentworld-Q4_K_M.gguf", model),
            ("http://gpu-box:8000/v1", walk.world_url),
        )
    )
    notes, repo = config["mcpServers"]["simulated-notes"], config["mcpServers"]["simulated-repo"]
    results = await call_over_stdio(
        walk, agent, agent.line, notes["command"], notes["args"], {"list_notes": {}}
    )
    assert results["list_notes"].structured_content == NOTES
    results = await call_over_stdio(
        walk, agent, agent.line, repo["command"], repo["args"], {"execute_bash": {"command": "ls"}}
    )
    assert SCREEN in results["execute_bash"].content[0].text

    desktop = BLOCKS["desktop"]
    sessions = walk.work / "desktop-sessions"
    entry = json.loads(
        desktop.fill(
            (
                "/home/me/.local/bin/agentworld",
                walk.sh(desktop, desktop.line, "which agentworld").strip(),
            ),
            ("/home/me/models/agentworld-Q4_K_M.gguf", model),
            ("/home/me/agentworld-sessions", str(sessions)),
        )
    )["mcpServers"]["simulated-filesystem"]
    path = {"path": "/home/maya/notes/inbox.md"}
    await call_over_stdio(
        walk, desktop, desktop.line, entry["command"], entry["args"], {"read_text_file": path}
    )
    saved = list(sessions.glob("*.json"))
    assert len(saved) == 1, desktop.where(desktop.line)
    assert not (walk.twin_folder / "calls.log").exists()  # the real server was never called


async def test_served_over_http_with_a_token(walk: Walk) -> None:
    block = BLOCKS["http-serve"]
    port = free_port()
    with SlotServer(slots=1, latency=SLOW_CALL_S, observation=SCREEN) as slow_world:
        (export_line, export), (serve_line, serve) = block.commands(
            block.fill(
                ("--host 0.0.0.0", f"--host 127.0.0.1 --port {port}"),
                ("http://gpu:8000/v1", slow_world.url),
            )
        )
        walk.export(block, export_line, export)
        assert len(walk.env["AGENTWORLD_MCP_TOKEN"]) >= 32, block.where(export_line)
        with walk.serving(block, serve_line, serve, ready=r"serving .* at http://"):
            await http_clients(walk, port)


async def http_clients(walk: Walk, port: int) -> None:
    """The coding agent's entry and the Python example, each call slower than httpx2's
    default timeout, as a real world model's are."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    agent = BLOCKS["coding-agent-http"]
    entry = json.loads(agent.fill(("127.0.0.1:8765", f"127.0.0.1:{port}")))["mcpServers"][
        "simulated-terminal"
    ]
    headers = {
        key: re.sub(r"\$\{(\w+)\}", lambda m: walk.env[m.group(1)], value)
        for key, value in entry["headers"].items()
    }
    assert entry["type"] == "http"
    refused = httpx2.post(entry["url"], json={}, headers={"Accept": "application/json"})
    assert refused.status_code == 401, agent.where(agent.line)
    http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=STEP_LIMIT_S))
    with anyio.fail_after(STEP_LIMIT_S):
        async with (
            http,
            Client(streamable_http_client(entry["url"], http_client=http)) as client,
        ):
            listed = {tool.name: tool for tool in (await client.list_tools()).tools}
            result = await client.call_tool("execute_bash", {"command": "ls"})
            check_result(agent, agent.line, listed["execute_bash"], result)
            assert SCREEN in result.content[0].text

    example = BLOCKS["sdk-http"]
    said = walk.python(example, example.fill(("http://gpu-box:8765/mcp", entry["url"])))
    assert SCREEN in said, example.where(example.line)


def test_the_sdk_example_over_stdio(walk: Walk) -> None:
    example = BLOCKS["sdk-stdio"]
    said = walk.python(example, example.fill(("http://127.0.0.1:8000/v1", walk.world_url)))
    assert said.splitlines()[0] == "['send_keystrokes']", example.where(example.line)
    assert SCREEN in said, example.where(example.line)


# -- docs/training.md ----------------------------------------------------------------------------


def test_the_extras_injected_with_pipx_reach_the_pipx_python(walk: Walk) -> None:
    """The walk's fixture ran the inject block; the runner block's python has them."""
    inject = BLOCKS["inject"]
    code = "import gymnasium, openenv\nprint('extras')\n"
    said = walk.python(Block(inject.doc, "extras", inject.line, code), code)
    assert said.strip() == "extras", inject.where(inject.line)


def test_the_python_api_example(walk: Walk) -> None:
    example = BLOCKS["python-api"]
    said = walk.python(example, example.fill(("http://gpu-box:8000/v1", walk.world_url)))
    assert SCREEN in said and "complete" in said, example.where(example.line)
    assert "empty action" in said.splitlines()[-1], example.where(example.line)
    assert (walk.work / "episode.json").is_file(), example.where(example.line)


def test_env_serve_with_openenv_s_client(walk: Walk) -> None:
    serve = BLOCKS["env-serve"]
    port = free_port()
    ((line, command),) = serve.commands(
        serve.fill(
            ("http://gpu-box:8000/v1", walk.world_url),
            ("--sessions episodes/", f"--sessions episodes/ --port {port}"),
        )
    )
    with walk.serving(serve, line, command, ready=r"OpenEnv environment at http://"):
        client = BLOCKS["openenv-client"]
        said = walk.python(client, client.fill(("localhost:8766", f"localhost:{port}")))
    assert SCREEN in said and said.rstrip().endswith("False"), client.where(client.line)
    assert list((walk.work / "episodes").glob("*.json")), serve.where(line)


def test_gymnasium_and_its_checker(walk: Walk) -> None:
    example = BLOCKS["gymnasium"]
    walk.python(example, example.fill(("http://gpu-box:8000/v1", walk.world_url)))


def test_a_rollout_with_a_policy_server(walk: Walk) -> None:
    tasks = BLOCKS["tasks"]
    (walk.work / "tasks.jsonl").write_text(tasks.text, encoding="utf-8")
    rollout = BLOCKS["rollout"]
    ((line, command),) = rollout.commands(
        rollout.fill(
            ("http://gpu-box:8000/v1", walk.world_url),
            ("http://policy-box:8001/v1", walk.policy_url),
        )
    )
    said = walk.sh(rollout, line, command)
    out = walk.work / "runs" / "first"
    episodes = [json.loads(x) for x in (out / "episodes.jsonl").read_text().splitlines()]
    where = rollout.where(line)
    assert len(episodes) == 2 * 8, f"{where}\n{said[-3000:]}"
    assert {e["ended"] for e in episodes} == {"no_tool_call"}, f"{where}\n{said[-3000:]}"
    assert all(len(e["steps"]) == 1 for e in episodes), where
    assert all(e["steps"][0]["status"] == "complete" for e in episodes), where
    summary = json.loads((out / "summary.json").read_text())
    assert summary, where
    assert "no episode made a tool call" not in said, where
