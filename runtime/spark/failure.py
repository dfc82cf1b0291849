"""A failed job ends with dslc's one clear line, not Spark's tracebacks.

Spark wraps a Python worker's error in a Py4J/PythonException whose text holds the worker's
whole traceback (and a streaming query's failure wraps that again); what the user needs is its
last line from dslc's runtime (`operator 'x' (line N) failed on element ...`). Under `dslc run`
(DSLC_RUN_LOG set) the full traceback goes to the run's log file and the job prints the line;
run as `python job.py` or spark-submit by hand, the error is raised as usual.
"""
from __future__ import annotations

import logging
import os
import re
import sys
import traceback
from typing import Callable

from .analysis_errors import located
from .progress import close_all

#: The log file `dslc run` keeps Spark's output in; the traceback of a failed job is added to it.
LOG_ENV = "DSLC_RUN_LOG"

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
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return f"{type(error).__name__}: {first}" if first else type(error).__name__


def run_main(main: Callable[[], object]) -> None:
    """`main()` of a generated job; under `dslc run`, a failure is one line on stderr (the
    traceback in the run's log) and exit status 1."""
    log = os.environ.get(LOG_ENV)
    try:
        if not log:
            try:
                main()
            except Exception as error:  # noqa: BLE001 - an EXPECT's FAIL ends the job with its own code
                _stop_on_expectation(error)
                raise
            return
        # PySpark logs each refused query with Java's stack trace on the console; the run shows
        # it once, at its .flow line, and keeps the trace in the log
        logging.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)
        try:
            main()
        except Exception as error:  # noqa: BLE001 - every failure ends the job the same way
            with open(log, "a", encoding="utf-8") as file:
                file.write("\n--- the job's traceback ---\n")
                traceback.print_exc(file=file)
            _stop_on_expectation(error)
            placed = located(error)         # a query Spark refused, at its line of the .flow file
            print(placed if placed is not None else f"dslc: error: {clear_line(error)}", file=sys.stderr, flush=True)
            sys.exit(1)
    finally:
        close_all()   # a failed job never reached its report, which stops its live progress


def _stop_on_expectation(error: BaseException) -> None:
    """A row broke an EXPECT's FAIL constraint: its one line, and exit code 4 (expectations.py)."""
    from .expectations import EXIT_CODE, failed_expectation

    said = failed_expectation(error)
    if said is not None:
        print(f"dslc: error: {said}", file=sys.stderr, flush=True)
        raise SystemExit(EXIT_CODE) from None
