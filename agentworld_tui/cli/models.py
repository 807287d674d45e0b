"""``agentworld models list|pull|rm|path`` and ``agentworld doctor``.

Registered by cli.py; nothing heavy is imported until a command runs. Failures are one line
on stderr and a non-zero exit code (through UserError), never a traceback.

Names in a catalog (a models.toml may be a shared file), the Hub's answers and what the
machine reports are untrusted text: every line goes out through ``_out`` or ``_err``, which
sanitize it, and every UserError raised here carries a sanitized message.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from agentworld_tui.cli.launch import UserError
from agentworld_tui.world.sanitize import sanitize

if TYPE_CHECKING:
    from pathlib import Path

    from agentworld_tui.config import Settings
    from agentworld_tui.engines.probe import ProbeOutcome
    from agentworld_tui.models.catalog import Catalog, CatalogEntry
    from agentworld_tui.models.download import PullProgress
    from agentworld_tui.models.fit import FitVerdict
    from agentworld_tui.models.hardware import LlamaBuild, MachineMemory


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], engine: argparse.ArgumentParser
) -> None:
    models = sub.add_parser("models", help="list, download and remove models")
    actions = models.add_subparsers(dest="models_command", metavar="ACTION", required=True)

    listing = actions.add_parser("list", help="the catalog: downloaded or not, size, fit")
    listing.add_argument(
        "--ctx", type=_context_size, default=0, metavar="N", help="context for the fit"
    )
    listing.add_argument("--json", action="store_true", help="print one JSON object")
    listing.set_defaults(handler=cmd_list)

    pull = actions.add_parser("pull", help="download a model (resumes an interrupted one)")
    pull.add_argument("model", metavar="NAME|REPO:QUANT")
    pull.add_argument("--use", action="store_true", help="also make it the model in config.toml")
    pull.set_defaults(handler=cmd_pull)

    remove = actions.add_parser("rm", help="delete a downloaded model from the cache")
    remove.add_argument("model", metavar="NAME|REPO:QUANT")
    remove.set_defaults(handler=cmd_rm)

    path = actions.add_parser("path", help="print the local path of a downloaded model")
    path.add_argument("model", metavar="NAME|REPO:QUANT")
    path.set_defaults(handler=cmd_path)

    doctor = sub.add_parser(
        "doctor",
        parents=[engine],
        help="llama.cpp build, GPUs, memory, and whether the configured model fits",
    )
    doctor.set_defaults(handler=cmd_doctor)


MAX_CONTEXT = (1 << 32) - 1
"""llama.cpp keeps the context size in 32 bits."""


def _context_size(text: str) -> int:
    """``--ctx`` for a fit: 0 (the default) up to what llama.cpp can hold."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a whole number") from None
    if not 0 <= value <= MAX_CONTEXT:
        raise argparse.ArgumentTypeError(f"must be between 0 and {MAX_CONTEXT} tokens")
    return value


def _clean(text: str) -> str:
    """One line of untrusted text made safe for a terminal."""
    return sanitize(text).replace("\n", " ")


def _out(text: str) -> None:
    print(_clean(text))


def _err(text: str) -> None:
    print(_clean(text), file=sys.stderr)


def _refuse(text: str) -> UserError:
    return UserError(_clean(text))


def _catalog() -> Catalog:
    from agentworld_tui.models.catalog import load_catalog

    catalog = load_catalog()
    for problem in catalog.problems:
        _err(f"agentworld: models.toml: {problem}")
    return catalog


def _entry(catalog: Catalog, text: str) -> CatalogEntry:
    from agentworld_tui.models.catalog import CatalogError, resolve

    try:
        return resolve(catalog, text)
    except CatalogError as exc:
        raise _refuse(str(exc)) from None


def _gpu_offload() -> tuple[bool, LlamaBuild | None]:
    from agentworld_tui.models.hardware import llama_build

    build = llama_build()
    return bool(build and build.gpu_offload), build


def _fit_of(
    entry: CatalogEntry,
    catalog: Catalog,
    machine: MachineMemory,
    gpu_offload: bool,
    n_ctx: int,
) -> FitVerdict:
    from agentworld_tui.models.cache import local_path
    from agentworld_tui.models.fit import estimate_entry_fit, estimate_fit

    path = local_path(entry)
    if path is not None:
        try:
            return estimate_fit(
                path,
                n_ctx,
                machine=machine,
                gpu_offload=gpu_offload,
                entry=entry,
                catalog=catalog,
            )
        except ValueError:
            pass  # an unreadable header: fall back to the catalog's figures
    return estimate_entry_fit(
        entry, n_ctx, machine=machine, gpu_offload=gpu_offload, catalog=catalog
    )


