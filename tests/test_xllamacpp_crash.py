"""A native crash of xllamacpp never takes the app, a command or a server down.

The xllamacpp engine runs llama.cpp's server in this process, where a native crash ends
everything with no word. Before a build first runs a model, a child process loads it with
the engine's settings and decodes on two slots (``engines/probe.py``), as for
llama-cpp-python (tests/test_native_crash.py). Every crash here is a real one, of a real
process: a child that dereferences a null pointer or receives a signal, set as the trial's
command, some after saying which xllamacpp wheel they run, as the real child does first;
the real trial runs on a generated quantized model, checked against a bare decode in a
plain child.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from test_native_crash import (
    MESSAGES,
    SEGFAULT,
    counted_segfault,
    dies_of,
    records,
    unknown_model,
    write_quantized_model,
)

from agentworld_tui.engines import native_build, probe
from agentworld_tui.engines.base import EngineError, ErrorKind, GenerationControl, GenerationParams
from agentworld_tui.engines.llama import LlamaEngine
from agentworld_tui.engines.probe import INFO_MARK, CrashProbe
from agentworld_tui.engines.xllamacpp import XLlamaEngine

SWITCH = "--engine llama-cpp-python"
"""What every message of a crash offers: the other engine."""


def engine(path: Path, probe_: CrashProbe) -> XLlamaEngine:
    return XLlamaEngine(path, n_ctx=512, threads=1, slots=2, probe=probe_)


def said_then_segfault(system_info: str, devices: list[str]) -> list[str]:
    """A child that says which build it runs, as the real child does before loading the
    model, then crashes."""
    line = INFO_MARK + json.dumps({"system_info": system_info, "devices": devices})
    return [sys.executable, "-c", f"print({line!r}, flush=True); {SEGFAULT}"]


def crash_of(scripted_model, tmp_path: Path, name: str, command: list[str]) -> str:
    """The message of a load whose trial runs ``command``; checks it is a crash."""
    model = engine(unknown_model(scripted_model, name), CrashProbe(tmp_path, command=command))
    with pytest.raises(EngineError) as raised:
        model.load()
    assert raised.value.kind is ErrorKind.CRASHED
    assert not model.loaded
    message = str(raised.value)
    assert "\n" not in message
    assert SWITCH in message
    return message


# -- a crash in the trial ------------------------------------------------------------------------
def test_a_segfault_stops_the_load_with_what_to_do(scripted_model, tmp_path: Path) -> None:
    counter = tmp_path / "runs"
    cache = tmp_path / "cache"
    code = f"import sys; open({str(counter)!r}, 'a').write(sys.argv[1] + '\\n'); {SEGFAULT}"
    model = engine(
        unknown_model(scripted_model, "x-segfault"),
        CrashProbe(cache, command=[sys.executable, "-c", code]),
    )
    with pytest.raises(EngineError) as raised:
        model.load()
    assert raised.value.kind is ErrorKind.CRASHED
    message = str(raised.value)
    assert "xllamacpp crashed (a segmentation fault, SIGSEGV)" in message
    assert "was not loaded" in message
    assert "xllamacpp's CPU wheel" in message
    assert f"xllamacpp=={native_build.version('xllamacpp')}" in message  # reinstall it
    assert "--force-reinstall" in message
    assert SWITCH in message and 'engine = "llama-cpp-python"' in message
    assert "-DGGML_NATIVE" not in message  # llama-cpp-python's rebuild is not the fix here
    assert "\n" not in message
    assert not model.loaded
    trial = json.loads(counter.read_text().splitlines()[0])
    assert trial["engine"] == "xllamacpp" and trial["threads"] == 1
    assert records(cache) == []  # a crash is not remembered...
    with pytest.raises(EngineError):
        model.load()
    assert len(counter.read_text().splitlines()) == 2  # ...it is tried again


@pytest.mark.parametrize(
    ("sig", "said"),
    [(signal.SIGILL, "an illegal instruction, SIGILL"), (signal.SIGABRT, "an abort, SIGABRT")],
)
def test_other_crashes_are_named(
    scripted_model, tmp_path: Path, sig: signal.Signals, said: str
) -> None:
    message = crash_of(scripted_model, tmp_path, f"x-{sig.name}", dies_of(sig))
    assert f"({said}" in message and "xllamacpp" in message


def test_a_trial_killed_for_memory_says_so(scripted_model, tmp_path: Path) -> None:
    message = crash_of(scripted_model, tmp_path, "x-killed", dies_of(signal.SIGKILL))
    assert "lack of memory" in message and "--slots" in message and "--ctx" in message


@pytest.mark.parametrize(
    ("system_info", "devices", "wheel", "others"),
    [
        (
            "CUDA : ARCHS = 890 | USE_GRAPHS = 1 | CPU : AVX2 = 1 | ",
            ["CUDA0", "CPU"],
            "cu128",
            "cu132",
        ),
        ("CPU : AVX2 = 1 | ", ["Vulkan0", "CPU"], "vulkan", ""),
        ("ROCm : NO_VMM = 1 | CPU : AVX2 = 1 | ", ["ROCm0", "CPU"], "rocm-7.2.4", "rocm-6.4.1"),
    ],
)
def test_a_crash_on_a_gpu_wheel_names_the_other_wheels(
    scripted_model, tmp_path: Path, system_info: str, devices: list[str], wheel: str, others: str
) -> None:
    command = said_then_segfault(system_info, devices)
    message = crash_of(scripted_model, tmp_path, f"x-{wheel}", command)
    assert "--gpu-layers 0" in message
    assert f"--index-url {native_build.XLLAMACPP_INDEX}{wheel} xllamacpp" in message
    assert others in message
    assert f"xllamacpp=={native_build.version('xllamacpp')}" in message  # its CPU wheel


def test_a_crash_on_the_cpu_wheel_says_which(scripted_model, tmp_path: Path) -> None:
    command = said_then_segfault("CPU : SSE3 = 1 | AVX2 = 1 | ", ["CPU"])
    message = crash_of(scripted_model, tmp_path, "x-cpu-wheel", command)
    assert "xllamacpp's CPU wheel" in message and "--gpu-layers 0" not in message


def test_what_the_cpu_wheel_needs() -> None:
    if native_build.platform.machine().lower() not in ("x86_64", "amd64"):
        pytest.skip("xllamacpp's CPU wheel needs AVX2 on x86 only")
    old = frozenset({"sse2", "avx", "fma"})
    assert native_build.xllamacpp_cpu_lacks(old) == ["avx2", "f16c"]
    assert native_build.xllamacpp_cpu_lacks(old | {"avx2", "f16c"}) == []
    assert native_build.xllamacpp_cpu_lacks(frozenset()) == []  # not known: not said


# -- a pass is remembered (both engines: test_native_crash) ---------------------------------------
def test_one_engine_s_pass_never_vouches_for_the_other(scripted_model, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    counter = tmp_path / "runs"
    path = unknown_model(scripted_model, "x-both")
    llama = LlamaEngine(path, n_ctx=512, threads=1, probe=CrashProbe(cache))
    llama.load()  # llama-cpp-python's real trial passes, and is remembered
    llama.unload()
    assert len(records(cache)) == 1
    with pytest.raises(EngineError) as raised:
        engine(path, CrashProbe(cache, command=counted_segfault(counter))).load()
    assert raised.value.kind is ErrorKind.CRASHED
    assert counter.read_text().count("ran") == 1

    # And the reverse: xllamacpp's pass is not llama-cpp-python's.
    other = unknown_model(scripted_model, "x-reverse")
    passed = engine(other, CrashProbe(cache))
    passed.load()
    passed.unload()
    assert len(records(cache)) == 2
    crashing = LlamaEngine(
        other, n_ctx=512, threads=1, probe=CrashProbe(cache, command=counted_segfault(counter))
    )
    with pytest.raises(EngineError):
        crashing.load()
    assert counter.read_text().count("ran") == 2


def test_the_key_names_xllamacpps_build(scripted_model) -> None:
    trial = probe.Trial(unknown_model(scripted_model, "x-key"), 1, 0, engine="xllamacpp")
    build, _model, where = trial.key().split("-")
    assert build == native_build.build_identity("xllamacpp") != native_build.build_identity()
    assert where == "cpu"
    libraries = native_build.library_files("xllamacpp")
    assert any(p.name.startswith("xllamacpp") for p in libraries)  # the key reads them


# -- the real trial ----------------------------------------------------------------------------------
BARE_DECODE = """
import sys, xllamacpp
p = xllamacpp.CommonParams()
p.model.path = sys.argv[1]
p.n_parallel, p.n_ctx, p.n_gpu_layers = 2, 512, 0
p.cpuparams.n_threads = p.cpuparams_batch.n_threads = 1
p.hostnames, p.port, p.warmup, p.verbosity = ["127.0.0.1"], 0, False, 0
xllamacpp.Server(p).handle_completions(
    {"prompt": "The agent lists the files of the project folder.", "max_tokens": 2},
    lambda chunk: False,
)
"""


def bare_decode_crashes(path: Path) -> bool:
    """Whether a plain child that loads ``path`` with xllamacpp and decodes dies of a signal."""
    done = subprocess.run(
        [sys.executable, "-c", BARE_DECODE, str(path)], capture_output=True, timeout=300
    )
    return done.returncode < 0


def test_a_quantized_model_on_this_build(tmp_path: Path) -> None:
    """The real child, on a quantized model: where xllamacpp crashes the trial says so,
    elsewhere the model loads and runs; either way the child said which build it ran."""
    path = write_quantized_model(tmp_path / "tiny-Q4_0.gguf")
    crashes = bare_decode_crashes(path)
    trial = probe.Trial(path, 1, 0, engine="xllamacpp")
    outcome = CrashProbe(tmp_path / "c").run(trial)
    assert "CPU" in outcome.system_info and "CPU" in outcome.devices
    assert outcome.crashed is crashes and outcome.ok is not crashes
    model = engine(path, CrashProbe(tmp_path / "c"))
    if crashes:
        with pytest.raises(EngineError) as raised:
            model.load()
        assert raised.value.kind is ErrorKind.CRASHED and SWITCH in str(raised.value)
        return
    model.load()
    events = list(model.stream(MESSAGES, GenerationParams(max_tokens=4), GenerationControl()))
    assert events[-1].stats.generated_tokens > 0  # type: ignore[union-attr]
    model.unload()


# -- the front-ends ----------------------------------------------------------------------------------
def test_predict_reports_a_crash_in_one_line(
    scripted_model, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from agentworld_tui.cli import main

    monkeypatch.setattr(probe, "CHILD", (sys.executable, "-c", SEGFAULT))
    path = unknown_model(scripted_model, "x-predicted")
    code = main(["predict", "--engine", "xllamacpp", "--model", str(path), "--threads", "1", "ls"])
    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""
    assert len(err.strip().splitlines()) == 1
    assert "xllamacpp crashed (a segmentation fault, SIGSEGV)" in err and SWITCH in err


def test_predict_on_xllamacpp_runs_after_a_passed_trial(scripted_model, tmp_path: Path) -> None:
    """A real process, the real trial: a model xllamacpp runs is predicted with it, and
    the pass is remembered for the next process."""
    path = unknown_model(scripted_model, "x-predict")
    command = [
        sys.executable, "-m", "agentworld_tui", "predict", "--engine", "xllamacpp",
        "--slots", "1", "--model", str(path), "--threads", "1", "ls",
    ]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr
    cached = sorted((tmp_path / "cache" / "llama-probe").glob("*.json"))
    assert [json.loads(p.read_text()).get("xllamacpp") for p in cached] == [
        native_build.version("xllamacpp")
    ]


async def test_the_app_never_saves_a_model_that_crashed(
    scripted_model, isolated_dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from pane_driver import wait_for

    from agentworld_tui.config import Settings
    from agentworld_tui.ui.app import AgentWorldApp

    config = isolated_dirs["config"] / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    kept = '# mine\n[model]\npath = "keep.gguf"\nengine = "xllamacpp"\n'
    config.write_text(kept, "utf-8")
    settings = Settings()
    settings.model.path = str(unknown_model(scripted_model, "x-app-first"))
    settings.model.threads, settings.model.engine, settings.model.slots = 1, "xllamacpp", 2
    app = AgentWorldApp(settings, offer_models=False, offer_resume=False)
    async with app.run_test(size=(120, 36)) as pilot:
        await asyncio.wait_for(app.model_ready.wait(), 60)
        assert app.simulator.engine is not None
        assert app.simulator.engine.info.engine == "xllamacpp"
        monkeypatch.setattr(probe, "CHILD", (sys.executable, "-c", SEGFAULT))
        picked = unknown_model(scripted_model, "x-app-picked")
        app.loading.use(picked)  # what F3's model picker hands over
        await wait_for(
            pilot, lambda: any("crashed" in n.message for n in app._notifications), timeout=60
        )
        assert app.is_running
        assert any(SWITCH in n.message for n in app._notifications)
        assert app.settings.model.path != str(picked)
        assert app.loading.model.phase == "model failed to load"
    assert config.read_text("utf-8") == kept


def test_doctor_runs_xllamacpps_trial(
    scripted_model, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from agentworld_tui.cli import main

    path = unknown_model(scripted_model, "x-doctor")
    code = main(["doctor", "--engine", "xllamacpp", "--model", str(path), "--threads", "1"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "runs: loaded and decoded in a separate process" in out
    line = next(line for line in out.splitlines() if line.startswith("xllamacpp trial"))
    assert "runs quantized models" in line or "crashed" in line

    monkeypatch.setattr(probe, "CHILD", (sys.executable, "-c", SEGFAULT))
    code = main(["doctor", "--engine", "xllamacpp", "--model", str(path), "--threads", "1"])
    out = capsys.readouterr().out
    assert code == 1  # doctor tries again rather than trusting what was remembered
    trial = next(line for line in out.splitlines() if line.startswith("trial"))
    assert "xllamacpp crashed (a segmentation fault, SIGSEGV)" in trial and SWITCH in trial
    assert "Traceback" not in out


def test_pull_use_never_saves_a_model_that_crashed(
    online_hub,
    scripted_model,
    isolated_dirs: dict[str, Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from agentworld_tui.cli import main

    repo = "tester/Tiny-AgentWorld-GGUF"
    model = unknown_model(scripted_model, "x-pulled")
    online_hub.add_repo(repo, {"README.md": b"# tiny\n", "Tiny-Q4_K_M.gguf": model.read_bytes()})
    config = isolated_dirs["config"]
    config.mkdir(parents=True, exist_ok=True)
    (config / "models.toml").write_text(
        f'[[model]]\nname = "tiny"\nrepo = "{repo}"\nquant = "Q4_K_M"\nsize_gb = 0.001\n',
        encoding="utf-8",
    )
    kept = '[model]\nengine = "xllamacpp"\n'
    (config / "config.toml").write_text(kept, encoding="utf-8")
    monkeypatch.setattr(probe, "CHILD", (sys.executable, "-c", SEGFAULT))
    code = main(["models", "pull", "tiny", "--use"])
    _out, err = capsys.readouterr()
    assert code == 2
    assert "not saved as the model" in err and "xllamacpp crashed" in err
    assert (config / "config.toml").read_text(encoding="utf-8") == kept


def test_the_trial_ends_as_soon_as_it_has_decoded(scripted_model, tmp_path: Path) -> None:
    """xllamacpp's server, freed before its task loop runs, waits for it forever: the
    child waits until the loop answers and never frees it before it exits (the engine
    waits for the loop too before it can unload), so no trial runs out its time."""
    path = unknown_model(scripted_model, "x-quick")
    trial = probe.Trial(path, 1, 0, engine="xllamacpp")
    for attempt in range(6):
        outcome = CrashProbe(tmp_path / f"c{attempt}", timeout=30).run(trial)
        assert outcome.ok, (attempt, outcome.error)
