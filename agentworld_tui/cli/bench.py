"""``agentworld bench``: predict, judge and score AgentWorldBench samples.

    agentworld bench DATA_DIR [--domains D ...] [--limit N] [--out DIR] [judge flags]
    agentworld bench judge RUN (--judge-server URL --judge-model NAME | --judge-model-path GGUF)
    agentworld bench score RUN [OTHER_RUN]
    agentworld bench export OUT_DIR DEST_DIR

The first form runs the world model (``--model`` or ``--server``) over the samples and, with
judge flags, judges the predictions, then prints the scores. Every step appends to files in
the run's folder, so the same command run again resumes where the last one stopped. A RUN
is a run's folder, or the official evaluator's ``predictions.jsonl`` or ``judged.jsonl``
(or the folder holding them); ``export`` writes a run as the official evaluator's files.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from agentworld_tui.cli.launch import UserError

if TYPE_CHECKING:
    from agentworld_tui.engines.factory import EngineSpec
    from agentworld_tui.evaluation.bench import BenchRun, SampleSet
    from agentworld_tui.judging.prompts import JudgePrompts

USAGE = """
  agentworld bench DATA_DIR [--domains D [D ...]] [--limit N] [--out DIR] [--concurrency N]
                   [--judge-server URL --judge-model NAME | --judge-model-path GGUF]
                   [--judge-prompts DIR]
  agentworld bench judge RUN (--judge-server URL --judge-model NAME | --judge-model-path GGUF)
                   [--judge-prompts DIR] [--out DIR]
  agentworld bench score RUN [OTHER_RUN] [--raw] [--json]
  agentworld bench export OUT_DIR DEST_DIR

  RUN: a run's folder (OUT_DIR), or the official evaluator's predictions.jsonl or
  judged.jsonl, or the folder holding them"""

DEFAULT_REMOTE_CONCURRENCY = 4
JUDGE_TEMPERATURE, JUDGE_MAX_TOKENS, JUDGE_ATTEMPTS = 0.6, 32768, 3
"""judging/judge.py's defaults (the official evaluator's), here so that building the
argument parser imports nothing of judging."""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser], engine: object) -> None:
    parents = [engine] if isinstance(engine, argparse.ArgumentParser) else []
    parser = sub.add_parser(
        "bench",
        parents=parents,
        usage=USAGE,
        help="run, judge and score the model on AgentWorldBench files",
        description="Run the world model over AgentWorldBench samples (each with its own "
        "system prompt and history), judge the predictions with a judge model, and print "
        "the benchmark's scores. Results are appended as they come: run the same command "
        "again to resume an interrupted run.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "paths",
        nargs="+",
        metavar="DATA_DIR",
        help="a folder of <domain>_test.jsonl files (or one file); or 'judge RUN', "
        "'score RUN [OTHER_RUN]' or 'export OUT_DIR DEST_DIR'",
    )
    run = parser.add_argument_group("running")
    run.add_argument(
        "--domains", nargs="+", metavar="D", help="only these domains (names or a comma list)"
    )
    run.add_argument("--limit", type=int, metavar="N", help="the first N samples of each domain")
    run.add_argument(
        "--out",
        metavar="DIR",
        help="the run's folder (default: <data dir>/bench/<data>-<model>); reuse it to "
        "resume. For 'judge' of the official evaluator's file: the folder its verdicts go to",
    )
    run.add_argument(
        "--concurrency",
        type=int,
        metavar="N",
        help=f"requests at once to a server (default {DEFAULT_REMOTE_CONCURRENCY}; "
        "a local model runs one at a time)",
    )
    run.add_argument(
        "--keep-reasoning", action="store_true", help="store each prediction's reasoning too"
    )
    judge = parser.add_argument_group("judging")
    judge.add_argument("--judge-server", metavar="URL", help="OpenAI-compatible judge endpoint")
    judge.add_argument("--judge-model", metavar="NAME", help="the judge model on that server")
    judge.add_argument("--judge-model-path", metavar="GGUF", help="a local GGUF judge instead")
    judge.add_argument(
        "--judge-api-key-env", metavar="VAR", help="environment variable holding its API key"
    )
    judge.add_argument("--judge-ctx", type=int, metavar="N", help="the judge's context size")
    judge.add_argument(
        "--judge-prompts",
        metavar="DIR",
        help="judge with the prompts in this folder (for example a clone of the official "
        "release) instead of the project's own; see docs/judging.md for the layouts read",
    )
    judge.add_argument(
        "--judge-max-tokens",
        type=int,
        default=JUDGE_MAX_TOKENS,
        metavar="N",
        help=f"default {JUDGE_MAX_TOKENS}, as the official evaluator",
    )
    judge.add_argument(
        "--judge-temperature",
        type=float,
        default=JUDGE_TEMPERATURE,
        metavar="T",
        help=f"default {JUDGE_TEMPERATURE:g}, as the official evaluator",
    )
    judge.add_argument(
        "--judge-attempts",
        type=int,
        default=JUDGE_ATTEMPTS,
        metavar="N",
        help=f"requests per verdict while none can be read (default {JUDGE_ATTEMPTS}, "
        "as the official evaluator)",
    )
    judge.add_argument(
        "--judge-concurrency",
        type=int,
        metavar="N",
        help=f"requests at once to the judge server (default {DEFAULT_REMOTE_CONCURRENCY})",
    )
    score = parser.add_argument_group("scores")
    score.add_argument("--raw", action="store_true", help="1-5 means instead of 0-100 scores")
    score.add_argument("--json", action="store_true", help="print the scores as JSON")
    parser.set_defaults(handler=cmd_bench)


def cmd_bench(args: argparse.Namespace) -> int:
    first, rest = args.paths[0], args.paths[1:]
    if first == "score":
        return _score(rest, args)
    if first == "judge":
        if len(rest) != 1:
            raise UserError("usage: agentworld bench judge RUN --judge-server URL ...")
        return _judge_only(Path(rest[0]), args)
    if first == "export":
        if len(rest) != 2:
            raise UserError("usage: agentworld bench export OUT_DIR DEST_DIR")
        return _export(Path(rest[0]), Path(rest[1]))
    if rest:
        raise UserError(
            f"one DATA_DIR at a time (got {len(args.paths)} paths); "
            "to compare runs use: agentworld bench score OUT_DIR OTHER_OUT_DIR"
        )
    return _run(Path(first), args)


# -- the steps --------------------------------------------------------------------------------
def _run(data: Path, args: argparse.Namespace) -> int:
    from agentworld_tui.cli.launch import make_engine, settings_from_args
    from agentworld_tui.domains import DOMAINS
    from agentworld_tui.engines.base import EngineError
    from agentworld_tui.evaluation.bench import BenchError, BenchRun, load_samples, predict_samples

    spec = _judge_spec(args)
    prompts = _judge_prompts(args) if spec is not None else None
    domains = _domains(args.domains)
    if args.limit is not None and args.limit < 1:
        raise UserError("--limit must be 1 or more")
    try:
        samples = load_samples(
            data, domains=domains, limit=args.limit, known=lambda name: name in DOMAINS
        )
    except BenchError as exc:
        raise UserError(str(exc)) from None
    for problem in samples.problems:
        _say(problem)
    settings = settings_from_args(args)
    engine = make_engine(settings)
    remote = bool(settings.server.url)
    concurrency = _concurrency(args.concurrency, remote)
    try:
        engine.load()
    except EngineError as exc:
        raise UserError(str(exc)) from None
    params = settings.generation_params()
    out = Path(args.out) if args.out else _default_out(data, engine.info.name)
    run = BenchRun(out)
    try:
        run.begin(data, engine.info.name, engine.info.where, params)
        counts = ", ".join(f"{d} {n}" for d, n in sorted(samples.by_domain().items()))
        _say(f"{len(samples.samples)} samples ({counts}); results in {out}")
        summary = predict_samples(
            engine,
            samples.samples,
            run,
            params,
            concurrency=concurrency,
            keep_reasoning=args.keep_reasoning,
        )
    except BenchError as exc:
        raise UserError(str(exc)) from None
    finally:
        engine.unload()
    if summary.resumed:
        _say(f"resumed: {summary.resumed} samples were already predicted")
    _say(summary.line())
    for problem in summary.problems:
        _say(f"  {problem}")
    status = 1 if summary.failed else 0
    if spec is not None:
        assert prompts is not None
        status = max(status, _judge(run, samples, spec, prompts, args))
    return max(status, _print_scores([str(out)], args, quiet_if_empty=spec is None))


def _judge_only(out: Path, args: argparse.Namespace) -> int:
    from agentworld_tui.domains import DOMAINS
    from agentworld_tui.evaluation.bench import BenchError, BenchRun, load_samples
    from agentworld_tui.evaluation.official_files import (
        DEFAULT_TASK,
        import_predictions,
        official_file,
    )

    spec = _judge_spec(args)
    if spec is None:
        raise UserError(
            "give a judge: --judge-server URL --judge-model NAME, or --judge-model-path"
        )
    prompts = _judge_prompts(args)
    official = official_file(out)
    try:
        if official is None:
            run = BenchRun(out)
            info = run.require()
            samples = load_samples(
                Path(str(info["data"])),
                known=lambda name: name in DOMAINS,
                default_task=DEFAULT_TASK if info.get("imported") == "official" else "",
            )
        else:
            run = BenchRun(Path(args.out) if args.out else _official_out(official))
            imported = import_predictions(official, run)
            _say(
                f"{official}: {imported.added + imported.kept} generations of the official "
                f"evaluator ({imported.added} new); verdicts in {run.folder}"
            )
            for problem in imported.problems:
                _say(problem)
            samples = load_samples(
                official, known=lambda name: name in DOMAINS, default_task=DEFAULT_TASK
            )
            for problem in samples.problems:
                _say(problem)
    except BenchError as exc:
        raise UserError(str(exc)) from None
    status = _judge(run, samples, spec, prompts, args)
    status = max(status, _print_scores([str(run.folder)], args))
    if official is not None:
        _say(
            "to write them as the official evaluator's files: "
            f"agentworld bench export {run.folder} DEST_DIR"
        )
    return status


def _judge(
    run: BenchRun,
    samples: SampleSet,
    spec: EngineSpec,
    prompts: JudgePrompts,
    args: argparse.Namespace,
) -> int:
    from agentworld_tui.domains import DOMAINS
    from agentworld_tui.engines.base import EngineError
    from agentworld_tui.engines.factory import make_engine
    from agentworld_tui.evaluation.bench import BenchError
    from agentworld_tui.evaluation.judging import Judging, judge_run
    from agentworld_tui.judging.judge import JUDGE_PARAMS, JudgeSettings

    wanted = set(samples.by_domain())
    for problem in prompts.problems:
        if not any(f" for {d};" in problem for d in DOMAINS if d not in wanted):
            _say(problem)
    settings = JudgeSettings(
        replace(JUDGE_PARAMS, temperature=args.judge_temperature, max_tokens=args.judge_max_tokens),
        attempts=args.judge_attempts,
    )
    judge = make_engine(spec)
    try:
        judge.load()
    except EngineError as exc:
        raise UserError(f"judge: {exc}") from None
    judging = Judging(judge.info.name, prompts, settings)
    _say(
        f"judging with {judge.info.name} ({judge.info.where}); prompts: {prompts.label}; "
        f"{settings.describe()}"
    )
    try:
        summary = judge_run(
            judge,
            samples.samples,
            run,
            judging,
            concurrency=_concurrency(args.judge_concurrency, bool(spec.server)),
        )
    except BenchError as exc:
        raise UserError(str(exc)) from None
    finally:
        judge.unload()
    _say(summary.line())
    for problem in summary.problems:
        _say(f"  {problem}")
    return 1 if summary.failed else 0


def _score(paths: list[str], args: argparse.Namespace) -> int:
    if not 1 <= len(paths) <= 2:
        raise UserError("usage: agentworld bench score RUN [OTHER_RUN]")
    return _print_scores(paths, args)


def _print_scores(paths: list[str], args: argparse.Namespace, quiet_if_empty: bool = False) -> int:
    """Print the scores of each RUN: a run's folder, or the official evaluator's file."""
    from agentworld_tui.evaluation.bench import BenchError, BenchRun
    from agentworld_tui.evaluation.official_files import official_file, score_official
    from agentworld_tui.evaluation.results import ResultsError
    from agentworld_tui.evaluation.scores import (
        compare_table,
        identify,
        score_run,
        score_table,
        scores_json,
    )

    scores = []
    try:
        for path in map(Path, paths):
            official = official_file(path)
            if official is not None:
                found, problems = score_official(official)
                for problem in problems:
                    _say(problem)
                scores.append(found)
                continue
            run = BenchRun(path)
            if path.is_file():
                raise BenchError(
                    f"{path}: neither a bench run's folder nor the official evaluator's "
                    "predictions.jsonl or judged.jsonl"
                )
            found = score_run(run, _run_name(run))
            if len(paths) == 2:
                identify(run, found)
            scores.append(found)
    except (BenchError, ResultsError) as exc:
        raise UserError(str(exc)) from None
    if quiet_if_empty and not any(s.keys() for s in scores):
        return 0
    if args.json:
        sys.stdout.write(scores_json(*scores))
    elif len(scores) == 2:
        print(compare_table(scores[0], scores[1]))
    else:
        print(score_table(scores[0], raw=args.raw))
    return 0


def _export(out: Path, dest: Path) -> int:
    from agentworld_tui.evaluation.bench import BenchError, BenchRun
    from agentworld_tui.evaluation.official_files import export_run
    from agentworld_tui.evaluation.results import ResultsError

    try:
        done = export_run(BenchRun(out), dest)
    except (BenchError, ResultsError) as exc:
        raise UserError(str(exc)) from None
    _say(f"wrote {', '.join(str(p) for p in done.written)}")
    _say(f"predictions {done.predictions}, judged {done.judged}")
    if done.not_predicted:
        _say(f"{done.not_predicted} samples not predicted yet: left out")
    if done.not_judged:
        _say(f"{done.not_judged} predictions not judged yet: left out of {dest / 'judged.jsonl'}")
    return 0


# -- flags -------------------------------------------------------------------------------------
def _judge_spec(args: argparse.Namespace) -> EngineSpec | None:
    from agentworld_tui.engines.factory import EngineSpec

    spec = EngineSpec(
        server=args.judge_server or "",
        model=args.judge_model or "",
        model_path=args.judge_model_path or "",
        api_key_env=args.judge_api_key_env or "",
        n_ctx=args.judge_ctx or 0,
        threads=args.threads or 0,
        gpu_layers=-1 if args.gpu_layers is None else args.gpu_layers,
    )
    if spec.server and spec.model_path:
        raise UserError("give either --judge-server or --judge-model-path, not both")
    if spec.model and not spec.server:
        raise UserError("--judge-model names a model on --judge-server: give the server too")
    if spec.model_path and not Path(spec.model_path).expanduser().is_file():
        raise UserError(f"--judge-model-path: {spec.model_path}: no such file")
    if args.judge_max_tokens < 1:
        raise UserError("--judge-max-tokens must be 1 or more")
    if not 0 <= args.judge_temperature <= 2:  # also refuses NaN
        raise UserError("--judge-temperature must be from 0 to 2")
    if args.judge_attempts < 1:
        raise UserError("--judge-attempts must be 1 or more")
    return spec if spec.given else None


def _judge_prompts(args: argparse.Namespace) -> JudgePrompts:
    """The judge prompts to use: the folder given, or the project's own."""
    from agentworld_tui.domains import DOMAINS
    from agentworld_tui.judging.prompts import (
        JudgePromptsError,
        load_judge_prompts,
        project_prompts,
    )

    if not args.judge_prompts:
        return project_prompts()
    try:
        return load_judge_prompts(Path(args.judge_prompts), list(DOMAINS))
    except JudgePromptsError as exc:
        raise UserError(f"--judge-prompts: {exc}") from None


