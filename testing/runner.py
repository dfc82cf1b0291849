"""`dslc test [PATH ...]`: every case of every `*.test.yaml`, one Spark session, a short report."""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, TextIO

from .case_file import CaseFileError, TestFile, find, load
from .harness import CaseResult, check_pipeline, run_prepared

_LOG4J = """\
rootLogger.level = warn
rootLogger.appenderRef.file.ref = file
appender.file.type = File
appender.file.name = file
appender.file.fileName = {path}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{{yy/MM/dd HH:mm:ss}} %p %c{{1}}: %m%n%ex
"""


def spark_log() -> Path:
    """Where a `dslc test` run keeps Spark's log (its tasks' tracebacks among it), so the report
    shows each case's one clear line: a file in the temporary folder (a test run writes nothing
    beside the pipeline)."""
    return Path(tempfile.gettempdir()) / f"dslc-test-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"


def session(log: Path | None = None):
    """The local Spark session every case shares (an active one is reused, e.g. pytest's); a new
    one writes Spark's log to `log` instead of the terminal, and so does its JVM's own stdout and
    stderr (`WARNING: Using incubator modules` is printed by the JVM before any logger runs)."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    settings = {
        "spark.master": os.environ.get("DSLC_MASTER", "local[2]"), "spark.app.name": "dslc-test",
        "spark.ui.enabled": "false", "spark.sql.session.timeZone": "UTC", "spark.sql.shuffle.partitions": "2",
        "spark.ui.showConsoleProgress": "false", "spark.log.level": "ERROR",
    }
    if log is None or SparkSession.getActiveSession() is not None:
        builder = SparkSession.builder
        for key, value in settings.items():
            builder = builder.config(key, value)
        return builder.getOrCreate()
    config = log.with_suffix(".log4j2.properties")
    config.write_text(_LOG4J.format(path=log))
    settings["spark.driver.extraJavaOptions"] = f"-Dlog4j2.configurationFile=file:{config}"
    return _quiet_session(settings, log)


def _quiet_session(settings: dict[str, str], log: Path):
    """A new session whose JVM writes its stdout and stderr to `log` (appended)."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway
    from pyspark.sql import SparkSession

    conf = SparkConf(loadDefaults=True).setAll(list(settings.items()))
    with open(log, "ab") as out:
        gateway = launch_gateway(conf, popen_kwargs={"stdout": out, "stderr": out})
    return SparkSession(SparkContext(conf=conf, gateway=gateway))


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in text)[:40] or "case"


def run_file(test_file: TestFile, spark, work: Path, only: str | None = None, verbose: bool = False,
             done: Callable[[CaseResult], None] | None = None) -> list[CaseResult]:
    """Every case of one test file (or the one named `only`); `done` is told of each as it ends."""
    cases = [c for c in test_file.cases if only is None or c.name == only]
    if only is not None and not cases:
        names = ", ".join(repr(c.name) for c in test_file.cases)
        raise CaseFileError(f"{test_file.path}: no case named {only!r} (cases: {names})")
    plan = check_pipeline(test_file.pipeline)
    results = []
    for index, case in enumerate(cases):
        if case.problem:
            result = CaseResult(case.name, False, error=case.problem)
        else:
            try:
                result = run_prepared(spark, plan, case, work / f"{index:03d}-{_slug(case.name)}", verbose)
            except CaseFileError as exc:
                result = CaseResult(case.name, False, error=str(exc))
        results.append(result)
        if done is not None:
            done(result)
    return results


def _print_result(result: CaseResult, out: TextIO) -> None:
    mark = "PASS" if result.passed else ("ERROR" if result.error else "FAIL")
    print(f"  {mark:<5} {result.name} ({result.seconds:.1f}s)", file=out)
    if not result.passed:
        for line in result.report().splitlines():
            print(f"        {line}", file=out)


def run_paths(paths: list[str], out: TextIO = sys.stdout, keep: bool = False, spark=None, verbose: bool = False) -> int:
    """Find and run test files; print one line per case as it ends, and the summary line; 0 when
    all passed. `verbose`: each case's live progress, metrics table and diagnosis too. `spark`:
    the session to use (the REPL's); default: the active one or a new local one."""
    try:
        files = find(paths or ["."])
    except CaseFileError as exc:
        print(f"dslc: error: {exc}", file=out)
        return 1
    if not files:
        print(f"dslc: error: no *.test.yaml files under {', '.join(paths or ['.'])}", file=out)
        return 1
    counts = {"passed": 0, "failed": 0, "errors": False}

    def done(result: CaseResult) -> None:
        _print_result(result, out)
        counts["passed"] += result.passed
        counts["failed"] += not result.passed
        counts["errors"] = counts["errors"] or bool(result.error)
        out.flush()

    log = spark_log() if spark is None else None
    work = Path(tempfile.mkdtemp(prefix="dslc-test-"))
    try:
        for index, path in enumerate(files):
            print(path, file=out)
            out.flush()
            try:
                test_file = load(path)
                spark = spark or session(log)
                run_file(test_file, spark, work / f"{index:03d}-{_slug(path.stem)}", verbose=verbose, done=done)
            except CaseFileError as exc:
                print(f"  ERROR {exc}", file=out)
                counts["failed"] += 1
                continue
    finally:
        if keep:
            print(f"dslc: case folders kept in {work}", file=out)
        else:
            shutil.rmtree(work, ignore_errors=True)
    print(f"{counts['passed']} passed, {counts['failed']} failed", file=out)
    if counts["errors"] and log is not None and log.is_file() and log.stat().st_size:
        print(f"dslc: Spark's full log: {log}", file=out)
    return 0 if counts["failed"] == 0 else 1
