"""TRL's GRPO trainer driving the simulator through OpenEnv (docs/training.md).

TRL's route for environments is ``environment_factory``: a class whose ``reset`` starts an
episode (its text is appended to the prompt) and whose public methods are the tools the
policy calls; ``get_reward`` scores the finished rollout. Here that class holds an OpenEnv
client of ``agentworld env serve``, so every tool call is one simulated step.

    agentworld env serve --domain terminal --server http://gpu-box:8000/v1
    python examples/trl_grpo_openenv.py --env http://127.0.0.1:8766 --policy Qwen/Qwen3-0.6B

``--demo`` runs it whole on this machine without any download: a scripted world model
(tests/ggufgen.py, in llama.cpp) behind a real ``env serve``, and a tiny scripted policy
built here (a Qwen2 model of one layer whose every answer is one ``send_keystrokes`` call,
with TRL's Qwen2.5 chat template), trained for two GRPO steps on the CPU.

Needs torch, transformers and trl besides agentworld and openenv-core (docs/training.md).
"""

from __future__ import annotations

import argparse
import itertools
import json
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from agentworld_tui.agents.env.openenv_server import AgentWorldAction, AgentWorldClient

ENV_URL = "http://127.0.0.1:8766"
TASK = "List the files in /app, then say what is there."


class SimulatedTerminal:
    """One simulated terminal over OpenEnv, as TRL's ``environment_factory`` wants it."""

    def __init__(self) -> None:
        self.client = AgentWorldClient(base_url=ENV_URL, message_timeout_s=600).sync()
        self.client.connect()
        self.screens: list[str] = []

    def reset(self, **_example: Any) -> str:
        first = self.client.reset()
        self.screens = []
        return "\n\nThe terminal shows:\n" + first.observation.text

    def send_keystrokes(self, keystrokes: str) -> str:
        """
        Type into the terminal and get the screen after.

        Args:
            keystrokes: What to type; ending in a newline runs a command.

        Returns:
            The screen after the keystrokes.
        """
        result = self.client.step(
            AgentWorldAction(tool="send_keystrokes", arguments={"keystrokes": keystrokes})
        )
        observation = result.observation
        screen = observation.text if observation.status != "refused" else observation.error
        self.screens.append(screen)
        return screen

    def get_reward(self) -> float:
        """Your reward goes here; this one pays for having looked at the folder."""
        return 1.0 if any("index.html" in screen for screen in self.screens) else 0.0


def train(policy: str, output_dir: str, *, steps: int) -> dict[str, Any]:
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    dataset = Dataset.from_list([{"prompt": [{"role": "user", "content": TASK}]}] * 8)
    config = GRPOConfig(
        output_dir=output_dir,
        max_steps=steps,
        per_device_train_batch_size=2,
        num_generations=2,
        max_completion_length=192,
        max_tool_calling_iterations=2,
        learning_rate=1e-5,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
    )
    trainer = GRPOTrainer(
        model=policy,
        args=config,
        train_dataset=dataset,
        environment_factory=SimulatedTerminal,
    )
    trainer.train()
    return {"log": trainer.state.log_history}


# -- the demo: everything local -------------------------------------------------------------------
WORLD_SCRIPT = (
    "The command lists the folder.</think>\n<predicted_observation>\n"
    "root@box:/app# ls\nindex.html  notes.txt\nroot@box:/app#\n</predicted_observation>"
)
CALL = '{"name": "send_keystrokes", "arguments": {"keystrokes": "ls\\n"}}'


