"""Session files: crash safety, validation on load, and the library of saved sessions."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from agentworld_tui.config import sessions_dir
from agentworld_tui.domains import get_domain
from agentworld_tui.world.domain import Scenario
from agentworld_tui.world.library import LAST_USED, SessionLibrary
from agentworld_tui.world.session import Session, new_session
from agentworld_tui.world.workspace import (
    SCHEMA_VERSION,
    STOPPED_NOTE,
    Workspace,
    WorkspaceError,
    load_workspace,
    open_or_new,
)

TERMINAL = get_domain("terminal")
SCENARIO = Scenario("box", "A box", "An Ubuntu machine.", state="user@box:~$ ")
REPO = Path(__file__).resolve().parent.parent


def workspace_with(turns: int, observation_size: int = 20) -> Workspace:
    session, _ = new_session(TERMINAL, SCENARIO)
    for n in range(1, turns + 1):
        turn = session.begin_turn(TERMINAL.parse_action(f"echo {n}", SCENARIO))
        screen = f"{n}\n" + "x" * observation_size
        session.finish_turn(turn, observation=screen, reasoning="", status="complete")
    return Workspace([session], name="test")


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


# -- crash safety ------------------------------------------------------------------------
# The writer saves a growing session again and again. In "pause" mode it stops inside its
# third save at one step of the atomic write and waits to be killed; in "loop" mode it
# reports each finished save and never stops.
WRITER = textwrap.dedent(
    """
    import os, sys
    from pathlib import Path
    from agentworld_tui.domains import get_domain
    from agentworld_tui.world.domain import Scenario
    from agentworld_tui.world.session import new_session
    from agentworld_tui.world.workspace import Workspace

    path, mode = Path(sys.argv[1]), sys.argv[2]
    domain = get_domain("terminal")
    scenario = Scenario("box", "A box", state="$ ")
    session, _ = new_session(domain, scenario)
    workspace = Workspace([session], name="crash test")
    saves = 0

    def pause_at(step):
        if mode == step and saves == 3:
            print("paused", flush=True)
            sys.stdin.readline()  # killed while waiting here

    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        pause_at("before-fsync")
        real_fsync(fd)

    def replace(src, dst):
        pause_at("before-rename")
        real_replace(src, dst)
        pause_at("after-rename")

    os.fsync, os.replace = fsync, replace
    while True:
        turn = session.begin_turn(domain.parse_action("echo %d" % (saves + 1), scenario))
        screen = "line\\n" * 2000 + str(saves + 1)
        session.finish_turn(turn, observation=screen, reasoning="", status="complete")
        saves += 1
        workspace.save(path)
        print("saved", saves, flush=True)
    """
)


def start_writer(tmp_path: Path, target: Path, mode: str) -> subprocess.Popen[str]:
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.Popen(
        [sys.executable, str(script), str(target), mode],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )


@pytest.mark.parametrize(
    ("step", "turns_after"),
    [("before-fsync", 2), ("before-rename", 2), ("after-rename", 3)],
)
def test_kill_9_inside_a_save_leaves_a_whole_version(
    tmp_path: Path, step: str, turns_after: int
) -> None:
    folder = tmp_path / "sessions"
    target = folder / "crash.json"
    proc = start_writer(tmp_path, target, step)
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline().strip() for _ in range(3)]
        assert lines == ["saved 1", "saved 2", "paused"]
        proc.kill()  # SIGKILL: no cleanup runs
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == -9
    workspace = load_workspace(target)
    assert len(workspace.tabs[0].turns) == turns_after
    assert workspace.tabs[0].turns[-1].observation.endswith(str(turns_after))
    # a temporary file may be left by the kill; the library never lists it
    assert [s.path.name for s in SessionLibrary(folder).entries()] == ["crash.json"]
    left = leftovers(folder)
    assert len(left) == (0 if step == "after-rename" else 1)
    # An hour on, opening the library removes what the killed save left, and only that:
    # a younger temporary file may be another app's save in progress.
    an_hour_ago = time.time() - 3601
    for name in left:
        os.utime(folder / name, (an_hour_ago, an_hour_ago))
    (folder / ".other.json.x1y2.tmp").write_text("another app's save in progress")
    (folder / "notes.tmp").write_text("not ours")
    os.utime(folder / "notes.tmp", (an_hour_ago, an_hour_ago))
    SessionLibrary(folder)
    assert leftovers(folder) == [".other.json.x1y2.tmp", "notes.tmp"]
    assert len(load_workspace(target).tabs[0].turns) == turns_after


def test_kill_9_at_arbitrary_moments_never_loses_a_finished_save(tmp_path: Path) -> None:
    target = tmp_path / "loop.json"
    for wait_for in (1, 4, 9):
        target.unlink(missing_ok=True)
        proc = start_writer(tmp_path, target, "loop")
        try:
            assert proc.stdout is not None
            for _ in range(wait_for):
                line = proc.stdout.readline()
            assert line.strip() == f"saved {wait_for}"
            proc.kill()
        finally:
            proc.kill()
            proc.wait()
        turns = load_workspace(target).tabs[0].turns
        assert len(turns) >= wait_for
        assert [t.number for t in turns] == list(range(1, len(turns) + 1))


def test_failed_fsync_keeps_the_previous_file_and_no_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.json"
    workspace_with(2).save(path)
    before = path.read_bytes()

    def broken_fsync(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    bigger = workspace_with(3)
    with pytest.raises(WorkspaceError, match=r"cannot save .*s\.json: Input/output error"):
        bigger.save(path)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert len(load_workspace(path).tabs[0].turns) == 2
    assert leftovers(tmp_path) == []
    assert bigger.path is None  # never pretends it was saved


def test_failed_rename_keeps_the_previous_file_and_no_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.json"
    workspace_with(1).save(path)
    before = path.read_bytes()

    def broken_replace(src: str, dst: str) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(WorkspaceError, match="Permission denied"):
        workspace_with(4).save(path)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert leftovers(tmp_path) == []


@pytest.fixture
def tiny_disk(tmp_path: Path):
    """A 64 KiB tmpfs: a real full disk. Needs root (mount); skipped without it."""
    mount = tmp_path / "tiny"
    mount.mkdir()
    if shutil.which("mount") is None or os.geteuid() != 0:
        pytest.skip("mounting a tiny tmpfs needs root")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=False)


def test_full_disk_keeps_the_previous_file(tiny_disk: Path) -> None:
    path = tiny_disk / "s.json"
    workspace_with(2).save(path)
    before = path.read_bytes()
    too_big = workspace_with(3, observation_size=80_000)
    with pytest.raises(WorkspaceError, match="No space left on device"):
        too_big.save(path)
    assert path.read_bytes() == before
    assert len(load_workspace(path).tabs[0].turns) == 2
    assert leftovers(tiny_disk) == []
    # once there is room again, saving works
    workspace_with(3).save(path)
    assert len(load_workspace(path).tabs[0].turns) == 3


# -- validation on load ------------------------------------------------------------------
def saved(tmp_path: Path, mutate) -> Path:  # type: ignore[no-untyped-def]
    data = workspace_with(2).to_dict()
    mutate(data)
    path = tmp_path / f"{uuid.uuid4().hex[:6]}.json"
    path.write_text(json.dumps(data))
    return path


def refused(path: Path, match: str) -> str:
    before = path.read_bytes()
    stamp = path.stat().st_mtime_ns
    with pytest.raises(WorkspaceError, match=match) as info:
        load_workspace(path)
    assert path.read_bytes() == before and path.stat().st_mtime_ns == stamp
    message = str(info.value)
    assert "\n" not in message and str(path) in message
    return message


def test_damaged_files_are_refused_and_left_untouched(tmp_path: Path) -> None:
    good = tmp_path / "good.json"
    workspace_with(2).save(good)
    text = good.read_text()

    cut = tmp_path / "cut.json"
    cut.write_text(text[: len(text) // 2])
    refused(cut, r"damaged \(invalid JSON at line \d+")

    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    refused(binary, r"damaged \(not UTF-8")

    other = tmp_path / "other.json"
    other.write_text('{"hello": "world"}')
    refused(other, "not an agentworld session file")

    with pytest.raises(WorkspaceError, match="no such file"):
        load_workspace(tmp_path / "missing.json")


@pytest.mark.parametrize(
    ("mutate", "match"),
    [
        (lambda d: d.update(tabs={"a": 1}), r"tabs: expected a list, got an object"),
        (
            lambda d: d["tabs"][0]["turns"][1].update(number="2"),
            r"tabs\[0\]\.turns\[1\]\.number: expected a whole number, got text",
        ),
        (
            lambda d: d["tabs"][0]["turns"][0].update(observation=42),
            r"tabs\[0\]\.turns\[0\]\.observation: expected text, got int",
        ),
        (
            lambda d: d["tabs"][0]["turns"][0].update(status="great"),
            r"status: 'great' is not one of",
        ),
        (
            lambda d: d["tabs"][0]["turns"][1].update(number=5),
            r"turns\[1\]\.number is 5, expected 2",
        ),
        (lambda d: d["tabs"][0].pop("system_prompt"), r"system_prompt: expected text, got nothing"),
        (
            lambda d: d["tabs"][0]["turns"][0]["action"].pop("payload"),
            r"action\.payload: expected a value",
        ),
        (lambda d: d["tabs"][0].update(domain="chess"), r"domain 'chess', which this version"),
        (lambda d: d.update(schema="1"), r"schema must be a positive whole number"),
        (
            lambda d: d["tabs"][0]["branches"].append({"id": 1, "turns": []}),
            r"branch id used twice",
        ),
        (
            lambda d: d["tabs"][0]["branches"].append({"id": 2, "turns": [7]}),
            r"branches\[1\]\.turns\[0\]: expected an object, got int",
        ),
    ],
)
def test_wrong_types_are_refused_with_where_and_why(tmp_path: Path, mutate, match: str) -> None:  # type: ignore[no-untyped-def]
    refused(saved(tmp_path, mutate), match)


def test_newer_schema_is_refused_with_upgrade_advice(tmp_path: Path) -> None:
    def newer(data: dict) -> None:  # type: ignore[type-arg]
        data["schema"] = SCHEMA_VERSION + 1
        data["app_version"] = "9.0.0"
        data["tabs"][0]["new_thing"] = {"unknown": True}

    message = refused(saved(tmp_path, newer), "newer|format")
    assert f"format {SCHEMA_VERSION + 1}" in message
    assert "agentworld 9.0.0" in message and "upgrade" in message


def test_round_trip_and_a_pending_turn_becomes_interrupted(tmp_path: Path) -> None:
    workspace = workspace_with(2)
    session2, _ = new_session(TERMINAL, Scenario("b", "B"))
    workspace.tabs.append(session2)
    workspace.active_tab = 1
    workspace.ui = {"focus": "terminal", "wrap": True}
    running = session2.begin_turn(TERMINAL.parse_action("sleep 100", SCENARIO))
    assert running.status == "pending"
    path = tmp_path / "w.json"
    workspace.save(path)

    loaded = load_workspace(path)
    assert loaded.path == path and loaded.name == "test" and loaded.active_tab == 1
    assert loaded.ui == {"focus": "terminal", "wrap": True}
    assert loaded.tabs[0].to_dict() == workspace.tabs[0].to_dict()
    stopped = loaded.tabs[1].turns[0]
    assert (stopped.status, stopped.note) == ("interrupted", STOPPED_NOTE)
    assert loaded.tab_for("terminal") is loaded.tabs[0]
    assert loaded.tab_for("web") is None


def test_open_or_new(tmp_path: Path) -> None:
    fresh = open_or_new(tmp_path / "new.json")
    assert fresh.tabs == [] and fresh.path == tmp_path / "new.json"
    assert not (tmp_path / "new.json").exists()  # nothing is written until a save
    with pytest.raises(WorkspaceError, match="no file to save to"):
        Workspace().save()


# -- the library of saved sessions ---------------------------------------------------------
def test_library_lists_renames_deletes_and_resumes(tmp_path: Path) -> None:
    library = SessionLibrary(sessions_dir())  # the data dir from the test's environment
    assert library.entries() == [] and library.last_used() is None

    first = library.new("Morning work")
    first.tabs.append(workspace_with(2).tabs[0])
    library.save(first)
    second = library.new("Evening")
    library.save(second)
    assert first.path is not None and first.path.parent == library.folder
    assert first.path.name.startswith("morning-work-")

    entries = library.entries()
    assert [e.name for e in entries] == ["Evening", "Morning work"]
    assert (entries[1].tabs, entries[1].turns, entries[1].domains) == (1, 2, ("terminal",))
    assert library.last_used() == second.path

    opened = library.open(first.path)
    assert opened.tabs[0].to_dict() == first.tabs[0].to_dict()
    assert library.last_used() == first.path

    renamed = library.rename(first.path, "  Morning   debugging ")
    assert renamed.name == "Morning debugging"
    assert load_workspace(first.path).name == "Morning debugging"
    with pytest.raises(WorkspaceError, match="needs a name"):
        library.rename(first.path, "   ")

    library.delete(first.path)
    assert not first.path.exists()
    assert [e.name for e in library.entries()] == ["Evening"]
    assert library.last_used() == second.path  # the pointer went with the file
    with pytest.raises(WorkspaceError, match="is not in"):
        library.delete(tmp_path / "elsewhere.json")


def test_library_lists_damaged_files_without_opening_them(tmp_path: Path) -> None:
    library = SessionLibrary(tmp_path / "lib")
    good = library.new("Good")
    library.save(good)
    bad = library.folder / "bad.json"
    bad.write_text("{ not json")
    (library.folder / ".good.json.abc123.tmp").write_text("half a file")
    (library.folder / LAST_USED).write_text("bad.json")

    entries = {e.path.name: e for e in library.entries()}
    assert set(entries) == {good.path.name, "bad.json"}  # the temp file is not a session
    assert not entries["bad.json"].openable and "damaged" in entries["bad.json"].problem
    assert entries[good.path.name].openable
    assert bad.read_text() == "{ not json"
    # the pointer names the damaged file: resuming it gives its message, not a crash
    assert library.last_used() == bad
    with pytest.raises(WorkspaceError, match="damaged"):
        library.open(bad)
    (library.folder / LAST_USED).unlink()
    assert library.last_used() == good.path  # no pointer: the newest openable one


def test_library_only_remembers_its_own_files(tmp_path: Path) -> None:
    library = SessionLibrary(tmp_path / "lib")
    outside = workspace_with(1)
    outside.save(tmp_path / "shared.json")
    library.mark_used(tmp_path / "shared.json")
    assert library.last_used() is None


def test_session_keeps_the_domain_lookup_injectable(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    workspace_with(1).save(path)
    seen: list[str] = []

    def lookup(name: str):  # type: ignore[no-untyped-def]
        seen.append(name)
        return TERMINAL

    loaded = load_workspace(path, lookup)
    assert seen == ["terminal"] and isinstance(loaded.tabs[0], Session)


# -- symbolic links ------------------------------------------------------------------------
def test_saving_through_a_link_writes_the_file_it_points_to(tmp_path: Path) -> None:
    shared = tmp_path / "dropbox" / "shared.json"
    workspace_with(1).save(shared)
    shared.chmod(0o644)
    link = tmp_path / "s.json"
    link.symlink_to(shared)
    with open_or_new(link) as workspace:
        assert workspace.path == link
        workspace.tabs.append(workspace_with(2).tabs[0])
        workspace.save()
        assert link.is_symlink() and os.readlink(link) == str(shared)
        assert len(load_workspace(shared).tabs) == 2
        assert shared.stat().st_mode & 0o777 == 0o644  # its permissions kept
        # the link and the file it points to share one lock
        with pytest.raises(WorkspaceError, match="already open"):
            load_workspace(shared).save()
    assert leftovers(tmp_path) == [] and leftovers(shared.parent) == []


def test_a_dangling_link_is_saved_where_it_points(tmp_path: Path) -> None:
    link = tmp_path / "s.json"
    link.symlink_to(tmp_path / "later.json")
    with open_or_new(link) as workspace:
        workspace.tabs.append(workspace_with(1).tabs[0])
        workspace.save()
    assert link.is_symlink() and len(load_workspace(tmp_path / "later.json").tabs) == 1


def test_renaming_a_linked_session_keeps_the_link(tmp_path: Path) -> None:
    library = SessionLibrary(tmp_path / "lib")
    shared = tmp_path / "shared.json"
    workspace_with(1).save(shared)
    library.folder.mkdir(parents=True, exist_ok=True)
    link = library.folder / "shared.json"
    link.symlink_to(shared)
    renamed = library.rename(link, "Team session")
    assert renamed.name == "Team session" and renamed.path == link
    assert link.is_symlink() and load_workspace(shared).name == "Team session"


def test_write_atomic_replaces_a_link_itself_unless_told_to_follow(tmp_path: Path) -> None:
    from agentworld_tui.world.store import write_atomic

    outside = tmp_path / "outside.txt"
    outside.write_text("keep me")
    link = tmp_path / "cache" / "refs"
    link.parent.mkdir()
    link.symlink_to(outside)
    write_atomic(link, b"new")  # a cache never writes outside itself through a link
    assert outside.read_text() == "keep me" and not link.is_symlink()
    assert link.read_bytes() == b"new" and link.stat().st_mode & 0o777 == 0o600
    link.unlink()
    link.symlink_to(outside)
    write_atomic(link, b"through", follow_links=True)
    assert link.is_symlink() and outside.read_text() == "through"


# -- several tabs of one domain ------------------------------------------------------------
def two_terminal_tabs() -> Workspace:
    first, second = workspace_with(2).tabs[0], workspace_with(3).tabs[0]
    return Workspace([first, second], name="two terminals", active_tab=1)


def test_every_tab_of_one_domain_is_kept_by_a_save(tmp_path: Path) -> None:
    path = tmp_path / "two.json"
    two_terminal_tabs().save(path)
    with open_or_new(path) as loaded:
        assert [len(s.turns) for s in loaded.tabs_for("terminal")] == [2, 3]
        shown = loaded.tabs[1]  # the app shows one terminal tab: the other stays in the file
        loaded.add_shown([shown], active=shown)
        loaded.save()
    again = load_workspace(path)
    assert [len(s.turns) for s in again.tabs] == [2, 3] and again.active_tab == 1


def test_replacing_one_tab_keeps_the_other_of_the_same_domain(tmp_path: Path) -> None:
    path = tmp_path / "two.json"
    two_terminal_tabs().save(path)
    with open_or_new(path) as loaded:
        kept, old = loaded.tabs
        fresh = workspace_with(1).tabs[0]
        loaded.replace_tab(old, fresh)
        assert loaded.tabs[0] is kept and loaded.tabs[1] is fresh
        loaded.replace_tab(workspace_with(1).tabs[0], fresh)  # unknown old, known new: no copy
        assert len(loaded.tabs) == 2
        extra = workspace_with(4).tabs[0]
        loaded.add_shown([kept, fresh, extra], active=extra)
        assert loaded.tabs[2] is extra and loaded.active_tab == 2
        loaded.remove_tab(extra)
        assert loaded.active_tab == 1 and len(loaded.tabs) == 2
        loaded.add_shown([new_session(TERMINAL, SCENARIO)[0]])  # no turns: not a tab
        assert len(loaded.tabs) == 2
        loaded.save()
    assert [len(s.turns) for s in load_workspace(path).tabs] == [2, 1]


def test_predict_keeps_every_tab_of_the_file(tmp_path: Path) -> None:
    from agentworld_tui.cli.session_file import open_session_tab, turn_saver

    path = tmp_path / "two.json"
    two_terminal_tabs().save(path)
    workspace, session, _ = open_session_tab(path, TERMINAL, SCENARIO, state_given=False)
    assert session is workspace.tabs[0]
    turn = session.begin_turn(TERMINAL.parse_action("ls", SCENARIO))
    session.finish_turn(turn, observation="a b", reasoning="", status="complete")
    assert turn_saver(workspace)(session) is None
    assert [len(s.turns) for s in load_workspace(path).tabs] == [3, 3]


# -- renaming the open session, and keeping replaced ones -----------------------------------
def test_renaming_the_open_session_survives_its_next_save(tmp_path: Path) -> None:
    library = SessionLibrary(tmp_path / "lib")
    open_one = library.new("Before")
    open_one.tabs.append(workspace_with(1).tabs[0])
    library.save(open_one)  # the app's open session, holding its file
    assert open_one.path is not None
    renamed = library.rename(open_one.path, "After")  # from the session browser
    assert renamed is open_one and renamed.name == "After" and renamed.path == open_one.path
    open_one.tabs[0].begin_turn(TERMINAL.parse_action("ls", SCENARIO))
    library.save(open_one)  # the next turn's save
    assert load_workspace(open_one.path).name == "After"
    assert [e.name for e in library.entries()] == ["After"]


def test_renaming_a_session_another_program_writes_is_refused(tmp_path: Path) -> None:
    from agentworld_tui.world.workspace import SessionInUse

    library = SessionLibrary(tmp_path / "lib")
    path = library.folder / "other.json"
    workspace_with(1).save(path)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from pathlib import Path; import agentworld_tui.domains;"
            "from agentworld_tui.world.workspace import open_or_new;"
            "w = open_or_new(Path(sys.argv[1])); print('holding', flush=True); sys.stdin.read()",
            str(path),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
        with pytest.raises(SessionInUse, match=f"process {holder.pid}"):
            library.rename(path, "Mine now")
        with pytest.raises(SessionInUse):
            library.delete(path)
        assert load_workspace(path).name == "test" and path.exists()
    finally:
        holder.kill()
        holder.wait()
        assert holder.stdin is not None and holder.stdout is not None
        holder.stdin.close()
        holder.stdout.close()
    library.delete(path)
    assert not path.exists()


def test_deleting_the_open_session_lets_it_be_saved_again(tmp_path: Path) -> None:
    library = SessionLibrary(tmp_path / "lib")
    open_one = library.new("Open")
    open_one.tabs.append(workspace_with(1).tabs[0])
    library.save(open_one)
    assert open_one.path is not None
    library.delete(open_one.path)
    assert not open_one.path.exists()
    library.save(open_one)  # what the user still sees is saved with the next turn
    assert len(load_workspace(open_one.path).tabs) == 1


def test_archive_keeps_a_replaced_tab_or_workspace_as_a_saved_session(tmp_path: Path) -> None:
    library = SessionLibrary(tmp_path / "lib")
    live = library.new("Work")
    live.tabs.extend(two_terminal_tabs().tabs)
    library.save(live)
    when = time.mktime((2026, 12, 3, 10, 15, 0, 0, 0, -1))
    old = live.tabs[1]
    path = library.archive(old, "Work", when=when)
    assert path.parent == library.folder and path != live.path
    kept = load_workspace(path)
    assert kept.name == "Work (replaced 2026-12-03 10:15)"
    assert [len(s.turns) for s in kept.tabs] == [3]
    assert kept.tabs[0].to_dict() == old.to_dict()
    live.replace_tab(old, workspace_with(1).tabs[0])
    library.save(live)  # the replacement does not touch the archived copy
    assert [len(s.turns) for s in load_workspace(path).tabs] == [3]

    whole = library.archive(live, reason="before import", when=when)
    assert load_workspace(whole).name == "Work (before import 2026-12-03 10:15)"
    assert len(load_workspace(whole).tabs) == 2
    default = load_workspace(library.archive(old, when=when)).name
    assert default == "Terminal: A box (replaced 2026-12-03 10:15)"
    names = {e.name for e in library.entries()}
    assert "Work (replaced 2026-12-03 10:15)" in names and "Work" in names
    assert library.last_used() == live.path  # archiving does not change what is resumed
    assert not (library.folder / f".{path.name}.owner").exists()  # the copy let go of it
