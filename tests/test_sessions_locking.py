"""Two writers on one session file: the second is told, and nobody's turns are overwritten.

The other writer is a real second process (the app, or ``predict --session``) holding the
real operating-system lock; it is killed with SIGKILL to show a dead holder frees the file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from agentworld_tui.cli import main
from agentworld_tui.domains import get_domain
from agentworld_tui.world.domain import Scenario
from agentworld_tui.world.session import Session, new_session
from agentworld_tui.world.workspace import (
    SessionChanged,
    SessionInUse,
    Workspace,
    load_workspace,
    open_or_new,
)

TERMINAL = get_domain("terminal")
SCENARIO = Scenario("box", "A box", state="$ ")
REPO = Path(__file__).resolve().parent.parent

# The other program: opens the file for writing, adds a turn and saves it whenever asked,
# and stays open until killed.
HOLDER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from agentworld_tui.domains import get_domain
    from agentworld_tui.world.domain import Scenario
    from agentworld_tui.world.session import new_session
    from agentworld_tui.world.workspace import open_or_new

    domain = get_domain("terminal")
    scenario = Scenario("box", "A box", state="$ ")
    workspace = open_or_new(Path(sys.argv[1]))
    if not workspace.tabs:
        workspace.tabs.append(new_session(domain, scenario)[0])
    session = workspace.tabs[0]
    print("holding", flush=True)
    for line in sys.stdin:
        turn = session.begin_turn(domain.parse_action(line.strip(), scenario))
        session.finish_turn(turn, observation=line.strip(), reasoning="", status="complete")
        workspace.save()
        print("saved", len(session.turns), flush=True)
    """
)