_STATUS_WORDS = {"fits": "fits", "tight": "tight", "does_not_fit": "too big"}


def cmd_list(args: argparse.Namespace) -> int:
    from agentworld_tui.models.cache import find_local, hub_cache_dir, partial_bytes
    from agentworld_tui.models.fit import gib, recommend
    from agentworld_tui.models.hardware import machine_memory

    catalog = _catalog()
    machine = machine_memory()
    offload, build = _gpu_offload()
    best = recommend(catalog, machine, gpu_offload=offload, n_ctx=args.ctx)
    rows = []
    for entry in catalog.entries:
        local = find_local(entry)
        verdict = _fit_of(entry, catalog, machine, offload, args.ctx)
        size = local.size_bytes if local else entry.size_bytes
        state = "downloaded" if local else ("partial" if partial_bytes(entry) else "-")
        rows.append((entry, local, verdict, size, state))
    if args.json:
        print(
            json.dumps(
                {
                    "models": [
                        {
                            "name": e.name,
                            "repo": e.repo,
                            "quant": e.quant,
                            "size_bytes": size,
                            "description": e.description,
                            "fallback": e.fallback,
                            "default": e.name == catalog.default,
                            "recommended": best is not None and e.name == best.name,
                            "downloaded": local is not None,
                            "path": str(local.first) if local else None,
                            "fit": v.status,
                            "memory_bytes": v.estimate.total,
                            "n_ctx": v.estimate.n_ctx,
                        }
                        for e, local, v, size, _state in rows
                    ],
                    "ram_total": machine.ram_total,
                    "gpus": [g.name for g in machine.gpus],
                    "cache_dir": str(hub_cache_dir()),
                }
            )
        )
        return 0
    names = {e.name: _clean(e.name) for e in catalog.entries}
    name_width = max([len(n) for n in names.values()] + [4])
    quant_width = max([len(e.quant) for e in catalog.entries] + [5])
    _out(
        f"  {'NAME':<{name_width}}  {'QUANT':<{quant_width}}  {'SIZE':>8}  "
        f"{'STATE':<10}  {'FIT':<7}  NEEDS"
    )
    for entry, _local, verdict, size, state in rows:
        mark = ">" if best is not None and entry.name == best.name else " "
        size_text = f"{size / 1e9:.1f} GB" if size else "?"
        note = "  fallback" if entry.fallback else ""
        _out(
            f"{mark} {names[entry.name]:<{name_width}}  {entry.quant:<{quant_width}}  "
            f"{size_text:>8}  {state:<10}  {_STATUS_WORDS[verdict.status]:<7}  "
            f"{gib(verdict.estimate.total)}{note}"
        )
    where = (
        ", ".join(f"{g.name} {gib(g.total_bytes)}" for g in machine.gpus)
        if machine.gpus
        else "no GPU visible"
    )
    kind = build.kind if build else "not installed"
    ctx = rows[0][2].estimate.n_ctx if rows else args.ctx
    print(file=sys.stderr)
    _err(
        f"> recommended for this machine. Fit at {ctx} tokens of context; "
        f"{gib(machine.ram_total)} RAM, {where}; llama.cpp: {kind}."
    )
    return 0


