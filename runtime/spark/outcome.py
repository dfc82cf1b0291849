"""The outcome of a run, on the driver: what it read, wrote and dead-lettered, what its answers
cost, how long it took and how it ended (its exit code).

The generated job registers its sources, sinks and dead-letter paths here as it builds them (each
source and sink counted by a Spark observation, which costs one aggregate per query), its
MetricsCollector the operators' figures; `failure.run_main` calls `finish` with the exit code
whatever happened. The outcome is printed as the run's last lines, kept in the metrics JSON (the
report's header reads it there), and written as JSON to $DSLC_SUMMARY_JSON (`dslc run
--summary-json FILE`, for schedulers). docs/operations.md, "The outcome of a run".
"""
from __future__ import annotations

import datetime as dt
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from dslc.runtime import exit_codes
from dslc.runtime.metrics import top_errors

#: Where `dslc run --summary-json FILE` wants the outcome written.
SUMMARY_ENV = "DSLC_SUMMARY_JSON"


class RunStop(Exception):
    """A stop the job's driver decides itself (dead letters over their ceiling, a sink that
    cannot be written): its message (the line after `dslc: error: `) and exit code."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


class Run:
    """One run of a job (one `main()`)."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.started_at = dt.datetime.now(dt.timezone.utc)
        self.collector: Any = None                     # the job's MetricsCollector
        self.sources: dict[str, Any] = {}              # SOURCE name -> its counter (counters.py)
        self.sinks: dict[str, dict[str, Any]] = {}     # SINK's stream -> line, path, counter
        self.dead_letters: dict[str, tuple[str, ...]] = {}   # path -> the operators writing there
        self.enrich: dict[str, Any] = {}               # ENRICH name -> its config (C.Enrich), as run
        self.operators: dict[str, dict[str, Any]] = {}  # the operators' figures, once reported
        self.metrics_path: str | None = None
        self.reported = False


_run: Run | None = None


def begin() -> Run:
    """A new run starts (`failure.run_main`, before the job's main())."""
    global _run
    _run = Run()
    return _run


def current() -> Run:
    """This process's run (one begun on demand, for a job's main() called directly)."""
    return _run if _run is not None else begin()


def watch(collector: Any) -> None:
    """The job's MetricsCollector: its figures are the run's."""
    current().collector = collector


def dead_letters(path: str, operators: tuple[str, ...]) -> None:
    """The dead letters of `operators` are written to `path`."""
    run = current()
    run.dead_letters[path] = tuple(dict.fromkeys(run.dead_letters.get(path, ()) + tuple(operators)))


def operators(configs: tuple) -> None:
    """A chain's operators run in this job (their ENRICH configs, for the ceiling)."""
    run = current()
    for op in configs:
        if getattr(op, "ceiling", False) is not False:      # an ENRICH (C.Enrich)
            run.enrich[op.name] = op


def report_metrics() -> None:
    """A run that stops before its report: report what ran (the operators' figures)."""
    run = _run
    if run is not None and run.collector is not None and not run.reported:
        try:
            run.collector.report(ceiling_stops=False)
        except Exception:  # noqa: BLE001 - the stop's own line matters more than the figures
            pass


def reported(operators: dict[str, dict[str, Any]], path: str | None) -> None:
    """The collector reported: the operators' merged figures and the metrics file it wrote."""
    run = current()
    run.operators, run.metrics_path, run.reported = operators, path, True


def finish(code: int) -> dict[str, Any] | None:
    """The run ended with exit code `code`: its outcome, printed, added to the metrics file and
    written to $SUMMARY_ENV. None (nothing printed) for a run that registered nothing."""
    global _run
    run, _run = _run, None
    if run is None:
        return None
    document = {"exit_code": code, "ended": exit_codes.meaning(code),
                "duration_s": round(time.monotonic() - run.started, 3),
                "started_at": run.started_at.isoformat(timespec="seconds")}
    summary_file = os.environ.get(SUMMARY_ENV)
    if summary_file:
        Path(summary_file).parent.mkdir(parents=True, exist_ok=True)
        Path(summary_file).write_text(json.dumps(document, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return document


def dead_letter_errors(operators: dict[str, dict[str, Any]], names: tuple[str, ...]) -> list[tuple[str, int]]:
    """The top 3 error messages of the elements `names` dead-lettered, with their counts."""
    merged: dict[str, int] = {}
    for name in names:
        for label, n in (operators.get(name, {}).get("error_messages") or {}).items():
            merged[label] = merged.get(label, 0) + n
    return top_errors(merged)


def _print(lines: list[str]) -> None:
    for line in lines:
        print(line, file=sys.stderr)
    sys.stderr.flush()
