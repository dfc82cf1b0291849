"""Runtime metrics from executors to the driver: a Spark accumulator, or metrics rows read back on Spark Connect."""
from __future__ import annotations

import datetime as dt
import json
import sys
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark import AccumulatorParam
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from dslc.runtime import config as C
from dslc.runtime import expect_figures, run_env
from dslc.runtime.core.arrow_chain import ChainFunction
from dslc.runtime.diagnosis import diagnose_all
from dslc.runtime.metrics import (
    all_failed_warnings,
    format_table,
    merge,
    model_change_warnings,
    summary,
    usage_estimated_warnings,
)

from . import ceiling, outcome, progress
from .pinned import PinnedStates
from .progress import ProgressCollector
from .session import checkpoint, is_connect, worker_function


class _MetricsParam(AccumulatorParam):
    """Accumulates {operator: metrics} dicts by adding them up."""

    def zero(self, value: dict) -> dict:
        return {}

    def addInPlace(self, a: dict, b: dict) -> dict:
        for name, item in b.items():
            a[name] = merge(a[name], item) if name in a else merge({}, item)
        return a


class MetricsCollector:
    """Every chain's metrics, added up on the driver; `report()` writes the run's metrics file and
    prints the per-operator table.

    Classic sessions use one accumulator that tasks add to when they end. Spark Connect has no
    accumulators: there each chain's tasks append one extra row holding their metrics (JSON), which
    the driver reads from the checkpointed chain output in BATCH, and from each micro-batch's
    observed metrics (the query's progress) in STREAMING (see `chain_with_metrics`)."""

    def __init__(self, spark: SparkSession):
        self._spark = spark
        self.on_connect = is_connect(spark)
        from . import expectations
        expectations.forget()            # a new job: its EXPECTs' figures start from nothing
        self._acc = None if self.on_connect else spark.sparkContext.accumulator({}, _MetricsParam())
        self._tasks: list[str] = []   # Connect: each task's metrics (JSON)
        self._observed: set[str] = set()   # Connect, STREAMING: the observations holding them
        self._figures = 0                  # STREAMING: observations of per-micro-batch figures made
        self.progress: ProgressCollector | None = None
        self.per_micro_batch = progress.enabled(spark)   # STREAMING: figures observed per micro-batch
        outcome.watch(self)
        if self.per_micro_batch:
            try:
                self.progress = ProgressCollector(progress.advertised_host(spark),
                                                  int(_conf(spark, run_env.PROGRESS_PORT_CONF.name) or 0),
                                                  progress_file=run_env.PROGRESS_FILE.get(),
                                                  queries=_queries, poll_each_second=not self.on_connect)
            except OSError as exc:   # no port to listen on: the run goes on without live figures
                print(f"dslc: warning: no live progress: {exc}", file=sys.stderr)

    def without_live_progress(self) -> None:
        """No live figures for this run (a job that writes nothing: the REPL's `:show`, `dslc
        test`): its collector stops, and chains built from now on send nothing."""
        if self.progress is not None:
            self.progress.close(show=False)
            self.progress = None

    @property
    def progress_address(self) -> str | None:
        """Where chains' tasks send their live figures (runtime/progress.py), if anywhere."""
        return self.progress.address if self.progress is not None else None

    def sink(self):
        """A picklable callable for the chain function to report a task's metrics with (classic)."""
        acc = self._acc
        return lambda metrics: acc.add({name: m for name, m in metrics.items()})

    def chain_with_metrics(self, df: DataFrame, chain: C.Chain, states: Mapping[str, Any], schema: StructType) -> DataFrame:
        """The chain over `df`, its tasks' metrics read back instead of accumulated (Spark Connect).

        Each task appends one row carrying its metrics; the output is checkpointed at once (so its
        calls run once, whoever reads it later), the driver reads the metrics rows from the
        checkpoint and the other rows go on. A streaming chain cannot be checkpointed: there the
        metrics rows are collected by a DataFrame observation (each micro-batch's list lands in the
        query's progress, read by `value()`) and dropped right after it."""
        with_metrics = StructType(schema.fields + [StructField(METRICS_COLUMN, StringType(), True)])
        column = F.col(METRICS_COLUMN)
        if df.isStreaming:
            sink = None if self.on_connect else self.sink()
            function = worker_function(df, ChainWithMetricsRow(chain, states, sink, self.progress_address))
            observed = df.mapInArrow(function, with_metrics)
            if self.on_connect:
                name = f"dslc_metrics_{chain.name}_{len(self._observed)}"
                self._observed.add(name)
                observed = observed.observe(name, F.collect_list(column).alias("tasks"))
            observed = observed.observe(f"dslc_{chain.name}_{self._figures}", *micro_batch_figures(chain, column))
            self._figures += 1
            return observed.where(column.isNull()).drop(METRICS_COLUMN)
        kept = checkpoint(df.mapInArrow(ChainWithMetricsRow(chain, dict(states), None, self.progress_address),
                                        with_metrics))
        self._tasks.extend(row[0] for row in kept.where(column.isNotNull()).select(column).collect())
        out = kept.where(column.isNull()).drop(METRICS_COLUMN)
        out._dslc_kept = True      # chains.keep: already computed once
        return out

    def add_driver_figures(self, operator: str, figures: dict[str, Any]) -> None:
        """Figures the driver itself made for an operator (TIER BATCH's provider batches), added
        to its tasks' when the run reports."""
        if self._acc is not None:
            self._acc.add({operator: figures})
        else:
            self._tasks.append(json.dumps({operator: figures}))

    def value(self) -> dict[str, dict[str, Any]]:
        """Merged metrics per operator (driver only)."""
        if self._acc is not None:
            return dict(self._acc.value)
        param, merged = _MetricsParam(), {}
        for task in self._tasks + observed_tasks(self._observed):
            param.addInPlace(merged, json.loads(task))
        return merged

    def report(self, stream=None, ceiling_stops: bool = True) -> str | None:
        """Write the run's JSON metrics file, print the table (stderr, or $DSLC_METRICS_SUMMARY), a
        warning per operator whose every element failed, and the file's path; return the path.
        Then, unless the run is stopping for another reason (`ceiling_stops` False), stop it with
        exit code 5 when an operator dead-lettered more than its ceiling (ceiling.py)."""
        extra: dict[str, Any] = {}
        merged = self.value()
        if self.progress is not None:
            if not ceiling_stops:       # a run that stops: a failed task's figures are only in its progress
                merged = _more(merged, self.progress.totals())
            self.progress.close()
            extra = {"timeline": self.progress.timeline, "micro_batches": self.progress.micro_batches}
        path = publish(self._spark, merged, stream, extra)
        run = outcome.current()
        if ceiling_stops and run.checks_ceiling:
            ceiling.check(run.enrich, merged, run.dead_letters)     # above it: exit code 5
        return path


