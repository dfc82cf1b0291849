"""6. ENRICH beyond Flink: key-ordered emission (ASYNC ORDERED BY) against UNORDERED and ORDERED.

Same setup as section 1 (compiled .flow, Parquet input of two partitions, the bench service's
lognormal latency, `maxRecordsPerBatch` 1000), at CAPACITY 100. The rows carry a `customer`
column; ORDERED BY (customer) keeps input order per customer only, so a slow call holds back
the rows of its own customer, not the window. How much it holds back depends on how often a
customer repeats within one window: the table runs many customers (each row's customer rarely
seen again within CAPACITY rows) and few (every window holds several rows of each).
"""
from __future__ import annotations

import time

from .common import PARTITIONS, Context, run_flow, write_input
from .report import Section, Table, Target, ratio
from .service import mean_delay_s

CAPACITY = 100
BATCH = 1000
FLOW = """\
SOURCE keys FROM PARQUET '{input}' SCHEMA (id STRING, customer STRING);
STREAM enriched = ENRICH keys WITH HTTP GET '{url}' RETURNS (value STRING)
  ASYNC {mode} CAPACITY {capacity} TIMEOUT 30s;
SINK enriched TO PARQUET 'out/' MODE OVERWRITE;
"""


def _ordered_by(ctx: Context, n: int, customers: int, modes: list[str]) -> dict[str, float]:
    folder = ctx.folder(f"ordered_by-{customers}")
    ids = [f"k{i}" for i in range(n)]
    write_input(folder / "input", {"id": ids, "customer": [f"c{i % customers}" for i in range(n)]})
    rates: dict[str, float] = {}
    for mode in modes:
        flow = folder / "pipeline.flow"
        flow.write_text(FLOW.format(input="input/", url=ctx.service.url("lognormal"), mode=mode,
                                    capacity=CAPACITY))
        ctx.service.reset()
        seconds = run_flow(flow).seconds
        calls = ctx.service.stats()["calls"]
        if calls != n:
            raise RuntimeError(f"{mode}: {calls} calls for {n} rows")
        rates[mode] = n / seconds
    return rates


def run(ctx: Context) -> Section:
    started = time.perf_counter()
    ctx.spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", str(BATCH))
    n = 30_000 if ctx.full else 10_000
    n_ordered = n // 4          # ORDERED is several times slower: fewer rows, same latencies
    modes = ["UNORDERED", "ORDERED BY (customer)"]
    try:
        _ordered_by(ctx, 2000, 1000, ["UNORDERED"])                       # warm up
        many = _ordered_by(ctx, n, n // 10, modes)
        few = _ordered_by(ctx, n, 20, modes)
        ordered = _ordered_by(ctx, n_ordered, n // 10, ["ORDERED"])["ORDERED"]
    finally:
        ctx.spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    bound = PARTITIONS * CAPACITY / mean_delay_s("lognormal", [f"k{i}" for i in range(n)])
    table = Table(["lognormal, CAPACITY 100", "customers", "N", "rows/s", "vs UNORDERED"])
    table.add("UNORDERED", n // 10, n, f"{many['UNORDERED']:.0f}", "1.00x")
    table.add("ORDERED BY (customer)", n // 10, n, f"{many[modes[1]]:.0f}", ratio(many[modes[1]], many["UNORDERED"]))
    table.add("UNORDERED", 20, n, f"{few['UNORDERED']:.0f}", "1.00x")
    table.add("ORDERED BY (customer)", 20, n, f"{few[modes[1]]:.0f}", ratio(few[modes[1]], few["UNORDERED"]))
    table.add("ORDERED (whole input order)", "-", n_ordered, f"{ordered:.0f}", ratio(ordered, many["UNORDERED"]))
    section = Section("6. ENRICH beyond Flink", __doc__.split("\n\n", 1)[1], tables=[table])
    section.targets.append(Target(
        "lognormal, CAPACITY 100: ORDERED BY >= 0.8x UNORDERED (many customers)",
        ratio(many[modes[1]], many["UNORDERED"]), many[modes[1]] >= 0.8 * many["UNORDERED"]))
    section.notes.append(
        f"Bound (e) of section 1 for these rows: {bound:.0f} rows/s. With 20 customers each window of 100 "
        "holds about 5 rows per customer, so a slow call holds back the rows of its customer behind it; "
        "ORDERED BY then sits between ORDERED and UNORDERED.")
    section.seconds = time.perf_counter() - started
    return section