def _domains(values: list[str] | None) -> list[str]:
    from agentworld_tui.domains import DOMAINS

    names = [n.strip() for v in values or [] for n in v.split(",") if n.strip()]
    unknown = [n for n in names if n not in DOMAINS]
    if unknown:
        raise UserError(f"unknown domain {unknown[0]!r}; choose from {', '.join(DOMAINS)}")
    return names


def _concurrency(value: int | None, remote: bool) -> int:
    if value is not None and value < 1:
        raise UserError("concurrency must be 1 or more")
    if not remote:
        if value is not None and value > 1:
            _say("a local model answers one request at a time; running one at a time")
        return 1
    return value or DEFAULT_REMOTE_CONCURRENCY


def _default_out(data: Path, model: str) -> Path:
    from agentworld_tui.config import data_dir

    name = f"{data.resolve().name}-{Path(model).stem or model}"
    return data_dir() / "bench" / (re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.") or "run")


def _official_out(official: Path) -> Path:
    """Where verdicts on the official evaluator's file go unless --out says."""
    from agentworld_tui.config import data_dir

    source = official.resolve()
    name = f"{source.parent.name}-{source.stem}"
    return data_dir() / "bench" / (re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.") or "run")


def _run_name(run: BenchRun) -> str:
    info = run.info() or {}
    model = info.get("model")
    return f"{run.folder} ({model})" if model else str(run.folder)


def _say(message: str) -> None:
    print(f"agentworld: bench: {message}", file=sys.stderr)
