"""EXPECT in Spark: constraints judged as Spark expressions where the rows already are, and the
figures of every EXPECT of the job (these and the ones run inside chains) for its metrics.

`judge` adds two columns in one projection over the relation: the names of the constraints a row
breaks (BROKEN, in statement order; NULL counts as passing, as a SQL CHECK does; only filled
when the EXPECT quarantines, the one action that writes them) and its fate
(FATE: NULL when it passes, '' when it is dropped, the QUARANTINE folder of the first QUARANTINE
constraint it breaks). A FAIL constraint makes the projection raise `ExpectationFailed` with the
constraint, its line and the row, so the job stops there (exit code 4). The per-constraint
counts ride along as one observation: `pyspark.sql.Observation` in BATCH (its value comes with
the first action that reads the rows), a named observation in STREAMING (each micro-batch's in
its StreamingQueryProgress.observedMetrics, added up here as the session's listener hands them
over, progress_feed.py). An observation is also what keeps Catalyst from moving a later filter
below the EXPECT: every row that reaches it is judged and counted.

`passing` is what every reader of the relation gets; `quarantine_of` the JSON lines of one
quarantine folder (the row's columns, `_constraints`, `_operator`, `_line`), written by Spark's
file sinks: once per BATCH run, and in STREAMING by a query with its own checkpoint
(streaming.write_quarantine), so a replayed micro-batch does not write its rows again.
"""
from __future__ import annotations

import re
import threading
import uuid
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from dslc.runtime import config as C
from dslc.runtime.core.expect_operator import EXIT_CODE, LINE, QUARANTINE, ExpectationFailed, failure_prefix

from .names import col

BROKEN, FATE = "__dslc_broken", "__dslc_fate"
#: How `ExpectationFailed` reads in a Spark error's text (raise_error, or a Python worker's).
MARKER = f"{ExpectationFailed.__name__}: "
__all__ = ["EXIT_CODE", "check", "judge", "passing", "quarantine_of", "quarantine_letters", "write_letters"]
_PREFIX = "dslc_expect_"
_JSON = {"ignoreNullFields": "false"}


_FAILED = re.compile(re.escape(MARKER) + r"(EXPECT ON .+?)(?:\.?\s+SQLSTATE: \w+)?\s*$", re.MULTILINE)


def failed_expectation(error: BaseException) -> str | None:
    """What a job that stopped on an EXPECT's FAIL says (the constraint, its line, the row), from
    its error's text (Spark's raise_error, or a Python worker's ExpectationFailed); None for
    any other failure."""
    found = _FAILED.search(str(error))
    return found.group(1).strip() if found else None


def _flag(constraint: C.Constraint) -> Column:
    """True when the row breaks the constraint (its condition is false; NULL passes)."""
    return F.coalesce(~F.expr(constraint.sql), F.lit(False))


def judge(df: DataFrame, expect: C.Expect) -> DataFrame:
    """`df` with BROKEN and FATE (see the module), the constraints counted, a FAIL raised.

    Only what the EXPECT's actions read is computed per row: BROKEN's names (a higher-order
    filter over an array, the costliest expression here) only when a QUARANTINE line needs them,
    and the counts as one `count_if` per constraint (an observation's aggregates are updated for
    every row, so each one costs). FAIL's raise sits in FATE, which `passing` always reads."""
    declare(expect)
    data = [col(name) for name in df.columns]
    flags = [f"__dslc_x{i}" for i in range(len(expect.constraints))]
    flagged = df.select(*data, *[_flag(c).alias(f) for c, f in zip(expect.constraints, flags)])
    actions = {c.action for c in expect.constraints}
    broken = F.lit(None).cast("array<string>")
    if "QUARANTINE" in actions:
        broken = F.filter(F.array(*[F.when(F.col(f), F.lit(c.name)) for c, f in zip(expect.constraints, flags)]),
                          lambda name: name.isNotNull())
    fate = F.lit(None).cast("string")
    drops = [F.col(f) for c, f in zip(expect.constraints, flags) if c.action == "DROP"]
    if drops:
        fate = F.when(_any(drops), F.lit("")).otherwise(fate)
    for constraint, flag in reversed(list(zip(expect.constraints, flags))):
        if constraint.action == "QUARANTINE":
            fate = F.when(F.col(flag), F.lit(constraint.path)).otherwise(fate)
    for constraint, flag in reversed(list(zip(expect.constraints, flags))):
        if constraint.action == "FAIL":     # the first FAIL it breaks, in statement order, names it
            row = F.to_json(F.struct(*data), _JSON)
            message = F.concat(F.lit(MARKER + failure_prefix(expect, constraint)), row)
            fate = F.when(F.col(flag), F.raise_error(message).cast("string")).otherwise(fate)
    judged = flagged.select(*data, *[F.col(f) for f in flags], broken.alias(BROKEN), fate.alias(FATE))
    counts = [F.count(F.lit(1)).alias("rows")]
    if "DROP" in actions:
        counts.append(F.count_if(F.col(FATE) == "").alias("dropped"))
    if "QUARANTINE" in actions:
        counts.append(F.count_if(F.col(FATE) != "").alias("quarantined"))
    counts += [F.count_if(F.col(f)).alias(f"{c.name}.failed") for c, f in zip(expect.constraints, flags)]
    observed = _observe(judged, expect, counts)
    return observed.drop(*flags)