def build_tiny_policy(folder: Path) -> Path:
    """A Qwen2 model of one layer whose every answer is one ``send_keystrokes`` call: zero
    blocks, one-hot embeddings and a next-token table (the same trick as tests/ggufgen.py),
    with a byte-level tokenizer and TRL's Qwen2.5 chat template."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM
    from trl.chat_template_utils import qwen2_5_chat_template

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    vocab = {symbol: i for i, symbol in enumerate(sorted(alphabet))}
    pieces = ["<tool_call>", "\n" + CALL[:30], CALL[30:], "\n</tool_call>"]
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    model = models.BPE(vocab=dict(vocab), merges=[])
    tokenizer = Tokenizer(model)
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_tokens(pieces)
    tokenizer.add_special_tokens(specials)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        chat_template=qwen2_5_chat_template,
    )
    size = len(fast)
    width = -(-size // 64) * 64
    config = Qwen2Config(
        vocab_size=size,
        hidden_size=width,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=8192,
        tie_word_embeddings=False,
        eos_token_id=fast.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=fast.convert_tokens_to_ids("<|endoftext|>"),
    )
    policy = Qwen2ForCausalLM(config)
    newline = vocab["Ċ"]
    ids = [fast.convert_tokens_to_ids(p) for p in pieces]
    end = fast.convert_tokens_to_ids("<|im_end|>")
    successors = {newline: ids[0], **{a: b for a, b in itertools.pairwise(ids)}}
    successors[ids[-1]] = end
    scale = 10.0 / width**0.5
    with torch.no_grad():
        for parameter in policy.model.layers.parameters():
            parameter.zero_()
        for norm in (
            policy.model.layers[0].input_layernorm,
            policy.model.layers[0].post_attention_layernorm,
        ):
            norm.weight.fill_(1.0)
        policy.model.embed_tokens.weight.zero_()
        policy.model.embed_tokens.weight[torch.arange(size), torch.arange(size)] = 1.0
        table = torch.zeros(size, width)
        for token in range(size):
            table[successors.get(token, end), token] = scale
        policy.lm_head.weight.copy_(table)
    path = folder / "tiny-policy"
    policy.save_pretrained(path)
    fast.save_pretrained(path)
    return path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def demo() -> None:
    global ENV_URL
    repo = Path(__file__).resolve().parent.parent
    sys.path.insert(0, str(repo / "tests"))
    from ggufgen import write_scripted_model

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        world = write_scripted_model(folder / "world.gguf", WORLD_SCRIPT, n_ctx_train=16384)
        port = free_port()
        ENV_URL = f"http://127.0.0.1:{port}"
        log = (folder / "env.log").open("w")
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "agentworld_tui",
                "env",
                "serve",
                "--domain",
                "terminal",
                "--scenario",
                "web-server",
                "--model",
                str(world),
                "--ctx",
                "16384",
                "--threads",
                "2",
                "--temperature",
                "0",
                "--port",
                str(port),
                "--sessions",
                str(folder / "episodes"),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            _wait(f"{ENV_URL}/health", server, folder / "env.log")
            policy = build_tiny_policy(folder)
            started = time.monotonic()
            result = train(str(policy), str(folder / "out"), steps=2)
            seconds = time.monotonic() - started
            episodes = _episodes(folder / "episodes")
        finally:
            server.terminate()
            server.wait(30)
            log.close()
        for entry in result["log"]:
            kept = {k: v for k, v in entry.items() if k in SHOWN}
            print(json.dumps(kept, sort_keys=True))
        steps = sum(episodes)
        print(
            f"env serve saved {len(episodes)} episodes, {steps} simulated steps; "
            f"training took {seconds:.0f} s"
        )


def _episodes(folder: Path) -> list[int]:
    """The simulated steps of each episode ``env serve`` saved."""
    import agentworld_tui.domains  # noqa: F401  # registers the domains sessions name
    from agentworld_tui.world.workspace import load_workspace

    return [
        len(tab.turns)
        for path in sorted(folder.glob("*.json"))
        for tab in load_workspace(path).tabs
    ]


SHOWN = ("step", "loss", "reward", "rewards/SimulatedTerminal/mean", "tools/call_frequency")


def _wait(url: str, server: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"env serve exited:\n{log.read_text()}")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.3)
    raise SystemExit("env serve did not start")


def main() -> None:
    global ENV_URL
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--demo", action="store_true", help="everything local, tiny models")
    parser.add_argument("--env", default=ENV_URL, help="agentworld env serve's URL")
    parser.add_argument("--policy", help="the policy model (a path or a Hub name)")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--out", default="grpo-out")
    args = parser.parse_args()
    if args.demo:
        demo()
        return
    if not args.policy:
        parser.error("give --policy, or --demo")
    ENV_URL = args.env
    train(args.policy, args.out, steps=args.steps)


if __name__ == "__main__":
    main()