class Holder:
    """A second agentworld process with the file open."""

    def __init__(self, tmp_path: Path, target: Path) -> None:
        script = tmp_path / "holder.py"
        script.write_text(HOLDER)
        env = dict(os.environ, PYTHONPATH=str(REPO))
        self.proc = subprocess.Popen(
            [sys.executable, str(script), str(target)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert self.readline() == "holding"

    def readline(self) -> str:
        assert self.proc.stdout is not None
        return self.proc.stdout.readline().strip()

    def add_turn(self, action: str) -> str:
        assert self.proc.stdin is not None
        self.proc.stdin.write(action + "\n")
        self.proc.stdin.flush()
        return self.readline()

    def kill(self) -> None:
        self.proc.kill()  # SIGKILL: nothing of the holder's own runs
        self.proc.wait()
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


@pytest.fixture
def holder_of(tmp_path: Path):  # type: ignore[no-untyped-def]
    started: list[Holder] = []

    def start(target: Path) -> Holder:
        holder = Holder(tmp_path, target)
        started.append(holder)
        return holder

    yield start
    for holder in started:
        holder.kill()


def saved_file(path: Path, turns: int) -> Path:
    session, _ = new_session(TERMINAL, SCENARIO)
    add_turns(session, turns)
    with Workspace([session], name="shared") as workspace:
        workspace.save(path)
    return path


def add_turns(session: Session, count: int) -> None:
    for _ in range(count):
        n = len(session.turns) + 1
        turn = session.begin_turn(TERMINAL.parse_action(f"echo {n}", SCENARIO))
        session.finish_turn(turn, observation=str(n), reasoning="", status="complete")


def test_a_second_program_is_refused_and_told_who_holds_the_file(tmp_path: Path, holder_of) -> None:  # type: ignore[no-untyped-def]
    path = saved_file(tmp_path / "s.json", 1)
    holder = holder_of(path)
    with pytest.raises(SessionInUse) as info:
        open_or_new(path)
    message = str(info.value)
    assert str(path) in message and f"process {holder.proc.pid}" in message
    assert "holder.py" in message and "\n" not in message
    assert info.value.holder is not None and info.value.holder.pid == holder.proc.pid


def test_the_last_writer_no_longer_overwrites_the_other_s_turns(tmp_path: Path, holder_of) -> None:  # type: ignore[no-untyped-def]
    path = saved_file(tmp_path / "s.json", 1)
    view = load_workspace(path)  # a read-only view, taken before the other program opened it
    holder = holder_of(path)
    assert holder.add_turn("echo from-the-holder") == "saved 2"
    add_turns(view.tabs[0], 2)  # turns of our own, in memory
    with pytest.raises(SessionInUse, match="only one program at a time"):
        view.save()
    assert [t.observation for t in load_workspace(path).tabs[0].turns][-1] == "echo from-the-holder"

    holder.kill()  # a dead holder frees the file ...
    with pytest.raises(SessionChanged, match="changed by another program since it was opened"):
        view.save()  # ... but what it wrote is still not overwritten
    assert len(load_workspace(path).tabs[0].turns) == 2
    assert not view.holds_lock  # a refused save does not keep the lock

    reopened = open_or_new(path)  # nothing blocks for ever: the kill released the lock
    assert reopened.holds_lock and len(reopened.tabs[0].turns) == 2
    add_turns(reopened.tabs[0], 1)
    reopened.save()
    reopened.close()
    assert len(load_workspace(path).tabs[0].turns) == 3


def test_closing_lets_the_other_program_in_and_a_saved_view_writes_when_free(
    tmp_path: Path, holder_of
) -> None:  # type: ignore[no-untyped-def]
    path = saved_file(tmp_path / "s.json", 1)
    mine = open_or_new(path)
    assert mine.holds_lock
    add_turns(mine.tabs[0], 1)
    mine.save()
    mine.close()
    holder = holder_of(path)  # would fail to start ("holding") if the lock were still held
    assert holder.add_turn("echo theirs") == "saved 3"
    holder.kill()
    view = load_workspace(path)
    add_turns(view.tabs[0], 1)
    view.save()  # unchanged since read and free: saved, and now this view holds the file
    assert view.holds_lock
    view.close()
    assert len(load_workspace(path).tabs[0].turns) == 4


def test_predict_refuses_a_file_another_program_holds(
    tmp_path: Path, holder_of, capsys: pytest.CaptureFixture[str]
) -> None:  # type: ignore[no-untyped-def]
    path = saved_file(tmp_path / "s.json", 1)
    holder = holder_of(path)
    before = path.read_bytes()
    # no model is configured: the lock is checked before anything is loaded
    assert main(["predict", "--session", str(path), "ls"]) == 2
    err = capsys.readouterr().err
    assert f"process {holder.proc.pid}" in err and err.count("\n") == 1
    assert path.read_bytes() == before


def test_one_program_has_one_writer_per_file(tmp_path: Path) -> None:
    path = saved_file(tmp_path / "s.json", 1)
    first = open_or_new(path)
    other = load_workspace(path)
    with pytest.raises(SessionInUse, match="already open in this program"):
        other.save()
    # opening it again for writing hands the file over (Ctrl+O on the open session)
    second = load_workspace(path, hold=True)
    assert second.holds_lock and not first.holds_lock
    with pytest.raises(SessionInUse):
        first.save()
    add_turns(second.tabs[0], 1)
    second.save()
    second.close()
    assert len(load_workspace(path).tabs[0].turns) == 2


def test_a_save_from_another_thread_keeps_the_lock(tmp_path: Path) -> None:
    import threading

    path = saved_file(tmp_path / "s.json", 1)
    workspace = open_or_new(path)
    errors: list[BaseException] = []

    def save() -> None:
        try:
            add_turns(workspace.tabs[0], 1)
            workspace.save()
        except BaseException as exc:
            errors.append(exc)

    worker = threading.Thread(target=save)
    worker.start()
    worker.join()
    assert errors == [] and workspace.holds_lock
    workspace.close()
    assert not workspace.holds_lock


# -- changes made by anything else are never overwritten -----------------------------------
def test_a_file_changed_by_another_program_is_not_overwritten(tmp_path: Path) -> None:
    path = saved_file(tmp_path / "s.json", 2)
    workspace = open_or_new(path)
    data = json.loads(path.read_text())
    data["name"] = "edited by hand"
    path.write_text(json.dumps(data))  # an editor that does not know about the lock
    add_turns(workspace.tabs[0], 1)
    with pytest.raises(SessionChanged) as info:
        workspace.save()
    assert str(path) in str(info.value) and "\n" not in str(info.value)
    assert json.loads(path.read_text())["name"] == "edited by hand"
    workspace.close()


def test_a_touched_file_is_not_a_changed_one(tmp_path: Path) -> None:
    path = saved_file(tmp_path / "s.json", 1)
    workspace = open_or_new(path)
    later = time.time() + 100
    os.utime(path, (later, later))
    workspace.save()
    # the workspace's own saves never look like someone else's
    for _ in range(3):
        add_turns(workspace.tabs[0], 1)
        workspace.save()
    workspace.close()
    assert len(load_workspace(path).tabs[0].turns) == 4


def test_a_moved_file_is_not_recreated_under_its_old_name(tmp_path: Path) -> None:
    path = saved_file(tmp_path / "s.json", 1)
    workspace = open_or_new(path)
    path.rename(tmp_path / "moved.json")
    add_turns(workspace.tabs[0], 1)
    with pytest.raises(SessionChanged, match="moved or deleted since it was opened"):
        workspace.save()
    assert not path.exists()
    workspace.save(tmp_path / "elsewhere.json")  # saving under another name works
    assert workspace.path == tmp_path / "elsewhere.json" and workspace.holds_lock
    workspace.close()
    assert len(load_workspace(tmp_path / "elsewhere.json").tabs[0].turns) == 2


def test_a_file_that_appeared_after_a_new_session_began_is_not_overwritten(
    tmp_path: Path,
) -> None:
    path = tmp_path / "new.json"
    workspace = open_or_new(path)
    assert workspace.tabs == [] and not path.exists()
    workspace.close()  # as if no lock could be made: only the content check is left
    saved_file(path, 3)
    workspace.tabs.append(new_session(TERMINAL, SCENARIO)[0])
    with pytest.raises(SessionChanged, match="created by another program"):
        workspace.save()
    assert len(load_workspace(path).tabs[0].turns) == 3


def test_lock_and_owner_files_are_hidden_and_never_listed(tmp_path: Path) -> None:
    from agentworld_tui.world.library import SessionLibrary

    library = SessionLibrary(tmp_path / "lib")
    workspace = library.new("Locked")
    library.save(workspace)
    assert workspace.path is not None
    names = sorted(p.name for p in library.folder.iterdir())
    lock, owner = f".{workspace.path.name}.lock", f".{workspace.path.name}.owner"
    assert lock in names and owner in names
    assert [e.path for e in library.entries()] == [workspace.path]
    workspace.close()
    assert not (library.folder / owner).exists()
    assert not (library.folder / lock).exists()  # no empty lock file stays behind


def test_a_lock_file_removed_at_release_is_never_shared_by_two_writers(tmp_path: Path) -> None:
    """A writer that opened the lock file before its holder removed it does not hold a
    lock on the removed file while another holds the new one."""
    from agentworld_tui.world.session_lock import LockHeld, SessionLock

    path = tmp_path / "s.json"
    first, second, third = SessionLock(path), SessionLock(path), SessionLock(path)
    first.acquire()
    with pytest.raises(LockHeld):
        second.acquire()
    first.release()
    assert not first.lock_path.exists()
    third.acquire()
    with pytest.raises(LockHeld):
        second.acquire()
    third.release()
    second.acquire()
    assert second.held
    second.release()


def test_hold_takes_the_file_before_the_first_save(tmp_path: Path) -> None:
    path = tmp_path / "fresh.json"
    workspace = Workspace(name="fresh", path=path)
    workspace.hold()
    assert workspace.holds_lock and not path.exists()
    with pytest.raises(SessionInUse, match="already open in this program"):
        Workspace(path=path).save()
    workspace.tabs.append(new_session(TERMINAL, SCENARIO)[0])
    workspace.save()
    workspace.close()
    Workspace(path=path).save()  # free again: a later writer may take it
