"""`dslc compile` and `dslc run`: the commands that need the optimiser and code generation."""
from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dslc.compiler.pipeline import compile_file
from dslc.runtime import exit_codes, run_env, secrets
from dslc.runtime.metrics import format_table
from dslc.runtime.spark import analysis_errors, failure


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
    """dslc run FILE [--mode ...] [--trigger ...] [--master URL | --remote sc://...] [-- spark-submit args]:
    compile to a temporary job and run it with spark-submit, or with this Python against a Spark
    Connect server; the temporary folder goes away however the run ends."""
    trigger = args.trigger
    if trigger and trigger != "available-now" and not trigger.startswith("every="):
        print(f"dslc: --trigger must be available-now or every=<duration>, got {trigger!r}", file=sys.stderr)
        return 2
    remote = getattr(args, "remote", None)
    if remote and (args.master or args.spark_args):
        print("dslc: --remote runs the job through Spark Connect: --master and spark-submit arguments "
              "after '--' do not apply (the server has its own master; use SET in the .flow file)", file=sys.stderr)
        return 2
    from dslc.compiler.pipeline import check_source
    from dslc.compiler.source import SourceFile

    source = SourceFile.read(args.file)
    checked = check_source(source, mode=args.mode)      # a CompileError: exit 2 (main)
    if not remote and not _writable(source, checked):
        return exit_codes.WRONG
    _moved_store(checked, Path(_flow_folder(source)))
    calls = _record_replay_env(args)
    log = _run_log(Path(args.file))
    calls = {**calls, failure.LOG_ENV: str(log)}
    secrets_env = _secrets_env(args, checked, optional=bool(getattr(args, "replay", None)))
    if secrets_env is None:
        return exit_codes.WRONG
    calls.update(secrets_env)
    with tempfile.TemporaryDirectory(prefix="dslc-run-") as folder:
        job = Path(folder) / (Path(args.file).stem + "_job.py")
        text = compile_file(args.file, job_folder=folder, mode=args.mode, trigger=trigger)
        job.write_text(text)
        jars = _jdbc_jars(args, text, remote)
        if jars is None:
            return 2
        watch = _watch_env(args, Path(folder))
        summary = getattr(args, "summary_json", None)
        if summary:
            from dslc.runtime.spark.outcome import SUMMARY_ENV
            Path(summary).unlink(missing_ok=True)       # a file left by an earlier run says nothing of this one
            watch[SUMMARY_ENV] = str(Path(summary).resolve())
        report = getattr(args, "report", None)
        if report:
            from dslc.compiler.optimizer.explain import render_physical
            from dslc.compiler.pipeline import check_file
            (Path(folder) / "plan.dot").write_text(render_physical(check_file(args.file), "dot"))
            watch.update({run_env.PLAN_DOT.name: str(Path(folder) / "plan.dot"),
                          run_env.METRICS_WRITTEN.name: str(Path(folder) / "metrics.path")})
        lineage = _lineage(args, checked, Path(_flow_folder(source)), Path(folder), watch)
        if remote:
            env = {**os.environ, "SPARK_REMOTE": remote, run_env.FLOW_FOLDER.name: str(Path(args.file).resolve().parent),
                   analysis_errors.FLOW_ENV: str(Path(args.file).resolve()),
                   **calls, **watch}
            code = _call([sys.executable, str(job)], env, where=f"Spark Connect {remote}")
        else:
            code = _submit(args, job, calls, log, watch, jars)
        if report:
            written = Path(folder) / "metrics.path"
            if written.is_file():
                write_report(Path(written.read_text()), Path(report))
            else:
                print("dslc: no report: the job wrote no metrics (it has no ENRICH or PROCESS, or it failed)",
                      file=sys.stderr)
    if lineage is not None:
        from dslc.compiler.cli.lineage_events import ended
        ended(lineage, code, exit_codes.meaning(code))
    if code == exit_codes.FAILED:
        print(f"dslc: the run failed (exit status {code}); Spark's full log: {log}", file=sys.stderr)
    elif code not in (exit_codes.DONE, exit_codes.INTERRUPTED, exit_codes.TERMINATED):
        print(f"dslc: the run ended with exit status {code} ({exit_codes.meaning(code)}); Spark's full log: {log}",
              file=sys.stderr)
    if getattr(args, "record", None):
        from dslc.runtime.wrappers.recording import consolidate
        written = consolidate(args.record)
        print(f"dslc: recorded the calls of {len(written)} ENRICH operator(s) in {args.record}", file=sys.stderr)
    return code


