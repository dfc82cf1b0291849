"""Under `dslc run`, Spark's analyzer looks at every query of the .flow file before the job's
first action, in the job's own session (its JVM is running already).

Without this, a query Spark refuses fails the job only when the job reaches it: after the
actions before it (a BROADCAST collected, an ENRICH's dead letters written, calls paid) and
only the first such query. Here the job checks the .flow file as `dslc check --spark` does
(compiler/plan/dry_run.py: each query over empty tables of the declared schemas, in statement
order, in a new session of the same JVM), prints every error at its line and column, and exits
with status 1 before reading a row. It costs the fast check plus one analysis per query
(bench/run_preflight.py measures it against the job's start-up).

Only when DSLC_FLOW_FILE is set (`dslc run`, also `--remote`: a Spark Connect session's
newSession() is a session of the server, which analyzes the queries the same way); a job run by
hand (`python job.py`, spark-submit) may not have the compiler, and an error Spark raises later
is still placed by analysis_errors.located.
"""
from __future__ import annotations

import os
import sys

from dslc.runtime import run_env

#: "0" turns the check off (the job then fails at the first refused query, as before).
PREFLIGHT_ENV = run_env.SPARK_PREFLIGHT.name


class RefusedBySpark(SystemExit):
    """Spark's analyzer refused queries of the .flow file; the diagnostics are printed already."""


def check_before_start(spark) -> None:
    """Print every query Spark refuses as `file:line:col: error[E0212]: ...` and exit 1, or return."""
    path = run_env.FLOW_FILE.get()
    if not path or run_env.SPARK_PREFLIGHT.switched_off():
        return
    try:
        from dslc.compiler.diagnostics import CompileError
        from dslc.compiler.pipeline import check_partial
        from dslc.compiler.plan.dry_run import dry_run
        from dslc.compiler.source import SourceFile
    except ImportError:     # a driver without the compiler: the job's own analysis still places the first
        return
    shown = os.path.relpath(path)
    source = SourceFile.read(path)
    source = SourceFile(shown if not shown.startswith("..") else path, source.text)
    try:
        checked, fast = check_partial(source)
    except CompileError:    # `dslc run` checked the file before compiling it: nothing new to say
        return
    try:
        problems, _ = dry_run(checked, source, spark, reported=fast)
    except Exception as exc:  # noqa: BLE001 - a best-effort check never stops a job that would run
        # (a Spark Connect client older than 4.3 has no newSession(), a server that refuses one...)
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        print(f"dslc: Spark's analyzer could not check the queries before the start ({first}); "
              "the job goes on", file=sys.stderr, flush=True)
        return
    if problems:
        print(CompileError(source, problems).render(), file=sys.stderr, flush=True)
        raise RefusedBySpark(1)
