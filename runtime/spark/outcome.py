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
from dslc.runtime.wrappers import recording

#: Where `dslc run --summary-json FILE` wants the outcome written.
SUMMARY_ENV = "DSLC_SUMMARY_JSON"


_FAILED = (exit_codes.FAILED, exit_codes.WRONG, exit_codes.INTERRUPTED, exit_codes.TERMINATED)


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
        self.pipeline = "pipeline"
        self.folder: str | None = None                 # the .flow file's folder
        self.checks_ceiling = True


_run: Run | None = None


def begin(checks_ceiling: bool = True) -> Run:
    """A new run starts (`failure.run_main`, before the job's main()); `checks_ceiling` False: its
    dead letters never stop it (a `dslc test` case, which says which it expects)."""
    global _run
    _run = Run()
    _run.checks_ceiling = checks_ceiling
    return _run


def discard() -> None:
    """Forget this process's run without an outcome (a `dslc test` case)."""
    global _run
    _run = None


def current() -> Run:
    """This process's run (one begun on demand, for a job's main() called directly)."""
    return _run if _run is not None else begin()


def watch(collector: Any) -> None:
    """The job's MetricsCollector: its figures are the run's."""
    run = current()
    run.collector = collector
    try:
        run.pipeline = collector._spark.conf.get("spark.app.name", None) or run.pipeline
        run.folder = collector._spark.conf.get("spark.dslc.flow.folder", None)
    except Exception:  # noqa: BLE001 - a session that will not say
        pass


def source(name: str, count: Any) -> None:
    """SOURCE `name` is read, its rows counted by `count` (counting.Count)."""
    current().sources[name] = count


def sink(name: str, line: int, path: str | None, count: Any, query: Any = None) -> dict[str, Any]:
    """The SINK of stream `name` at `line` writes to `path`, its rows counted by `count` (its
    streaming query, if any)."""
    record = {"name": name, "line": line, "path": path, "count": count, "query": query,
              "written": query is not None}     # BATCH: once its write finished (sinks.writing)
    current().sinks[f"{name} (line {line})"] = record
    return record


def sink_of(query: Any) -> dict[str, Any] | None:
    """The SINK a streaming query writes, if it is one."""
    run = _run
    if run is None:
        return None
    return next((s for s in run.sinks.values() if s.get("query") is query), None)


def dead_letters(path: str, operators: tuple[str, ...]) -> None:
    """The dead letters of `operators` are written to `path`."""
    run = current()
    path = shown(path)
    run.dead_letters[path] = tuple(dict.fromkeys(run.dead_letters.get(path, ()) + tuple(operators)))


def shown(path: str | None) -> str | None:
    """A path under the .flow file's folder as the file writes it (relative), others as they are."""
    folder = current().folder
    if folder and path and os.path.isabs(path):
        relative = os.path.relpath(path, folder)
        if not relative.startswith(".."):
            return relative
    return path


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


def finish(code: int, error: str | None = None) -> dict[str, Any] | None:
    """The run ended with exit code `code` (and the line it printed, if it failed): its
    outcome, printed, added to the metrics file and written to $SUMMARY_ENV. None for no run."""
    global _run
    run, _run = _run, None
    if run is None:
        return None
    document = summary(run, code, error)
    _print(lines(document))
    if run.metrics_path and Path(run.metrics_path).is_file():
        try:
            metrics = json.loads(Path(run.metrics_path).read_text(encoding="utf-8"))
            metrics["outcome"] = document
            Path(run.metrics_path).write_text(json.dumps(metrics, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        except (OSError, ValueError):
            pass
    summary_file = os.environ.get(SUMMARY_ENV)
    if summary_file:
        Path(summary_file).parent.mkdir(parents=True, exist_ok=True)
        Path(summary_file).write_text(json.dumps(document, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return document


def summary(run: Run, code: int, error: str | None = None) -> dict[str, Any]:
    """The outcome as JSON: rows read per source, written per sink, dead letters per path with
    their top errors, answers by origin, duration and exit code."""
    operators = run.operators or (_value(run.collector) if run.collector is not None else {})
    replaying = bool(os.environ.get(recording.REPLAY_ENV))   # the calls were answered from a recording
    answers: dict[str, dict[str, int]] = {}
    for name, m in sorted(operators.items()):
        if name not in run.enrich and "cache_hits" not in m:
            continue        # a PROCESS: it answers nothing
        calls = int(m.get("calls") or 0)
        answers[name] = {"calls": 0 if replaying else calls, "cache": int(m.get("cache_hits") or 0),
                         "store": int(m.get("store_hits") or 0), "replay": calls if replaying else 0}
    totals = {origin: sum(a[origin] for a in answers.values()) for origin in ("calls", "cache", "store", "replay")}
    document: dict[str, Any] = {
        "pipeline": run.pipeline, "exit_code": code, "ended": exit_codes.meaning(code),
        "duration_s": round(time.monotonic() - run.started, 3),
        "started_at": run.started_at.isoformat(timespec="seconds"),
        # counts of actions that finished: a failed run's sources may have been read in part
        "sources": {name: {"rows": count.value() if code not in _FAILED else None}
                    for name, count in run.sources.items()},
        "sinks": [{"stream": s["name"], "line": s["line"], "path": s["path"], "written": s["written"],
                   "rows": s["count"].value() if s["written"] else None} for s in run.sinks.values()],
        "dead_letters": [{"path": path, "operators": list(names),
                          "rows": sum(int((operators.get(n) or {}).get("dead_letters") or 0) for n in names),
                          "top_errors": [{"error": label, "count": n}
                                         for label, n in dead_letter_errors(operators, names)]}
                         for path, names in run.dead_letters.items()],
        "answers": {**totals, "by_operator": answers},
    }
    if error:
        document["error"] = error
    return document


def lines(document: dict[str, Any]) -> list[str]:
    """The outcome as the run's last lines."""
    code = document["exit_code"]
    out = [f"dslc: {document['pipeline']} ended with exit code {code} ({document['ended']}) after "
           f"{document['duration_s']:.1f} s"]
    for name, read in document["sources"].items():
        if read["rows"] is not None or code not in _FAILED:
            out.append(f"  read       {name}: {_rows(read['rows'])}")
    for sink in document["sinks"]:
        where = f" to {sink['path']}" if sink["path"] else ""
        if sink["written"]:
            out.append(f"  wrote      {sink['stream']} (line {sink['line']}){where}: {_rows(sink['rows'])}")
        else:
            out.append(f"  not written {sink['stream']} (line {sink['line']}){where}")
    for letters in document["dead_letters"]:
        out.append(f"  dead       {letters['path']}: {_rows(letters['rows'])} from {', '.join(letters['operators'])}")
        out += [f"             {item['count']:>6}  {item['error']}" for item in letters["top_errors"]]
    answers = document["answers"]
    if answers["by_operator"]:
        out.append(f"  answers    {answers['calls']} from calls, {answers['cache']} from the cache, "
                   f"{answers['store']} from the store, {answers['replay']} replayed")
    return out


def _rows(rows: int | None) -> str:
    if rows is None:
        return "not counted"
    return f"{rows} row{'s' if rows != 1 else ''}"


def _value(collector: Any) -> dict[str, dict[str, Any]]:
    try:
        from dslc.runtime.metrics import summary as operator_summary
        return {name: operator_summary(m) for name, m in collector.value().items()}
    except Exception:  # noqa: BLE001 - a failed job's figures may not be there to read
        return {}


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
