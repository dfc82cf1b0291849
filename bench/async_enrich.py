"""1. Async enrichment throughput: dslc ENRICH against what users write instead, on local Spark.

Every method reads the same Parquet input (one partition per core), calls the bench service
once per row and writes the rows with their `value` to Parquet:

  a. a compiled .flow: ENRICH ... WITH HTTP GET ... ASYNC ORDERED|UNORDERED CAPACITY c
  b. a plain per-row Python UDF calling the service synchronously (useArrow=False)
  c. an Arrow Python UDF with spark.sql.execution.pythonUDF.arrow.concurrency.level = c
  d. mapInArrow running asyncio.gather over each batch behind a semaphore of c
  e. the bound: partitions x c / mean latency of the keys of the run

All runs use spark.sql.execution.arrow.maxRecordsPerBatch = BATCH, so a partition spans several
Arrow batches as it would in a real job: (c) and (d) wait for the slowest call of every batch,
ENRICH keeps its window full across batches.
"""
from __future__ import annotations

import time
from pathlib import Path

from . import baselines, operator_micro
from .common import PARTITIONS, Context, run_flow, write_input
from .report import Section, Table, Target, percent, ratio
from .service import mean_delay_s

CAPACITIES = (10, 50, 100, 200)
TARGET_CAPACITY = 100
BATCH = 1000
SYNC_ROWS = 300          # (b) makes one call at a time per partition: fewer rows, same rate
# (maxRecordsPerBatch, rows, run ORDERED too) for lognormal latency at TARGET_CAPACITY
SENSITIVITY = ((100, 4000, True), (10_000, 40_000, False))
FLOW = """\
SOURCE keys FROM PARQUET '{input}' SCHEMA (id STRING);
STREAM enriched = ENRICH keys WITH HTTP GET '{url}' RETURNS (value STRING)
  ASYNC {mode} CAPACITY {capacity} TIMEOUT 30s;
SINK enriched TO PARQUET 'out/' MODE OVERWRITE;
"""


class Runner:
    """Runs one method over n rows against one latency distribution and returns rows/s."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.folder = ctx.folder("async_enrich")
        self._inputs: dict[int, Path] = {}
        self.max_in_flight: dict[tuple[str, str, int], int] = {}

    @staticmethod
    def keys(n: int) -> list[str]:
        """The ids of a run of n rows (a run of fewer rows uses a prefix: same latencies)."""
        return [f"k{i}" for i in range(n)]

    def input(self, n: int) -> Path:
        """The input folder of n rows (written once)."""
        if n not in self._inputs:
            self._inputs[n] = write_input(self.folder / f"input-{n}", {"id": self.keys(n)})
        return self._inputs[n]

    def run(self, method: str, distribution: str, capacity: int, n: int) -> float:
        """Rows per second of `method` (ORDERED, UNORDERED, b, c, d)."""
        service = self.ctx.service
        self.input(n)
        service.reset()
        seconds = getattr(self, f"_run_{method if method in ('b', 'c', 'd') else 'dslc'}")(method, distribution, capacity, n)
        stats = service.stats()
        if stats["calls"] != n:
            raise RuntimeError(f"{method} {distribution} c={capacity}: {stats['calls']} calls for {n} rows")
        self.max_in_flight[(distribution, method, capacity)] = stats["max_in_flight"]
        return n / seconds

    def _run_dslc(self, mode: str, distribution: str, capacity: int, n: int) -> float:
        flow = self.folder / "pipeline.flow"
        flow.write_text(FLOW.format(input=f"input-{n}/", url=self.ctx.service.url(distribution),
                                    mode=mode, capacity=capacity))
        return run_flow(flow).seconds

    def _timed_write(self, df) -> float:
        started = time.perf_counter()
        df.write.mode("overwrite").parquet(str(self.folder / "out"))
        return time.perf_counter() - started

    def _run_b(self, method: str, distribution: str, capacity: int, n: int) -> float:
        from pyspark.sql import functions as F

        lookup = F.udf(baselines.SyncGet(self.ctx.service.url(distribution)), "string", useArrow=False)
        return self._timed_write(self.ctx.spark.read.parquet(str(self.input(n))).withColumn("value", lookup("id")))

    def _run_c(self, method: str, distribution: str, capacity: int, n: int) -> float:
        from pyspark.sql import functions as F

        spark = self.ctx.spark
        lookup = F.udf(baselines.SyncGet(self.ctx.service.url(distribution)), "string", useArrow=True)
        spark.conf.set("spark.sql.execution.pythonUDF.arrow.concurrency.level", str(capacity))
        try:
            return self._timed_write(spark.read.parquet(str(self.input(n))).withColumn("value", lookup("id")))
        finally:
            spark.conf.unset("spark.sql.execution.pythonUDF.arrow.concurrency.level")

    def _run_d(self, method: str, distribution: str, capacity: int, n: int) -> float:
        function = baselines.gather_per_batch(self.ctx.service.url(distribution), capacity)
        df = self.ctx.spark.read.parquet(str(self.input(n))).mapInArrow(function, "id string, value string")
        return self._timed_write(df)


METHODS = (("UNORDERED", "a. dslc ASYNC UNORDERED"), ("ORDERED", "a. dslc ASYNC ORDERED"),
           ("c", "c. Arrow UDF, concurrency.level"), ("d", "d. mapInArrow + gather/semaphore"))


class Plan:
    """How many rows each run gets: enough for about `seconds` at the lower of the bound and the
    machine's CPU ceiling, so the fixed cost of a Spark job stays a small part of every run."""

    def __init__(self, full: bool, ceiling: float) -> None:
        self.seconds = 10.0 if full else 3.0
        self.ceiling = ceiling

    def rows(self, distribution: str, capacity: int) -> int:
        mean = mean_delay_s(distribution, Runner.keys(2000))
        rate = min(PARTITIONS * capacity / mean, self.ceiling)
        return max(2000, int(round(self.seconds * rate, -3)))