def _more(final: dict[str, dict[str, Any]], live: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per operator, the figures that saw more elements: the tasks' final ones, or their live ones."""
    out = dict(final)
    for name, figures in live.items():
        if int(figures.get("elements_in") or 0) > int((out.get(name) or {}).get("elements_in") or 0):
            out[name] = figures
    return out


METRICS_COLUMN = "__dslc_task_metrics"

_queries: list = []   # the streaming queries this process started (their progress holds observations)


def track(query) -> None:
    """Remember a started streaming query: on Spark Connect its progress carries the metrics."""
    _queries.append(query)


def observed_tasks(names: set[str]) -> list[str]:
    """The task metrics (JSON) that observations `names` collected in every micro-batch of the
    tracked queries (Spark keeps the last `spark.sql.streaming.numRecentProgressUpdates` batches
    of each query)."""
    if not names:
        return []
    tasks: list[str] = []
    for query in _queries:
        for update in query.recentProgress:
            for name, row in (update.observedMetrics or {}).items():
                if name in names:
                    tasks.extend(_observed_list(row))
    return tasks


def _observed_list(row) -> list[str]:
    """The `tasks` list of one observation: Row(tasks=[...]) in a classic session, Row(values=
    [[...]], schema=...) as Spark Connect parses a query's progress."""
    fields = row.asDict()
    return list(fields["tasks"] if "tasks" in fields else fields["values"][0] or [])


class ChainWithMetricsRow:
    """mapInArrow function: the chain's batches (with a NULL metrics column), then one row carrying
    the task's metrics as JSON. Picklable: built on the driver, run on executors. In a streaming
    query the broadcast snapshots are the ones pinned for the task's micro-batch (pinned.py)."""

    def __init__(self, chain: C.Chain, states: Mapping[str, Any] | PinnedStates, sink=None,
                 progress: str | None = None) -> None:
        self.chain = chain
        self.states = states if isinstance(states, PinnedStates) else dict(states)
        self.sink = sink              # also to the accumulator (classic STREAMING)
        self.progress = progress

    def __call__(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        reported: list[dict] = []
        states = self.states.snapshots() if isinstance(self.states, PinnedStates) else self.states
        sink = self.sink

        def report(metrics: dict) -> None:
            reported.append(metrics)
            if sink is not None:
                sink(metrics)

        function = ChainFunction(self.chain, states, report, progress=self.progress)
        schema = function.schema.append(pa.field(METRICS_COLUMN, pa.string()))
        for batch in function(batches):
            yield batch.append_column(METRICS_COLUMN, pa.nulls(batch.num_rows, pa.string()))
        row = {METRICS_COLUMN: json.dumps(reported[0] if reported else {}, default=str)}
        yield pa.RecordBatch.from_pylist([row], schema=schema)


# what each micro-batch's progress carries per operator of a STREAMING chain (added up over its tasks)
MICRO_BATCH_FIGURES: tuple[str, ...] = (
    "elements_in", "elements_out", "calls", "errors", "retries", "timeouts", "dead_letters", "cache_hits",
    "pushed_back")


def micro_batch_figures(chain: C.Chain, column) -> list:
    """The aggregate columns of a chain's per-micro-batch observation: `<operator>.<figure>` summed
    over the tasks' metrics rows, `<operator>.max_in_flight`, and `<operator>.latency_ms`, the
    mean time an element spent in its calls. Spark puts them in the batch's
    StreamingQueryProgress.observedMetrics, which every StreamingQueryListener receives."""
    out = []
    for op in chain.operators:
        if isinstance(op, C.Expect):        # an EXPECT inside the chain: rows judged, each constraint's failures
            path = f"$['{op.key}']"
            out += [F.coalesce(F.sum(F.get_json_object(column, f"{path}['{n}']").cast("long")), F.lit(0)).alias(
                        f"{op.key}.{n}") for n in ("elements_in", "dropped", "quarantined",
                                                    *(f"failed.{c.name}" for c in op.constraints))]
            continue
        path = f"$['{op.name}']"

        def figure(name: str, path: str = path):
            return F.get_json_object(column, f"{path}.{name}")

        out += [F.coalesce(F.sum(figure(n).cast("long")), F.lit(0)).alias(f"{op.name}.{n}") for n in MICRO_BATCH_FIGURES
                if isinstance(op, C.Enrich) or n in ("elements_in", "elements_out", "errors")]
        if isinstance(op, C.Enrich):
            seconds = F.sum(figure("latency_seconds").cast("double"))
            answered = F.sum(figure("elements_in").cast("double"))
            out += [F.coalesce(F.max(figure("max_in_flight").cast("long")), F.lit(0)).alias(f"{op.name}.max_in_flight"),
                    # a micro-batch with no element (ANSI: x / 0 is DIVIDE_BY_ZERO) has no latency
                    F.round(F.when(answered > 0, seconds * 1000 / answered), 3).alias(f"{op.name}.latency_ms")]
    return out


def publish(spark: SparkSession, merged: dict[str, dict[str, Any]], stream=None,
            extra: dict[str, Any] | None = None) -> str | None:
    """What an operator of the job sees at its end, the same under `dslc run` and spark-submit."""
    from . import expectations

    merged = dict(merged)
    checked = expectations.section(merged, _queries)      # the EXPECTs' figures (chain ones leave `merged`)
    if not merged and not checked:
        outcome.reported({}, None)
        return None   # a job without Python operators or EXPECTs has nothing to report
    stream = stream or sys.stderr
    operators = {name: summary(m) for name, m in sorted(merged.items())}
    warnings = all_failed_warnings(operators) + model_change_warnings(operators) + usage_estimated_warnings(operators)
    pipeline = spark.conf.get("spark.app.name", "dslc")
    finished = dt.datetime.now(dt.timezone.utc)
    document = {"pipeline": pipeline, "application_id": _conf(spark, "spark.app.id"),
                "finished_at": finished.isoformat(timespec="seconds"), "operators": operators,
                "warnings": warnings, **(extra or {}),
                "latency_histograms": {name: m.get("latency_histogram", {}) for name, m in sorted(merged.items())
                                       if m.get("latency_histogram")}}
    diagnoses = diagnose_all(operators, (extra or {}).get("timeline")) + expect_figures.diagnoses(checked)
    document["diagnosis"] = diagnoses
    if checked:
        document["expectations"] = checked
    plan = run_env.PLAN_DOT.get()     # `dslc run`: the plan picture, for the report
    if plan and Path(plan).is_file():
        document["plan_dot"] = Path(plan).read_text(encoding="utf-8")
    path = metrics_path(spark, pipeline, finished)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    written = run_env.METRICS_WRITTEN.get()   # `dslc run --report`: where the file went
    if written:
        Path(written).write_text(str(path.resolve()), encoding="utf-8")
    table = format_table(operators) if operators else ""
    if checked:
        table = (table + "\n" if table else "") + expect_figures.format_table(checked)
    if run_env.METRICS_QUIET.is_one():    # `dslc test`: all in the file, nothing on the report
        outcome.reported(operators, str(path))
        return str(path)
    summary_file = run_env.METRICS_SUMMARY.get() or _conf(spark, run_env.METRICS_SUMMARY_CONF.name)
    if summary_file:
        with open(summary_file, "a", encoding="utf-8") as handle:
            handle.write(table + "\n")
    else:
        print(table, file=stream)
    for diagnosis in diagnoses:
        print(diagnosis["line"], file=stream)
    for warning in warnings:
        print(f"dslc: warning: {warning}", file=stream)
    print(f"dslc: metrics written to {path}", file=stream)
    stream.flush()
    outcome.reported(operators, str(path))
    return str(path)


def metrics_path(spark: SparkSession, pipeline: str, when: dt.datetime) -> Path:
    """$DSLC_METRICS_FILE, else <dir>/<pipeline>-<UTC time>.json where dir is $DSLC_METRICS_DIR,
    `spark.dslc.metrics.dir`, or target/metrics beside the .flow file (a path on the driver)."""
    exact = run_env.METRICS_FILE.get()
    if exact:
        return Path(exact)
    folder = (run_env.METRICS_DIR.get() or _conf(spark, run_env.METRICS_DIR_CONF.name)
              or str(Path(_conf(spark, run_env.FLOW_FOLDER_CONF.name) or ".") / "target" / "metrics"))
    stem = f"{pipeline}-{when.strftime('%Y%m%dT%H%M%SZ')}"
    path, n = Path(folder) / f"{stem}.json", 1
    while path.exists():     # two runs within one second
        n += 1
        path = Path(folder) / f"{stem}-{n}.json"
    return path


def _conf(spark: SparkSession, key: str) -> str | None:
    try:
        return spark.conf.get(key, None) or None
    except Exception:   # a key Spark Connect's server refuses to read
        return None
