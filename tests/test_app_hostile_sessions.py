"""The real app on a sessions folder full of hostile files (issue 26, items 1 and 9): it
starts, says what is wrong with the file it was to resume, and the session browser lists
every file with its problem, drawn as plain text, never as markup or terminal codes."""

from __future__ import annotations

import json
from pathlib import Path

from test_app import make_app, wait_for
from test_sessions_hostile import HUGE, SHAPES, good_file, nested, write
from textual.widgets import DataTable, Static

from agentworld_tui.config import sessions_dir
from agentworld_tui.world.library import LAST_USED

HOSTILE_NAME = "Shared \x1b[2J\x1b]52;c;ZXZpbA==\x07 [b]session[/b]\u202e\nline two"
SHOWN_NAME = "Shared [b]session[/b] line two"


def hostile_folder() -> Path:
    folder = sessions_dir()
    folder.mkdir(parents=True, exist_ok=True)
    text = json.dumps(good_file())
    (folder / "digits.json").write_text(
        text.replace('"generated_tokens": 12', f'"generated_tokens": {HUGE}', 1)
    )
    (folder / "deep.json").write_text(text.replace('"ui": {}', f'"ui": {nested(100_000)}', 1))
    for name, mutate, _ in SHAPES[:6]:
        data = good_file()
        mutate(data)
        write(folder, name, data)
    data = good_file()
    data["name"] = HOSTILE_NAME
    write(folder, "good", data)
    (folder / LAST_USED).write_text("deep.json")  # the app is to resume the deep one
    return folder


def no_terminal_codes(text: str) -> bool:
    return not any(ord(c) < 32 or 0x7F <= ord(c) < 0xA0 or c == "\u202e" for c in text)


async def test_the_app_starts_on_a_hostile_folder_and_lists_every_file() -> None:
    folder = hostile_folder()
    before = {path.name: path.read_bytes() for path in folder.iterdir()}
    app = make_app(None)
    async with app.run_test(size=(140, 40)) as pilot:
        # The file it was to resume is refused with a message saying why; no crash.
        await wait_for(
            pilot,
            lambda: any("deep.json" in str(n.message) for n in app._notifications),
        )
        said = next(str(n.message) for n in app._notifications if "deep.json" in str(n.message))
        assert "nested" in said and no_terminal_codes(said)

        await pilot.press("ctrl+o")
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "SessionBrowser")
        table = app.screen.query_one(DataTable)
        rows = [[getattr(cell, "plain", str(cell)) for cell in table.get_row_at(i)]
                for i in range(table.row_count)]  # fmt: skip
        assert len(rows) == 2 + 6 + 1
        names = [row[0] for row in rows]
        problems = [row[-1] for row in rows]
        assert SHOWN_NAME in names  # the brackets shown as written, not read as markup
        assert sum(p == "ok" for p in problems) == 1
        assert all(no_terminal_codes(cell) for row in rows for cell in row)
        # Enter on a broken file shows its problem under the list, and opens nothing.
        broken = next(i for i, p in enumerate(problems) if p != "ok")
        table.move_cursor(row=broken)
        await pilot.press("enter")
        shown = str(app.screen.query_one("#problem", Static).render())
        assert shown == problems[broken] and app.screen.__class__.__name__ == "SessionBrowser"
    # Nothing in the folder was written to.
    assert {p.name: p.read_bytes() for p in folder.iterdir() if p.name in before} == before
