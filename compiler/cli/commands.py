"""`dslc compile` and `dslc run`: the commands that need the optimiser and code generation."""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from dslc.compiler.pipeline import compile_file


def cmd_compile(args: argparse.Namespace) -> int:
    """dslc compile FILE [-o job.py] [--mode batch|streaming]."""
    output = Path(args.output) if args.output else None
    code = compile_file(args.file, job_folder=str((output or Path("job.py")).resolve().parent), mode=args.mode,
                        chaining=not args.no_chaining, pushdown=not args.no_pushdown)
    if output is None:
        sys.stdout.write(code)
        return 0
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(code)
    print(f"wrote {output}", file=sys.stderr)
    return 0


def spark_submit() -> list[str]:
    """The spark-submit of the installed PySpark (or the one on PATH)."""
    import pyspark

    bundled = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    if bundled.is_file():
        return [str(bundled)]
    found = shutil.which("spark-submit")
    if found is None:
        raise SystemExit("dslc: spark-submit not found: pip install pyspark, or put Spark's bin on PATH")
    return [found]


def cmd_run(args: argparse.Namespace) -> int:
    """dslc run FILE [--mode ...] [--trigger ...] [--master URL] [-- spark-submit args]: compile to a
    temporary job and run it with spark-submit."""
    folder = Path(tempfile.mkdtemp(prefix="dslc-run-"))
    job = folder / (Path(args.file).stem + "_job.py")
    trigger = args.trigger
    if trigger and trigger != "available-now" and not trigger.startswith("every="):
        print(f"dslc: --trigger must be available-now or every=<duration>, got {trigger!r}", file=sys.stderr)
        return 2
    job.write_text(compile_file(args.file, job_folder=str(folder), mode=args.mode, trigger=trigger))
    extra = args.spark_args
    command = spark_submit() + ["--master", args.master or "local[*]", "--conf", "spark.log.level=WARN",
                                *extra, str(job)]
    metrics_file = folder / "metrics.json"
    env = {**os.environ, "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable),
           "DSLC_FLOW_FOLDER": str(Path(args.file).resolve().parent), "DSLC_METRICS_FILE": str(metrics_file)}
    calls = _record_replay_env(args)
    if calls:
        env.update(calls)
        # executors started elsewhere (a cluster) get it through Spark; local ones inherit env
        command[-1:-1] = [a for k, v in calls.items() for a in ("--conf", f"spark.executorEnv.{k}={v}")]
    code = subprocess.call(command, env=env)
    if getattr(args, "record", None):
        from dslc.runtime.recording import consolidate
        written = consolidate(args.record)
        print(f"dslc: recorded the calls of {len(written)} ENRICH operator(s) in {args.record}", file=sys.stderr)
    if metrics_file.is_file():
        print(render_metrics(json.loads(metrics_file.read_text())))
    return code


def _record_replay_env(args: argparse.Namespace) -> dict[str, str]:
    """The environment that switches on runtime/recording.py in the job's Python workers."""
    from dslc.runtime import recording

    record, replay = getattr(args, "record", None), getattr(args, "replay", None)
    if record and replay:
        raise SystemExit("dslc: --record and --replay cannot be used together")
    if record:
        Path(record).mkdir(parents=True, exist_ok=True)
        return {recording.RECORD_ENV: recording.setting_json(record)}
    if replay:
        if not Path(replay).is_dir():
            raise SystemExit(f"dslc: --replay: no recording folder {replay}")
        return {recording.REPLAY_ENV: recording.setting_json(
            replay, unrecorded=args.replay_unrecorded, latency=args.replay_latency)}
    return {}


def cmd_test(args: argparse.Namespace) -> int:
    """dslc test [PATH ...]."""
    from dslc.testing.runner import run_paths
    return run_paths(args.paths, keep=args.keep)


def render_metrics(metrics: dict[str, dict]) -> str:
    """The per-operator summary `dslc run` prints at the end."""
    columns = ("elements_in", "elements_out", "calls", "retries", "timeouts", "misses", "errors",
               "dead_letters", "cache_hits", "max_in_flight", "blocked_seconds", "p50_ms", "p99_ms")
    width = max(len("operator"), *(len(n) for n in metrics))
    head = "operator".ljust(width) + "  " + "  ".join(c for c in columns)
    lines = ["dslc: per-operator metrics", head]
    for name in sorted(metrics):
        m = metrics[name]
        cells = ("-" if m.get(c) is None else str(m[c]) for c in columns)   # no calls: no latency
        lines.append(name.ljust(width) + "  " + "  ".join(cell.rjust(len(c)) for cell, c in zip(cells, columns)))
    return "\n".join(lines)


def cmd_repl(args: argparse.Namespace) -> int:
    """dslc repl [FILE]."""
    from dslc.compiler.cli.repl import run_repl
    return run_repl(args.file)


EXTRA_COMMANDS = {"compile": cmd_compile, "run": cmd_run, "repl": cmd_repl, "test": cmd_test}