def _lineage(args: argparse.Namespace, checked, flow_folder: Path, folder: Path, watch: dict[str, str]):
    """--lineage DEST: START sent now, the driver told how to send RUNNING (`watch`); None without it."""
    dest = getattr(args, "lineage", None)
    if not dest:
        return None
    from dslc.compiler.cli.lineage_events import RunLineage
    from dslc.runtime.spark.lineage import LINEAGE_ENV

    lineage = RunLineage(checked, dest, flow_folder, streaming=checked.settings.mode == "STREAMING")
    lineage.emit(lineage.START)
    handoff = folder / "lineage.json"
    lineage.handoff(handoff, dest)
    watch[LINEAGE_ENV] = str(handoff)
    return lineage


def _run_log(flow: Path) -> Path:
    """Where a run keeps Spark's output (its log lines, executors' tracebacks) and, when the job
    fails, the job's traceback: `target/logs/` beside the .flow file, one file per run."""
    folder = flow.resolve().parent / "target" / "logs"
    folder.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path, n = folder / f"{flow.stem}-{stamp}.log", 2
    while path.exists():
        path, n = folder / f"{flow.stem}-{stamp}-{n}.log", n + 1
    path.touch()
    return path


def _jdbc_jars(args: argparse.Namespace, job_text: str, remote: str | None) -> list[str] | None:
    """spark-submit's `--jars` for a job that uses Spark's JDBC source or sink (None: the driver is
    missing, said on stderr); nothing for other jobs, or on Spark Connect (the server has its jars)."""
    from dslc.compiler.cli import jdbc_jar

    if remote or not jdbc_jar.needs_driver(job_text):
        return []
    try:
        return ["--jars", jdbc_jar.find(getattr(args, "jars", None))]
    except jdbc_jar.MissingDriver as exc:
        print(f"dslc: error: {exc}", file=sys.stderr)
        return None


def _submit(args: argparse.Namespace, job: Path, calls: dict[str, str], log: Path,
            watch: dict[str, str], jars: list[str] = ()) -> int:
    """spark-submit the job with dslc's defaults and the arguments after '--'. spark-submit's own
    stderr (Spark's log, executors' Python tracebacks) goes to `log`; its stdout (the job's
    Python: the metrics table, dslc's lines) to the terminal."""
    extra = args.spark_args
    master = args.master or "local[*]"
    python = os.environ.get("PYSPARK_PYTHON", sys.executable)
    command = spark_submit() + ["--master", master, "--conf", "spark.log.level=WARN", *_daemon(master, extra, python),
                                *_driver_python(extra), *jars, *extra, str(job)]
    env = {**os.environ, "PYSPARK_PYTHON": python,
           run_env.FLOW_FOLDER.name: str(Path(args.file).resolve().parent),
           analysis_errors.FLOW_ENV: str(Path(args.file).resolve()), **watch}
    if calls:
        env.update(calls)
        # executors started elsewhere (a cluster) get it through Spark; local ones inherit env.
        # The secrets' settings and the log stay with the driver: it ships the values inside the chain.
        command[-1:-1] = [a for k, v in calls.items() if k not in _DRIVER_ONLY
                          for a in ("--conf", f"spark.executorEnv.{k}={v}")]
    with open(log, "a", encoding="utf-8") as spark_log:
        return _call(command, env, stderr=spark_log, where=master)


