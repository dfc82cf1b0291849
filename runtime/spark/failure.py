"""A failed job ends with dslc's one clear line, not Spark's tracebacks.

Spark wraps a Python worker's error in a Py4J/PythonException whose text holds the worker's
whole traceback (and a streaming query's failure wraps that again); what the user needs is its
last line from dslc's runtime (`operator 'x' (line N) failed on element ...`). Under `dslc run`
(DSLC_RUN_LOG set) the full traceback goes to the run's log file and the job prints the line;
run as `python job.py` or spark-submit by hand, the error is raised as usual. The run's stops
(refused credentials, a spent BUDGET, dead letters over their ceiling, ...) end it with their own
exit codes either way (runtime/exit_codes.py).
"""
from __future__ import annotations

import logging
import re
import sys
import traceback
from typing import Callable

from dslc.runtime import exit_codes, run_env
from dslc.runtime.store import run_hold

from . import outcome
from .analysis_errors import located
from .causes import spark_cause
from .outcome import RunStop
from .progress import close_all

#: The log file `dslc run` keeps Spark's output in; the traceback of a failed job is added to it.
LOG_ENV = run_env.RUN_LOG.name

_DSLC_ERROR = re.compile(r"^dslc\.runtime\.[\w.]+: (.+)$", re.MULTILINE)
_ANY_ERROR = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?([A-Za-z_]\w*(?:Error|Exception|Failure)): (.+)$", re.MULTILINE)


def clear_line(error: BaseException) -> str:
    """The line a user needs: the innermost error dslc's runtime raised, else the innermost
    error of the text (a Python worker's), else the first line of the message (Spark's own
    errors: `[PATH_NOT_FOUND] Path does not exist: ...`)."""
    text = str(error)
    found = _DSLC_ERROR.findall(text)
    if found:
        return found[-1].strip()
    if "Traceback (most recent call last)" in text:
        found = _ANY_ERROR.findall(text)
        if found:
            name, message = found[-1]
            return f"{name}: {message.strip()}"
    if getattr(error, "java_exception", None) is not None:     # not py4j's "An error occurred while calling o106.save"
        return spark_cause(error)
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return f"{type(error).__name__}: {first}" if first else type(error).__name__


#: The run's stops the runtime raises on executors, found by name in a failed job's text (Spark
#: carries a worker's exception as text), with the exit code each ends the run with.
STOPS = {"CredentialsRefused": exit_codes.WRONG, "ServiceUnreachable": exit_codes.FAILED,
         "BudgetSpent": exit_codes.BUDGET, "OutageStop": exit_codes.FAILED, "StoreLost": exit_codes.FAILED}
_STOP = re.compile(r"\b(" + "|".join(STOPS) + r"): (.+)$", re.MULTILINE)


def classify(error: BaseException) -> tuple[int, str]:
    """The exit code of a job that failed with `error`, and the line it prints."""
    if isinstance(error, RunStop):
        return error.code, f"dslc: error: {error}"
    from .expectations import failed_expectation
    said = failed_expectation(error)        # a row broke an EXPECT's FAIL constraint
    if said is not None:
        return exit_codes.EXPECTATION, f"dslc: error: {said}"
    found = _STOP.findall(str(error))
    if found:
        name, message = found[-1]
        if name == "BudgetSpent":       # as BATCH says it: not an error, a stop
            return STOPS[name], "dslc: " + message[message.find("BUDGET "):].strip()
        return STOPS[name], f"dslc: error: {message.strip()}"
    placed = located(error)         # a query Spark refused, at its line of the .flow file
    if placed is not None:
        return exit_codes.WRONG, placed
    return exit_codes.FAILED, f"dslc: error: {clear_line(error)}"


def run_main(main: Callable[[], object]) -> None:
    """`main()` of a generated job. A stop the runtime knows (refused credentials, a spent
    BUDGET, dead letters over their ceiling...) ends the job with its one line and its exit code
    (runtime/exit_codes.py), the metrics of what ran before it printed. Under `dslc run`
    (DSLC_RUN_LOG set) any other failure is one line on stderr too (the traceback in the run's
    log) and exit status 1; run by hand, it is raised as usual."""
    log = run_env.RUN_LOG.get()
    code, line = exit_codes.DONE, None
    if log:         # under `dslc run`: the JVM (or `dslc run`) gone, this driver goes too
        from .orphans import die_with_parent
        die_with_parent(group=False)
    outcome.begin()
    try:
        if log:
            # PySpark logs each refused query with Java's stack trace on the console; the run shows
            # it once, at its .flow line, and keeps the trace in the log
            logging.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)
        try:
            main()
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else exit_codes.FAILED)
            raise
        except KeyboardInterrupt:
            code = exit_codes.INTERRUPTED
            raise
        except Exception as error:  # noqa: BLE001 - every failure ends the job the same way
            code, line = classify(error)
            if log:
                with open(log, "a", encoding="utf-8") as file:
                    file.write("\n--- the job's traceback ---\n")
                    traceback.print_exc(file=file)
            elif code == exit_codes.FAILED:
                raise       # run by hand: as usual
            outcome.report_metrics()     # what ran before the stop
            print(line, file=sys.stderr, flush=True)
            raise SystemExit(code) from None
    finally:
        outcome.finish(code, line)
        close_all()   # a failed job never reached its report, which stops its live progress
        run_hold.release_all()      # `dslc store clear` may empty the stores again