def run(ctx: Context) -> Section:
    started = time.perf_counter()
    spark = ctx.spark
    runner = Runner(ctx)
    rates: dict[tuple[str, str, int], float] = {}
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", str(BATCH))
    try:
        for method in ("UNORDERED", "d", "c"):            # warm up: Python workers, imports, sessions
            runner.run(method, "instant", 10, 2000)
        job_seconds = 200 / runner.run("UNORDERED", "instant", 10, 200)
        n_ceiling = 60_000 if ctx.full else 20_000
        ceiling = {m: runner.run(m, "instant", TARGET_CAPACITY, n_ceiling) for m in ("UNORDERED", "d")}
        plan = Plan(ctx.full, max(ceiling.values()))
        for distribution in ("fixed", "lognormal"):
            for capacity in CAPACITIES:
                n = plan.rows(distribution, capacity)
                for method, _ in METHODS:
                    rates[distribution, method, capacity] = runner.run(method, distribution, capacity, n)
            rates[distribution, "b", 1] = runner.run("b", distribution, 1, SYNC_ROWS)
        # how (d) depends on the batch size, against dslc on the same rows (ORDERED only where it
        # finishes in time: it runs at ~C / slowest latency of a window whatever the batch size)
        sensitivity: list[tuple[int, int, float, float | None, float]] = []
        for batch, n, ordered in SENSITIVITY:
            n *= 3 if ctx.full else 1
            spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", str(batch))
            sensitivity.append((batch, n, runner.run("UNORDERED", "lognormal", TARGET_CAPACITY, n),
                                runner.run("ORDERED", "lognormal", TARGET_CAPACITY, n) if ordered else None,
                                runner.run("d", "lognormal", TARGET_CAPACITY, n)))
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")

    section = Section(
        "1. Async enrichment throughput",
        f"""\
N rows (ids `k0..`) in {PARTITIONS} Parquet files = {PARTITIONS} partitions on `local[{PARTITIONS}]`; every row is
enriched with one GET to the bench service (aiohttp on 127.0.0.1, own process) and written to Parquet;
rows/s = N / wall time of the whole Spark job. `spark.sql.execution.arrow.maxRecordsPerBatch = {BATCH}`.
Bound (e) = {PARTITIONS} partitions x CAPACITY / mean latency of the run's keys. N is sized for about
{plan.seconds:.0f} s at the lower of the bound and the CPU ceiling (below). "in flight" is the most concurrent
requests the service saw. (b) runs {SYNC_ROWS} rows; its bound is {PARTITIONS} x 1 / mean latency.
The third table varies `maxRecordsPerBatch` for lognormal latency at CAPACITY {TARGET_CAPACITY}; the last one is a
micro-benchmark without Spark (`operator_micro.py`: the runtime's operator driven directly, one process).""")
    for distribution in ("fixed", "lognormal"):
        table = Table([f"{distribution} latency", "CAPACITY", "N", "rows/s", "of bound (e)", "vs (d)", "in flight"])
        for capacity in CAPACITIES:
            n = plan.rows(distribution, capacity)
            bound = PARTITIONS * capacity / mean_delay_s(distribution, runner.keys(n))
            d_rate = rates[distribution, "d", capacity]
            table.add("e. bound", capacity, n, f"{bound:.0f}", "100%", ratio(bound, d_rate), PARTITIONS * capacity)
            for method, label in METHODS:
                rate = rates[distribution, method, capacity]
                table.add(label, capacity, n, f"{rate:.0f}", percent(rate, bound), ratio(rate, d_rate),
                          runner.max_in_flight[distribution, method, capacity])
        rate_b = rates[distribution, "b", 1]
        bound_b = PARTITIONS / mean_delay_s(distribution, runner.keys(SYNC_ROWS))
        table.add("b. per-row UDF, sync", 1, SYNC_ROWS, f"{rate_b:.0f}", percent(rate_b, bound_b),
                  ratio(rate_b, rates[distribution, "d", TARGET_CAPACITY]) + f" (d at {TARGET_CAPACITY})",
                  runner.max_in_flight[distribution, "b", 1])
        section.tables.append(table)
    table = Table([f"lognormal, CAPACITY {TARGET_CAPACITY}", "maxRecordsPerBatch", "N", "UNORDERED rows/s",
                   "ORDERED rows/s", "(d) rows/s", "UNORDERED vs (d)", "ORDERED vs (d)"])
    key = ("lognormal", TARGET_CAPACITY)
    main = (BATCH, plan.rows(*key), rates["lognormal", "UNORDERED", TARGET_CAPACITY],
            rates["lognormal", "ORDERED", TARGET_CAPACITY], rates["lognormal", "d", TARGET_CAPACITY])
    for batch, n, unordered, ordered, d_rate in sorted([*sensitivity, main], key=lambda item: item[0]):
        table.add("batch size", batch, n, f"{unordered:.0f}", f"{ordered:.0f}" if ordered else "not run",
                  f"{d_rate:.0f}", ratio(unordered, d_rate), ratio(ordered, d_rate) if ordered else "-")
    section.tables.append(table)
    section.tables.append(operator_micro.run(ctx.service, 30_000 if ctx.full else 10_000))

    c = TARGET_CAPACITY
    fixed_bound = PARTITIONS * c / mean_delay_s("fixed", runner.keys(plan.rows("fixed", c)))
    unordered = rates["fixed", "UNORDERED", c]
    section.targets += [
        Target(f"fixed 20 ms, UNORDERED CAPACITY {c} >= 85% of bound", percent(unordered, fixed_bound),
               unordered >= 0.85 * fixed_bound),
        Target(f"lognormal, UNORDERED CAPACITY {c} >= 3x (d)",
               ratio(rates["lognormal", "UNORDERED", c], rates["lognormal", "d", c]),
               rates["lognormal", "UNORDERED", c] >= 3 * rates["lognormal", "d", c]),
        Target(f"lognormal, ORDERED CAPACITY {c} beats (d)",
               ratio(rates["lognormal", "ORDERED", c], rates["lognormal", "d", c]),
               rates["lognormal", "ORDERED", c] > rates["lognormal", "d", c]),
    ]
    section.notes += [
        f"CPU ceiling: with a service that answers at once, CAPACITY {c} and N = {n_ceiling}, dslc UNORDERED moves "
        f"{ceiling['UNORDERED']:.0f} rows/s and (d) {ceiling['d']:.0f} rows/s, "
        f"{percent(ceiling['UNORDERED'], fixed_bound)} and {percent(ceiling['d'], fixed_bound)} of the fixed-latency "
        f"bound at CAPACITY {c} ({fixed_bound:.0f} rows/s). Where the bound is above the ceiling, the {PARTITIONS} cores "
        "(shared by the JVM, the Python workers' HTTP clients and the service) limit every method, not the window.",
        f"Fixed cost of one Spark job (the same flow over 200 rows, service answering at once): {job_seconds:.2f} s.",
        "ORDERED keeps Flink's queue semantics: CAPACITY counts completed elements that wait behind a slow head, so "
        "with heavy tails one slow call stalls the window; per partition it runs at about CAPACITY / (slowest latency "
        "among CAPACITY consecutive rows), whatever the batch size. (c) and (d) hold a whole batch of results and wait "
        "once per batch, so they gain on it as batches grow (third table).",
    ]
    section.seconds = time.perf_counter() - started
    return section