def _daemon(master: str, extra: list[str], python: str) -> list[str]:
    """On a local master whose Python workers run this Python, workers forked from dslc's daemon
    (runtime/spark/daemon.py: compiled PySpark, the chain's modules loaded once). Spark's own
    daemon where dslc may be missing: a cluster's executors (local-cluster[...] too), another
    Python named for the workers, or a daemon the user names."""
    if master != "local" and not master.startswith("local["):
        return []
    if any("spark.pyspark.python" in arg or "spark.python.daemon.module" in arg for arg in extra):
        return []
    if os.path.realpath(shutil.which(python) or python) != os.path.realpath(sys.executable):
        return []
    return ["--conf", "spark.python.daemon.module=dslc.runtime.spark.daemon"]


_DRIVER_ONLY = (secrets.FILE_ENV, secrets.OPTIONAL_ENV, failure.LOG_ENV)


def _writable(source, checked) -> bool:
    """Every SINK folder and dead-letter path can be written (compiler/plan/writable.py), else
    the diagnostics are printed: before Spark starts, so before any call is paid for."""
    from dslc.compiler.diagnostics import CompileError
    from dslc.compiler.plan.writable import unwritable

    problems = unwritable(checked, Path(_flow_folder(source)), source.text)
    if problems:
        print(CompileError(source, problems).render(), file=sys.stderr)
    return not problems


def _moved_store(checked, folder: Path) -> None:
    """Say so when the pipeline's answer store is still where it was before it moved under
    target/ (compiler/plan/answer_store.py): its answers are not used until it is moved."""
    from dslc.compiler.plan import answer_store

    legacy = answer_store.legacy_location(checked.settings)
    if legacy is None or not any(getattr(n, "store", None) for n in checked.nodes):
        return
    old, new = folder / legacy, folder / answer_store.DEFAULT_LOCATION
    if old.is_file() and not new.exists():
        print(f"dslc: note: the answer store of a pipeline without ANSWERS is now {new} (one for BATCH and "
              f"STREAMING runs); the answers kept in {old} are not used: move it (with its -wal and -shm "
              f"files) there, or name it with ANSWERS '{legacy}'", file=sys.stderr)


def _flow_folder(source) -> str:
    """The folder of the .flow file, against which its paths are resolved."""
    return str(Path(source.path).resolve().parent)


def _secrets_env(args: argparse.Namespace, checked, optional: bool) -> dict[str, str] | None:
    """Check, before Spark starts, that every `${NAME}` secret of the pipeline is set (in
    --secrets FILE or this process's environment); the job's driver reads them again itself.
    None (after printing which secret and where it was looked for) when one is missing."""
    file = getattr(args, "secrets", None)
    env: dict[str, str] = {}
    if file:
        if not os.path.isfile(file):
            print(f"dslc: error: --secrets: no file {file}", file=sys.stderr)
            return None
        env[secrets.FILE_ENV] = str(Path(file).resolve())
        os.environ[secrets.FILE_ENV] = env[secrets.FILE_ENV]   # compiling may read a database's columns
    if optional:
        env[secrets.OPTIONAL_ENV] = "1"      # replayed: no call is sent, no secret is needed
        return env
    from dslc.compiler.codegen.lower import pipeline_secrets

    names = pipeline_secrets(checked)
    try:
        secrets.read(names, file=env.get(secrets.FILE_ENV))
    except secrets.MissingSecret as exc:
        print(f"dslc: error: {exc}", file=sys.stderr)
        return None
    return env


def _record_replay_env(args: argparse.Namespace) -> dict[str, str]:
    """The environment that switches on runtime/wrappers/recording.py in the job's Python workers."""
    from dslc.runtime.wrappers import recording

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


def write_report(metrics: Path, output: Path) -> None:
    """The HTML page of a metrics file (compiler/report/page.py)."""
    import json

    from dslc.compiler.report.page import render
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(render(json.loads(metrics.read_text(encoding="utf-8"))), encoding="utf-8")
    print(f"dslc: report written to {output}", file=sys.stderr)


def cmd_report(args: argparse.Namespace) -> int:
    """dslc report METRICS.json -o FILE.html."""
    import json

    try:
        write_report(Path(args.file), Path(args.output))
    except json.JSONDecodeError as exc:
        print(f"{args.file}: error: not a metrics file (JSON): {exc}", file=sys.stderr)
        return 1
    return 0