def _any(columns: list[Column]) -> Column:
    out = columns[0]
    for column in columns[1:]:
        out = out | column
    return out


def passing(df: DataFrame) -> DataFrame:
    """The rows of a judged relation that pass (WARN's included), without the judge's columns."""
    return df.where(F.col(FATE).isNull()).drop(BROKEN, FATE)


def check(df: DataFrame, expect: C.Expect, quarantine: dict[str, str] | None = None) -> DataFrame:
    """BATCH (and STREAMING without QUARANTINE): judge the rows, write each quarantine folder
    (`quarantine`: its path as written → the folder), return the rows that pass."""
    judged = judge(df, expect)
    for path, folder in sorted((quarantine or {}).items()):
        quarantine_of(judged, expect, path).write.mode("append").text(folder)
    return passing(judged)


def quarantine_of(df: DataFrame, expect: C.Expect, path: str) -> DataFrame:
    """One `value` column: the JSON lines of the rows a judged relation quarantines to `path`."""
    data = [col(name) for name in df.columns if name not in (BROKEN, FATE)]
    line = F.to_json(F.struct(*data, F.col(BROKEN).alias("_constraints"), F.lit(expect.name).alias("_operator"),
                              F.lit(expect.line).alias("_line")), _JSON)
    return df.where(F.col(FATE) == F.lit(path)).select(line.alias("value"))


def quarantine_letters(df: DataFrame, path: str) -> DataFrame:
    """One `value` column: the lines a chain's EXPECT quarantined to `path` (they leave the chain
    among its dead letters: core/expect_operator.py)."""
    letter = F.col(C.DEAD_LETTER_COLUMN)
    mine = df.where(letter.isNotNull() & (F.get_json_object(letter, f"$.{QUARANTINE}") == F.lit(path)))
    return mine.select(F.get_json_object(letter, f"$.{LINE}").alias("value"))


def write_letters(df: DataFrame, folders: dict[str, str]) -> None:
    """BATCH: a chain's quarantined rows to their folders (`folders`: path as written → folder)."""
    if C.DEAD_LETTER_COLUMN not in df.columns:
        return
    for path, folder in sorted(folders.items()):
        quarantine_letters(df, path).write.mode("append").text(folder)


# --------------------------------------------------------------------------- the figures

class _Figures:
    """Every EXPECT of the job, and the observations that count the ones Spark runs."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.declared: dict[str, tuple[C.Expect, str]] = {}     # name → (config, where it runs)
        self.observations: dict[str, list[Any]] = {}            # name → BATCH Observations
        self.streamed: dict[str, dict[tuple[str, int], dict[str, int]]] = {}   # observation → (query, batch) → row
        self.names: dict[str, str] = {}                         # STREAMING observation → EXPECT name

    def declare(self, expect: C.Expect, runs: str) -> None:
        with self.lock:
            self.declared[expect.name] = (expect, runs)

    def progress(self, update: Any) -> None:
        """One micro-batch's progress: the observations of EXPECTs, by query and batch."""
        data = _plain(update)
        key = (str(data.get("id")), int(data.get("batchId", -1)))
        with self.lock:
            for name, row in (data.get("observedMetrics") or {}).items():
                if name in self.names:
                    self.streamed.setdefault(name, {})[key] = {k: int(v or 0) for k, v in _fields(row).items()}

    def counted(self, expect: C.Expect, queries: list) -> dict[str, int] | None:
        """The counts Spark observed for `expect` (None: it ran in a chain, or nothing was read);
        `queries`: the job's streaming queries, whose recent progress the listener may not have
        been told of yet."""
        totals: dict[str, int] | None = None
        for observation in self.observations.get(expect.name, []):
            found = _observed(observation)
            if found is not None:
                totals = found
        streamed = [n for n, owner in self.names.items() if owner == expect.name]
        if streamed:
            for query in list(queries):
                try:
                    for update in query.recentProgress:
                        self.progress(update)
                except Exception:  # noqa: BLE001 - a query of a stopped session
                    continue
            totals = _most_of_any_query([self.streamed.get(n, {}) for n in streamed]) or totals
        return totals


