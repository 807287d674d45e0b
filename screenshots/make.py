"""Make the SVG screenshots in this folder from the real app.

Every tab gets its first ready scenario and one turn, typed through the demo player (the
code behind ``agentworld demo``); then the history screen (F7) and a replay (F8).

No Qwen-AgentWorld weights are downloaded where these pictures are made, so the answers
come from *scripted* tiny GGUF models (tests/ggufgen.py): real llama.cpp runs them, and each
writes the reasoning and observation given below for its tab, whatever it is asked. The
pictures show the app, not the quality of the world model.

    python screenshots/make.py [--out screenshots] [--size 132x40]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from ggufgen import split_script, write_scripted_model  # noqa: E402
from textual.pilot import Pilot  # noqa: E402
from textual.widgets import DataTable, Input, TextArea  # noqa: E402

from agentworld_tui.cli.demo import DemoAction, DemoScript, DemoTab  # noqa: E402
from agentworld_tui.config import Settings  # noqa: E402
from agentworld_tui.domains import DOMAINS  # noqa: E402
from agentworld_tui.engines.llama import LlamaEngine  # noqa: E402
from agentworld_tui.ui.app import AgentWorldApp  # noqa: E402
from agentworld_tui.ui.demo import DemoPlayer  # noqa: E402
from agentworld_tui.world.prompts import load_scenarios  # noqa: E402
from agentworld_tui.world.session import new_session  # noqa: E402

N_CTX = 32768
"""The scripted models read bytes as tokens, so prompts count long."""

LS_LA = """user@devbox:~/project$ ls -la
total 40
drwxr-xr-x  6 user user 4096 Jun  9 10:02 .
drwxr-x--- 18 user user 4096 Jun  9 09:58 ..
drwxr-xr-x  8 user user 4096 Jun  9 10:01 .git
-rw-r--r--  1 user user  412 Jun  9 09:58 .gitignore
-rw-r--r--  1 user user 1067 Jun  9 09:58 LICENSE
-rw-r--r--  1 user user  886 Jun  9 09:58 README.md
-rw-r--r--  1 user user  743 Jun  9 09:58 pyproject.toml
drwxr-xr-x  3 user user 4096 Jun  9 09:58 src
drwxr-xr-x  2 user user 4096 Jun  9 09:58 tests
user@devbox:~/project$ """

INBOX = """- [ ] renew library books (due Friday)
- [ ] email Dr. Lindqvist about chapter 3 feedback
- [x] order tomato seedlings
- [ ] fix the gutter above the shed
- [ ] book dentist for June
- [ ] back up thesis folder to the external drive
- [ ] read Hartmann 2019 on soil moisture sensors
- [x] pay council tax
- [ ] plan the allotment rota with Sam
- [ ] call grandma on Sunday
- [ ] draft the garden-planner README
- [ ] cancel the unused streaming subscription"""

SEARCH_RESULTS = """1. [Aurora forecast and best viewing times in Tromsø](https://www.visittromso.example/aurora)
   Visit Tromsø · 2026-01-12
   The northern lights season runs from late September to early April; clear, dark nights between 18:00 and 01:00 give the best chances.

2. [When to see the northern lights in Norway: a month-by-month guide](https://www.nordictravel.example/guides/aurora-months)
   Nordic Travel Journal · 2025-10-03
   Late autumn and late winter combine long nights with more settled weather around Tromsø.

3. [Space weather: Kp index explained](https://spaceweather.example/kp-index)
   Space Weather Desk · 2025-08-21
   A Kp of 3 or more is usually enough for displays overhead at Tromsø's latitude (69.6° N)."""

PYTEST = """============================= test session starts ==============================
platform linux -- Python 3.11.9, pytest-8.2.0, pluggy-1.5.0
rootdir: /testbed
configfile: pyproject.toml
collected 9 items

tests/test_slug.py ........F                                             [100%]

=================================== FAILURES ===================================
____________________________ test_slugify_unicode ______________________________

    def test_slugify_unicode():
>       assert slugify("Łódź śródmieście") == "lodz-srodmiescie"
E       AssertionError: assert 'dz-rodmiescie' == 'lodz-srodmiescie'
E
E         - lodz-srodmiescie
E         ? ^^   ^
E         + dz-rodmiescie
E         ? ^   ^

tests/test_slug.py:61: AssertionError
=========================== short test summary info ============================
FAILED tests/test_slug.py::test_slugify_unicode - AssertionError: assert 'dz-r...
========================= 1 failed, 8 passed in 0.04s =========================="""


def turn_script(reasoning: str, observation: str) -> list[str]:
    """The model's whole output, in long pieces: a small vocabulary keeps the model fast."""
    text = f"{reasoning}</think><predicted_observation>{observation}</predicted_observation>"
    return split_script(text, min_len=16)


def shots() -> dict[str, tuple[str, str, str]]:
    """Per tab: the action typed, the reasoning and the observation its model writes."""
    state = {d: load_scenarios(d)[0][0].state for d in DOMAINS}
    web = (
        state["web"]
        .replace("option 'Slate grey', selected=True", "option 'Slate grey', selected=False")
        .replace("option 'Forest green', selected=False", "option 'Forest green', selected=True")
    )
    android = re.sub(
        r'text="Phone number or email"( resource-id="com\.chirp\.messenger:id/input_login")',
        r'text="+44 7700 900123"\1',
        state["android"],
    )
    desktop = (
        state["os"]
        .replace("table-cell\tB8\t\t\tselected", "table-cell\tB8\t246435\t\tselected")
        .replace("text\tInput line\t\t", "text\tInput line\t=SUM(B2:B6)\t")
    )
    return {
        "terminal": (
            "ls -la",
            "A detailed listing of ~/project. It is a src-layout package with a git "
            "repository, so .git and .gitignore show up; the dates match a checkout from "
            "this morning.",
            LS_LA,
        ),
        "mcp": (
            json.dumps(
                {"name": "read_text_file", "arguments": {"path": "/home/maya/notes/inbox.md"}},
                indent=2,
            ),
            "inbox.md sits inside the allowed directory and holds twelve short todo lines; "
            "the tool returns the raw text.",
            INBOX,
        ),
        "web": (
            'select_option("a30", "Forest green")',
            "Choosing a colour in the combobox changes which option is selected; the rest "
            "of the page stays as it was.",
            web,
        ),
        "android": (
            '{"action": "type", "text": "+44 7700 900123"}',
            "The login field already has focus, so the typed number replaces its hint text.",
            android,
        ),
        "search": (
            json.dumps(
                {
                    "name": "web_search",
                    "arguments": {"query": ["best time to see the northern lights in Tromsø"]},
                },
                indent=2,
                ensure_ascii=False,
            ),
            "A travel question: tourism sites, a seasonal guide and a space-weather "
            "explainer would rank first.",
            SEARCH_RESULTS,
        ),
        "swe": (
            json.dumps(
                {
                    "name": "execute_bash",
                    "arguments": {"command": "python -m pytest tests/test_slug.py -q"},
                },
                indent=2,
            ),
            "Running the slug tests: everything passes except the unicode case described "
            "in issue #214.",
            PYTEST,
        ),
        "os": (
            "pyautogui.click(248, 344)\npyautogui.write('=SUM(B2:B6)\\n')",
            "Clicking B8 keeps it selected; typing the formula and Enter puts the total "
            "of B2:B6, 246435, in the cell.",
            desktop,
        ),
    }


LS_SHORT = "user@devbox:~/project$ ls\nLICENSE  README.md  pyproject.toml  src  tests\nuser@devbox:~/project$ "
RECORDED = LS_LA.replace("Jun  9 10:02", "Jun  9 11:47").replace(" 886 ", " 954 ")


def benchmark_file(folder: Path) -> Path:
    """A one-turn terminal trajectory in AgentWorldBench's layout, for the replay picture."""
    domain = DOMAINS["terminal"]
    scenario = load_scenarios("terminal")[0][0]
    session, _ = new_session(domain, scenario)
    action = domain.parse_action("ls -la", scenario)
    prompt = domain.render_turn(1, action, scenario.state)
    line = {
        "task": "agentworld/terminal",
        "id": "demo-terminal-1",
        "prompt": [prompt],
        "response": [RECORDED],
        "current_prompt": prompt,
        "system_str": session.system_prompt,
        "turn_idx": 1,
        "total_turns": 1,
    }
    path = folder / "terminal_test.jsonl"
    path.write_text(json.dumps(line) + "\n", encoding="utf-8")
    return path


async def use_model(app: AgentWorldApp, path: Path) -> None:
    """Swap the app's model for ``path`` and wait until it is loaded."""
    loaded = asyncio.Event()
    errors: list[str] = []

    def done(error: str | None) -> None:
        errors.extend([error] if error else [])
        loaded.set()

    app.loading.switch(LlamaEngine(path, n_ctx=N_CTX, threads=2), done)
    await asyncio.wait_for(loaded.wait(), 300)
    if errors:
        raise RuntimeError(errors[0])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=HERE)
    parser.add_argument("--size", default="132x40")
    args = parser.parse_args()
    width, height = (int(n) for n in args.size.split("x"))
    args.out.mkdir(parents=True, exist_ok=True)

    with tempfile.TemporaryDirectory(prefix="agentworld-shots-") as scratch:
        work = Path(scratch)
        import os

        os.environ["AGENTWORLD_CONFIG_DIR"] = str(work / "config")
        os.environ["AGENTWORLD_DATA_DIR"] = str(work / "data")
        os.environ["HF_HUB_OFFLINE"] = "1"
        table = shots()
        models = {
            domain: write_scripted_model(
                work / f"scripted-{domain}.gguf",
                turn_script(reasoning, observation),
                n_ctx_train=N_CTX,
            )
            for domain, (_, reasoning, observation) in table.items()
        }
        short = write_scripted_model(
            work / "scripted-terminal-ls.gguf",
            turn_script("A plain listing this time.", LS_SHORT),
            n_ctx_train=N_CTX,
        )
        bench = benchmark_file(work)
        script = DemoScript(
            tuple(
                DemoTab(domain, load_scenarios(domain)[0][0].name, (DemoAction(table[domain][0]),))
                for domain in DOMAINS
            ),
            chars_per_second=0,
            pause=0.3,
            start_pause=0,
        )

        async def before_tab(app: AgentWorldApp, tab: DemoTab) -> None:
            if app.engine is None or getattr(app.engine, "model_path", None) != models[tab.domain]:
                await use_model(app, models[tab.domain])

        player = DemoPlayer(
            script,
            screenshots=args.out,
            quit_at_end=False,
            hide_notifications=True,
            before_tab=before_tab,
        )
        settings = Settings()
        settings.model.threads, settings.model.n_ctx = 2, N_CTX
        settings.generation.max_tokens = 4096
        first = LlamaEngine(models["terminal"], n_ctx=N_CTX, threads=2)
        app = AgentWorldApp(settings, engine=first, offer_resume=False)

        async def autopilot(pilot: Pilot[object]) -> None:
            await player.play(pilot)
            if player.outcome.error:
                return
            try:
                # History: an edited first action makes a second branch; F7 shows both.
                app.tabs().active = "tab-terminal"
                await use_model(app, short)
                await pilot.pause()
                await pilot.press("f7")
                await pilot.pause()
                await pilot.press("e")
                await pilot.pause()
                editor = app.screen.query_one(TextArea)
                editor.text = '[{"keystrokes": "ls\\n", "duration": 1.0}]'
                await pilot.press("ctrl+s")
                pane = app.active_pane
                assert pane is not None
                while pane.busy or pane.session.turns[-1].status == "pending":
                    await pilot.pause(0.05)
                await pilot.press("f7")
                await pilot.pause(0.3)
                await player.save(pilot, app, "history")
                await pilot.press("escape")
                # Replay: the recorded observation beside the model's, with their diff.
                await use_model(app, models["terminal"])
                await pilot.press("f8")
                await pilot.pause()
                app.screen.query_one("#path", Input).value = str(bench)
                await pilot.press("enter")
                for _ in range(200):
                    await pilot.pause(0.05)
                    if app.screen.query_one(DataTable).row_count:
                        break
                await pilot.press("enter")
                await pilot.pause()
                await pilot.press("n")
                replay = app.screen
                while getattr(replay, "job", None) is not None or not getattr(replay, "latest", {}):
                    await pilot.pause(0.05)
                await pilot.pause(0.3)
                await player.save(pilot, app, "replay")
            except Exception as exc:
                player.outcome.error = f"{type(exc).__name__}: {exc}"
            app.exit(0)

        app.run(headless=True, size=(width, height), auto_pilot=autopilot)
    if player.outcome.error:
        print(f"make.py: {player.outcome.error}", file=sys.stderr)
        return 1
    for path in player.outcome.screenshots:
        final = path.with_name(re.sub(r"^\d+-|-1(?=\.svg$)", "", path.name))
        path.replace(final)
        print(final)
    for warning in player.outcome.warnings:
        print(f"make.py: {warning}", file=sys.stderr)
    return 1 if player.outcome.warnings else 0


if __name__ == "__main__":
    raise SystemExit(main())
