"""verifiers driving the simulator through OpenEnv (docs/training.md).

verifiers' route for OpenEnv environments is its ``openenv`` taskset: given the
``base_url`` of a running OpenEnv server, each rollout resets an episode, shows the model
the observation and the action schema, and steps the environment with every reply. Point
it at ``agentworld env serve``:

    agentworld env serve --domain terminal --server http://gpu-box:8000/v1 --max-steps 20
    vf-eval @ examples/verifiers_openenv.toml    # in verifiers' own environment

verifiers lives in an environment of its own: it pins ``mcp==2.0.0`` and ``openai<3``, and
its OpenEnv taskset needs ``openenv>=0.4.1``, where agentworld needs ``mcp>=2.3`` and
openenv-core 0.3; the two talk over OpenEnv's WebSocket protocol only.

``--demo VF_EVAL`` runs it whole on this machine: a scripted world model
(tests/ggufgen.py) behind a real ``env serve`` and a scripted policy behind a real
``python -m llama_cpp.server`` (every answer the JSON of one ``send_keystrokes`` call),
evaluated by the ``vf-eval`` given, two rollouts of two steps each.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

WORLD_SCRIPT = (
    "The command lists the folder.</think>\n<predicted_observation>\n"
    "root@box:/app# ls\nindex.html  notes.txt\nroot@box:/app#\n</predicted_observation>"
)
ACTION = json.dumps({"tool": "send_keystrokes", "arguments": {"keystrokes": "ls\n"}})
CONFIG = """\
model = "{model}"
num_rollouts = 2
max_concurrent = 1
push = false
output_dir = "{out}"

[env.taskset]
id = "openenv"
base_url = "{env_url}"

[env.player.runtime]
type = "subprocess"

[client]
base_url = "{policy_url}"
api_key_var = "POLICY_API_KEY"
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start(command: list[str], log: Path, url: str) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(command, stdout=log.open("w"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"{command[2]} exited:\n{log.read_text()}")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return process
        except OSError:
            time.sleep(0.3)
    process.kill()
    raise SystemExit(f"{command[2]} did not start")


def demo(vf_eval: str) -> None:
    repo = Path(__file__).resolve().parent.parent
    sys.path.insert(0, str(repo / "tests"))
    from ggufgen import write_scripted_model

    import agentworld_tui.domains  # noqa: F401  # registers the domains sessions name
    from agentworld_tui.world.workspace import load_workspace

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        world = write_scripted_model(folder / "world.gguf", WORLD_SCRIPT, n_ctx_train=16384)
        policy = write_scripted_model(folder / "policy.gguf", ACTION, n_ctx_train=16384)
        env_port, policy_port = free_port(), free_port()
        running = [
            start(
                [
                    sys.executable,
                    "-m",
                    "agentworld_tui",
                    "env",
                    "serve",
                    "--domain",
                    "terminal",
                    "--model",
                    str(world),
                    "--ctx",
                    "16384",
                    "--threads",
                    "2",
                    "--temperature",
                    "0",
                    "--max-steps",
                    "2",
                    "--port",
                    str(env_port),
                    "--sessions",
                    str(folder / "episodes"),
                ],
                folder / "env.log",
                f"http://127.0.0.1:{env_port}/health",
            ),
            start(
                [
                    sys.executable,
                    "-m",
                    "llama_cpp.server",
                    "--model",
                    str(policy),
                    "--model_alias",
                    "scripted-policy",
                    "--n_ctx",
                    "16384",
                    "--n_threads",
                    "2",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(policy_port),
                ],
                folder / "policy.log",
                f"http://127.0.0.1:{policy_port}/v1/models",
            ),
        ]
        config = folder / "eval.toml"
        config.write_text(
            CONFIG.format(
                model="scripted-policy",
                out=folder / "out",
                env_url=f"http://127.0.0.1:{env_port}",
                policy_url=f"http://127.0.0.1:{policy_port}/v1",
            )
        )
        try:
            done = subprocess.run(
                [vf_eval, "@", str(config), "--no-rich"],
                capture_output=True,
                text=True,
                timeout=600,
                env={**os.environ, "POLICY_API_KEY": "none"},
                cwd=folder,
            )
        finally:
            for process in running:
                process.terminate()
                process.wait(30)
        if done.returncode != 0:
            raise SystemExit(f"vf-eval failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
        for path in sorted((folder / "out").glob("*/traces.jsonl")):
            for line in path.read_text().splitlines():
                _show(json.loads(line))
        steps = [
            len(tab.turns)
            for path in sorted((folder / "episodes").glob("*.json"))
            for tab in load_workspace(path).tabs
        ]
        print(f"env serve saved {len(steps)} episodes, {sum(steps)} simulated steps")


def _show(rollout: dict[str, object]) -> None:
    """One line per rollout: whether it ran clean, and the turns the model saw."""
    traces = rollout.get("traces") or []
    assert isinstance(traces, list)
    for trace in traces:
        nodes = trace.get("nodes", [])
        path, at = [], len(nodes) - 1
        while isinstance(at, int) and 0 < at < len(nodes):  # the last reply back to the start
            path.append(nodes[at])
            at = nodes[at].get("parent")
        turns = []
        for node in reversed(path):
            message = node.get("message", {})
            if message.get("role") == "assistant":
                turns.append(("policy", str(message.get("content", ""))))
            elif message.get("role") == "user":
                observation = json.loads(str(message.get("content", "{}"))).get("observation", {})
                turns.append(("env", str(observation.get("text", ""))))
        print(json.dumps({"ok": rollout.get("ok"), "turns": turns}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--demo", metavar="VF_EVAL", help="vf-eval of verifiers' environment")
    args = parser.parse_args()
    if not args.demo:
        parser.error("give --demo VF_EVAL, or run vf-eval @ examples/verifiers_openenv.toml")
    demo(args.demo)


if __name__ == "__main__":
    main()