class ProgressBar:
    """Draws pull progress on a terminal; on a pipe, prints a line every 10 %."""

    def __init__(self, stream: TextIO, label: str) -> None:
        self.stream = stream
        self.label = _clean(label)
        self.tty = stream.isatty()
        self.last_draw = 0.0
        self.last_tenth = -1
        self.drawn = False

    def __call__(self, progress: PullProgress) -> None:
        from agentworld_tui.models.download import format_bytes, format_duration

        now = time.monotonic()
        if progress.phase == "check":
            text = (
                f"{self.label}: checking the part already downloaded {format_bytes(progress.done)}"
            )
        else:
            part = (
                f" part {progress.file_index}/{progress.file_count}"
                if progress.file_count > 1
                else ""
            )
            text = (
                f"{self.label}: {progress.fraction * 100:5.1f}%  "
                f"{format_bytes(progress.done)} / {format_bytes(progress.total)}  "
                f"{format_bytes(progress.speed)}/s  {format_duration(progress.eta)} left{part}"
            )
        if self.tty:
            if progress.phase != "done" and now - self.last_draw < 0.1:
                return
            self.last_draw = now
            width = shutil.get_terminal_size((100, 20)).columns
            bar_width = max(10, min(30, width - len(text) - 4))
            filled = int(bar_width * progress.fraction)
            line = f"[{'#' * filled}{'.' * (bar_width - filled)}] {text}"
            self.stream.write("\r" + line[: width - 1].ljust(width - 1))
            self.drawn = True
        else:
            tenth = int(progress.fraction * 10)
            if tenth == self.last_tenth:
                return
            self.last_tenth = tenth
            self.stream.write(text + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.tty and self.drawn:
            self.stream.write("\n")
            self.stream.flush()
            self.drawn = False


def cmd_pull(args: argparse.Namespace) -> int:
    from agentworld_tui.models.cache import find_local, hub_cache_dir
    from agentworld_tui.models.download import (
        DownloadError,
        check_disk_room,
        fetch,
        format_bytes,
        plan_download,
    )

    catalog = _catalog()
    entry = _entry(catalog, args.model)
    found = find_local(entry)
    if found is not None:
        _err(f"agentworld: {entry.name} is already downloaded")
        path = found.first
    else:
        bar = ProgressBar(sys.stderr, entry.name)
        cancel = threading.Event()
        try:
            plan = plan_download(entry)
            check_disk_room(plan)
            _warn_if_too_big(replace(entry, size_gb=plan.total_bytes / 1e9), catalog)
            files = ", ".join(f.path for f in plan.files)
            resumed = plan.total_bytes - plan.needed_bytes
            _err(
                f"agentworld: pulling {entry.repo}: {files} ({format_bytes(plan.total_bytes)}"
                + (f", {format_bytes(resumed)} already here" if resumed else "")
                + ")"
            )
            path = fetch(plan, bar, cancel)
        except DownloadError as exc:
            bar.close()
            raise _refuse(str(exc)) from None
        except OSError as exc:
            bar.close()
            raise _refuse(
                f"cannot write {entry.name} into the cache {hub_cache_dir()}: "
                f"{exc.strerror or exc}" + (f" ({exc.filename})" if exc.filename else "")
            ) from None
        except KeyboardInterrupt:
            cancel.set()
            bar.close()
            _err("agentworld: download interrupted; run the same command again to resume")
            return 130
        bar.close()
    if args.use:
        _check_it_runs(path)
        _use_model(str(path))
    _out(str(path))
    return 0


def _trial(
    path: Path, settings: Settings, *, again: bool, name: str = "", engine: str = ""
) -> tuple[ProbeOutcome, str]:
    """Try the model's first decode in a separate process, as the engine does before it
    loads one (``again``: even when it passed before); the outcome and, for a crash, the
    message with the fix for this machine (naming the model ``name``, else its file).
    The engine is ``engine``, else the one the settings name."""
    from agentworld_tui.config import cache_dir
    from agentworld_tui.engines.probe import CrashProbe, Trial, xllamacpp_crash_message

    probe = CrashProbe(cache_dir())
    if (engine or settings.model.engine) == "xllamacpp":
        from agentworld_tui.engines.threads import physical_cores

        threads = settings.model.threads or physical_cores()
        trial = Trial(path, threads, settings.model.gpu_layers, engine="xllamacpp")
        outcome = probe.run(trial) if again else probe.check(trial)
        crashed = xllamacpp_crash_message(name or path.name, outcome)
        return outcome, crashed if outcome.crashed else ""
    from agentworld_tui.engines.llama.loading import crash_error, placement

    gpu_layers, threads = placement(settings.model.gpu_layers, settings.model.threads)
    trial = Trial(path, threads, gpu_layers)
    outcome = probe.run(trial) if again else probe.check(trial)
    return outcome, str(crash_error(path, outcome, name)) if outcome.crashed else ""


def _check_it_runs(path: Path) -> None:
    """Refuse to make a model the model when llama.cpp crashes on it: every start would."""
    from agentworld_tui.config import load_settings

    _outcome, crashed = _trial(path, load_settings().settings, again=False)
    if crashed:
        raise _refuse(f"{path} is downloaded but not saved as the model: {crashed}")


def _warn_if_too_big(entry: CatalogEntry, catalog: Catalog) -> None:
    """A pull is never refused for size (the user asked), but they hear it first."""
    from agentworld_tui.models.fit import estimate_entry_fit
    from agentworld_tui.models.hardware import machine_memory

    offload, _build = _gpu_offload()
    verdict = estimate_entry_fit(
        entry, machine=machine_memory(), gpu_offload=offload, catalog=catalog
    )
    if verdict.status != "fits":
        _err(f"agentworld: warning: {entry.name} {verdict.summary()}")


def _use_model(path: str) -> None:
    from agentworld_tui.config import SettingsFileError, update_settings_file

    try:
        written = update_settings_file({"model.path": path, "server.url": ""})
    except SettingsFileError as exc:
        raise UserError(f"{path} is downloaded, but {exc}") from None
    print(f"agentworld: {written} now uses this model", file=sys.stderr)


def cmd_rm(args: argparse.Namespace) -> int:
    from agentworld_tui.models.cache import remove
    from agentworld_tui.models.download import format_bytes

    entry = _entry(_catalog(), args.model)
    try:
        removed = remove(entry)
    except OSError as exc:
        raise _refuse(f"cannot remove {entry.name}: {exc}") from None
    if not removed.files:
        raise _refuse(f"{entry.name} is not downloaded")
    _out(
        f"removed {entry.name}: {removed.files} file(s), {format_bytes(removed.bytes_freed)} freed"
    )
    return 0


def cmd_path(args: argparse.Namespace) -> int:
    from agentworld_tui.models.cache import local_path

    entry = _entry(_catalog(), args.model)
    path = local_path(entry)
    if path is None:
        raise _refuse(f"{entry.name} is not downloaded; run: agentworld models pull {entry.name}")
    _out(str(path))
    return 0


def _engine_line(settings: Any) -> str:
    """Which engine runs the model, and xllamacpp's state when it is the one."""
    if settings.server.url:
        return f"a server: {settings.server.url}"
    if settings.model.engine != "xllamacpp":
        return 'llama-cpp-python (one turn at a time; [model] engine = "xllamacpp" for many)'
    try:
        import xllamacpp
    except ImportError:
        return "xllamacpp, which is not installed: pip install xllamacpp"
    slots = settings.engine_spec().slots
    version = getattr(xllamacpp, "__version__", "?")
    return f"xllamacpp {version}, {slots} slots (turns at once)"


def _xllamacpp_in_use(settings: Settings) -> bool:
    """Whether the model runs in-process on xllamacpp, and it is installed."""
    import importlib.util

    engine = settings.model.engine == "xllamacpp" and not settings.server.url
    return engine and importlib.util.find_spec("xllamacpp") is not None


def _amx_line(build: LlamaBuild | None) -> str:
    """What doctor says of AMX: the CPU reports it, and whether this build uses it."""
    from agentworld_tui.engines.native_build import amx_flags, build_uses_amx

    flags = amx_flags()
    if not flags:
        return ""
    text = f"reports AMX ({', '.join(flags)})"
    if build is not None and build_uses_amx(build.system_info):
        return text + "; this llama.cpp build uses it, which crashes on some machines (build trial)"
    return text + "; this llama.cpp build does not use it"


def _build_trial(settings: Settings, out: list[tuple[str, str]], *, llama: bool) -> None:
    """Try the build itself on a small quantized model, so that a crash is found before any
    model is configured (the exit status is the configured model's to give): llama-cpp-python's
    (``llama``: it is installed) and xllamacpp's when it is the engine."""
    from agentworld_tui.config import cache_dir
    from agentworld_tui.engines.trial_model import trial_model

    try:
        path = trial_model(cache_dir() / "llama-probe")
    except Exception as exc:  # an old gguf package, a cache folder that cannot be written
        out.append(("build trial", f"not run: cannot write its test model ({exc})"))
        return
    engines = ["llama-cpp-python"] if llama else []
    if _xllamacpp_in_use(settings):
        engines.append("xllamacpp")
    for engine in engines:
        label = "build trial" if engine == "llama-cpp-python" else "xllamacpp trial"
        outcome, crashed = _trial(
            path, settings, again=True, name="a small Q8_0 model", engine=engine
        )
        if outcome.ok:
            said = "runs quantized models (a small Q8_0 model, in a separate process)"
            out.append((label, said))
        elif crashed:
            out.append((label, crashed))
        else:
            out.append((label, f"no verdict: {outcome.error}"))


def _doctor_trial(path: Path, settings: Settings, out: list[tuple[str, str]]) -> int:
    """Run the model's trial now and say how it went; 1 when it did not run."""
    outcome, crashed = _trial(path, settings, again=True)
    if outcome.ok:
        out.append(
            ("trial", f"runs: loaded and decoded in a separate process ({outcome.seconds:.1f} s)")
        )
        return 0
    if crashed:
        out.append(("trial", crashed))
        return 1
    out.append(("trial", f"did not run in a separate process: {outcome.error}"))
    return 1


def cmd_doctor(args: argparse.Namespace) -> int:
    from agentworld_tui.cli.launch import settings_from_args
    from agentworld_tui.config import log_path, settings_path
    from agentworld_tui.models.cache import hub_cache_dir
    from agentworld_tui.models.fit import estimate_fit, gib, read_shape, recommend
    from agentworld_tui.models.hardware import gpu_reinstall_command, machine_memory

    settings = settings_from_args(args)
    catalog = _catalog()
    machine = machine_memory()
    offload, build = _gpu_offload()
    out: list[tuple[str, str]] = []
    if build is None:
        out.append(("llama.cpp", "llama-cpp-python is not installed or fails to load"))
    else:
        offload_text = "GPU offload available" if build.gpu_offload else "no GPU offload"
        out.append(
            ("llama.cpp", f"llama-cpp-python {build.version}, {build.kind} build ({offload_text})")
        )
        out.append(("", build.system_info))
    out.append(("engine", _engine_line(settings)))
    if machine.gpus:
        for gpu in machine.gpus:
            out.append(
                (
                    "GPU",
                    f"{gpu.index}: {gpu.name}, {gib(gpu.total_bytes)} ({gib(gpu.free_bytes)} free)",
                )
            )
    elif machine.unified:
        out.append(("GPU", "Apple Silicon: the GPU shares the RAM (Metal)"))
    else:
        out.append(("GPU", "none visible (no nvidia-smi, or it reports no GPU)"))
    amx = _amx_line(build)
    if amx:
        out.append(("CPU", amx))
    if build is not None or _xllamacpp_in_use(settings):
        _build_trial(settings, out, llama=build is not None)
    out.append(("RAM", f"{gib(machine.ram_total)} ({gib(machine.ram_available)} available)"))
    out.append(("HF cache", str(hub_cache_dir())))
    out.append(("config", f"{settings_path()}{'' if settings_path().exists() else ' (none yet)'}"))
    out.append(("log", str(log_path())))
    status = 0
    if settings.server.url:
        out.append(("model", f"remote server {settings.server.url} (no local model needed)"))
    elif not settings.model.path:
        out.append(("model", "none configured: agentworld models pull NAME --use"))
    else:
        path = Path(settings.model.path).expanduser()
        out.append(("model", str(path)))
        try:
            shape = read_shape(path)
            verdict = estimate_fit(
                path, settings.model.n_ctx, machine=machine, gpu_offload=offload, catalog=catalog
            )
        except (ValueError, OSError) as exc:
            out.append(("", f"cannot read it: {exc}"))
            status = 1
        else:
            out.append(
                (
                    "",
                    f"{shape.architecture}, {shape.n_layers} layers ({shape.attention_layers} "
                    f"with a KV cache), {shape.kv_bytes_per_token / 1024:.0f} KiB of KV per token",
                )
            )
            out.append(("fit", verdict.summary()))
            for note in (*verdict.notes, *verdict.estimate.assumptions):
                out.append(("", note))
            if build is not None or _xllamacpp_in_use(settings):
                status = max(status, _doctor_trial(path, settings, out))
    best = recommend(catalog, machine, gpu_offload=offload)
    out.append(
        (
            "catalog",
            f"recommended here: {best.name}" if best else "no catalog model fits this machine",
        )
    )
    if build is not None and not build.gpu_offload:
        command = gpu_reinstall_command(machine, build.version)
        if command is not None:
            out.append(
                (
                    "GPU build",
                    f"this llama.cpp build cannot use the {command[0]} GPU; under pipx rebuild it:",
                )
            )
            out.append(("", command[1]))
        else:
            out.append(
                ("GPU build", "no usable GPU found; on a machine with one, rebuild llama.cpp with:")
            )
            for flag in ("-DGGML_CUDA=on", "-DGGML_METAL=on", "-DGGML_VULKAN=on"):
                out.append(
                    (
                        "",
                        f'CMAKE_ARGS="{flag}" pipx runpip agentworld-tui install '
                        "--force-reinstall --no-cache-dir llama-cpp-python",
                    )
                )
    width = max(len(label) for label, _ in out)
    for label, text in out:
        _out(f"{label:<{width}}  {text}")
    return status