def cmd_test(args: argparse.Namespace) -> int:
    """dslc test [PATH ...]."""
    from dslc.testing.runner import run_paths
    return run_paths(args.paths, keep=args.keep, verbose=getattr(args, "verbose", False))


def _driver_python(extra: list[str]) -> list[str]:
    """The job's driver must be this Python (it has dslc) even when `spark.pyspark.python` names the
    executors' Python, which spark-submit would otherwise use for the driver too."""
    if any("spark.pyspark.driver.python" in a for a in extra) or os.environ.get("PYSPARK_DRIVER_PYTHON"):
        return []
    return ["--conf", f"spark.pyspark.driver.python={sys.executable}"]


def _watch_env(args: argparse.Namespace, folder: Path) -> dict[str, str]:
    """On a terminal, the job's driver writes its live figures to a file that `dslc run` draws as
    a table (compiler/cli/live.py); otherwise the driver prints a line every 10 s itself."""
    from dslc.runtime.spark.progress import PROGRESS_FILE_ENV
    if sys.stderr.isatty() and not run_env.PROGRESS.switched_off():
        return {PROGRESS_FILE_ENV: str(folder / "progress.json")}
    return {}


def _call(command: list[str], env: dict[str, str], stderr=None, where: str = "local[*]") -> int:
    """Run spark-submit; on Ctrl-C or SIGTERM stop it (it got Ctrl-C too) and return 130 / 143.
    `stderr`: where spark-submit's stderr goes (the run's log). With live progress on a terminal,
    its output passes through the live table (live.py), which says that Spark is starting on
    `where` until the job's first figures; otherwise one line says so. spark-submit is killed
    when `dslc run` dies, however it dies (runtime/spark/orphans.py)."""
    from dslc.runtime.spark.orphans import parent_death_signal
    from dslc.runtime.spark.progress import PROGRESS_FILE_ENV
    progress = env.get(PROGRESS_FILE_ENV)
    if progress is None:
        print(f"dslc: starting Spark ({where})…", file=sys.stderr, flush=True)
        return _wait(subprocess.Popen(command, env=env, stderr=stderr, preexec_fn=parent_death_signal()))
    from dslc.compiler.cli.live import LiveProgress, pass_through
    with LiveProgress(Path(progress), where=where) as live:
        process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                                   stderr=stderr if stderr is not None else subprocess.STDOUT,
                                   preexec_fn=parent_death_signal())
        copier = pass_through(process.stdout, live)
        try:
            return _wait(process)
        finally:
            copier.join(timeout=5)


def _wait(process: subprocess.Popen) -> int:
    """The job's exit status; Ctrl-C and SIGTERM passed on to it (130 / 143)."""

    def terminated(signum, frame):
        raise _Terminated()

    previous = signal.signal(signal.SIGTERM, terminated)
    try:
        return process.wait()
    except KeyboardInterrupt:
        _stop(process, signal.SIGINT)
        return 130
    except _Terminated:
        _stop(process, signal.SIGTERM)
        return 143
    finally:
        signal.signal(signal.SIGTERM, previous)


class _Terminated(Exception):
    """SIGTERM reached `dslc run`."""


def _stop(process: subprocess.Popen, signum: int) -> None:
    """Pass the signal on, give spark-submit 30 s to stop its job, then kill it."""
    if process.poll() is None:
        process.send_signal(signum)
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


render_metrics = format_table   # the table the job prints at its end (kept for callers of the old name)


def cmd_repl(args: argparse.Namespace) -> int:
    """dslc repl [FILE]."""
    from dslc.compiler.cli.repl import run_repl
    return run_repl(args.file, spark=not getattr(args, "no_spark", False))


def cmd_lsp(args: argparse.Namespace) -> int:
    """dslc lsp: the language server for editors, over stdin/stdout."""
    from dslc.compiler.lsp.server import main as serve
    return serve(spark=getattr(args, "spark", False), db=getattr(args, "db", False))


EXTRA_COMMANDS = {"compile": cmd_compile, "run": cmd_run, "repl": cmd_repl, "test": cmd_test, "lsp": cmd_lsp,
                  "report": cmd_report}