def _fields(row: Any) -> dict[str, Any]:
    """An observation's values by name: a Row, a dict, or Spark Connect's {'values': [...], ...}."""
    if hasattr(row, "asDict"):
        return row.asDict()
    if isinstance(row, dict) and "values" in row and "schema" in row:
        names = [f.get("name") for f in (row["schema"] or {}).get("fields", [])]
        return dict(zip(names, row["values"]))
    return dict(row) if isinstance(row, dict) else {}


def _plain(update: Any) -> dict[str, Any]:
    """A StreamingQueryProgress (or its dict) as its id, batch id and observed metrics."""
    if isinstance(update, dict):
        return update
    try:
        observed = dict(update.observedMetrics or {})
        return {"id": update.id, "batchId": update.batchId, "observedMetrics": observed}
    except Exception:  # noqa: BLE001 - a progress of another shape: nothing of ours in it
        return {}


def _most_of_any_query(batches: list[dict[tuple[str, int], dict[str, int]]]) -> dict[str, int] | None:
    """Micro-batches added up per query; the query that judged the most rows (every query that
    reads the relation judges the same rows)."""
    per_query: dict[str, dict[str, int]] = {}
    for found in batches:
        for (query, _), row in found.items():
            total = per_query.setdefault(query, {})
            for key, value in row.items():
                total[key] = total.get(key, 0) + value
    return max(per_query.values(), key=lambda t: t.get("rows", 0)) if per_query else None


def _observed(observation: Any) -> dict[str, int] | None:
    """An Observation's values without waiting: None until its action has finished."""
    try:
        jo = getattr(observation, "_jo", None)
        if jo is not None and not jo.future().isCompleted():
            return None
        return {k: int(v or 0) for k, v in observation.get.items()}
    except Exception:  # noqa: BLE001 - Spark Connect's observation, an action that failed
        return None


_figures = _Figures()


def _observe(df: DataFrame, expect: C.Expect, counts: list[Column]) -> DataFrame:
    if df.isStreaming:
        name = f"{_PREFIX}{expect.name}_{uuid.uuid4().hex[:8]}"
        with _figures.lock:
            _figures.names[name] = expect.name
        _listen(df.sparkSession)
        return df.observe(name, *counts)
    from pyspark.sql import Observation

    observation = Observation(f"{_PREFIX}{expect.name}_{uuid.uuid4().hex[:8]}")
    _figures.observations.setdefault(expect.name, []).append(observation)
    return df.observe(observation, *counts)


def _listen(spark) -> None:
    """Be told of every micro-batch of the session's queries (the feed tells it once)."""
    from .progress_feed import listen
    listen(spark, _figures.progress)      # else: the queries' recent progress, read at the end


def declare(expect: C.Expect, runs: str = "spark") -> C.Expect:
    """Make the job's figures cover `expect` (`runs`: 'spark', or the chain it runs in)."""
    _figures.declare(expect, runs)
    return expect


def section(operators: dict[str, dict[str, Any]], queries: list = ()) -> dict[str, dict[str, Any]]:
    """Every declared EXPECT's figures for the metrics JSON (its `expectations`): rows judged,
    passed, dropped, quarantined, and per constraint (in statement order) passed and failed. The
    operators' figures of chain EXPECTs (keyed `EXPECT name`) are taken out of `operators`;
    `queries`: the job's streaming queries (their progress holds the observations)."""
    out: dict[str, dict[str, Any]] = {}
    with _figures.lock:
        declared = sorted(_figures.declared.items())
    for name, (expect, runs) in declared:
        figures = operators.pop(expect.key, None)
        if figures is not None:
            counts = {"rows": int(figures.get("elements_in", 0)), "dropped": int(figures.get("dropped", 0)),
                      "quarantined": int(figures.get("quarantined", 0)),
                      **{f"{c.name}.failed": int(figures.get(f"failed.{c.name}", 0)) for c in expect.constraints}}
        else:
            counts = _figures.counted(expect, queries) or {}
        rows = int(counts.get("rows", 0))
        removed = int(counts.get("dropped", 0)) + int(counts.get("quarantined", 0))
        out[name] = {"line": expect.line, "runs": runs, "rows": rows, "passed": rows - removed,
                     "dropped": int(counts.get("dropped", 0)), "quarantined": int(counts.get("quarantined", 0)),
                     "constraints": [{"name": c.name, "line": c.line, "action": c.action,
                                      **({"path": c.path} if c.path else {}),
                                      "passed": rows - int(counts.get(f"{c.name}.failed", 0)),
                                      "failed": int(counts.get(f"{c.name}.failed", 0))} for c in expect.constraints]}
    return out


def forget() -> None:
    """A new job in this process (dslc test, the REPL): the figures start from nothing."""
    with _figures.lock:
        _figures.declared.clear()
        _figures.observations.clear()
        _figures.names.clear()
        _figures.streamed.clear()
