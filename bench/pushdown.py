"""3. Filter pushdown: calls the enrichment service receives with and without the rewrite.

`big` filters on an input column after an HTTP ENRICH; with pushdown the filter runs before the
calls. The same .flow is compiled with the compiler's pushdown option on and off (`dslc compile
--no-pushdown`); the service counts the calls it answers.
"""
from __future__ import annotations

import random
import time

from .common import Context, run_flow, write_input
from .report import Section, Table, ratio

FLOW = """\
SOURCE orders FROM PARQUET 'input/' SCHEMA (order_id STRING, customer_id STRING, amount DOUBLE);
STREAM enriched = ENRICH orders WITH HTTP GET '{url}'
  RETURNS (value STRING) ASYNC UNORDERED CAPACITY 100 TIMEOUT 30s;
STREAM big = SELECT order_id, value FROM enriched WHERE amount > 900;
SINK big TO PARQUET 'out/' MODE OVERWRITE;
"""
ROWS = 5000


def run(ctx: Context) -> Section:
    started = time.perf_counter()
    rows = ROWS * (4 if ctx.full else 1)
    folder = ctx.folder("pushdown")
    rng = random.Random(3)
    amounts = [rng.uniform(0.0, 1000.0) for _ in range(rows)]
    write_input(folder / "input", {"order_id": [f"o{i}" for i in range(rows)],
                                   "customer_id": [f"c{i}" for i in range(rows)], "amount": amounts})
    passing = sum(a > 900 for a in amounts)
    flow = folder / "pipeline.flow"
    flow.write_text(FLOW.format(url=ctx.service.url("fixed", "{customer_id}")))
    measured: dict[bool, tuple[int, float]] = {}
    for pushdown in (False, True):
        ctx.service.reset()
        result = run_flow(flow, pushdown=pushdown)
        measured[pushdown] = (ctx.service.stats()["calls"], result.seconds)
        out = ctx.spark.read.parquet(str(folder / "out")).count()
        if out != passing:
            raise RuntimeError(f"pushdown={pushdown}: {out} rows out, expected {passing}")
    table = Table(["plan", "rows in", "rows out", "service calls", "seconds", "speedup"])
    for pushdown, label in ((False, "without (`--no-pushdown`)"), (True, "with pushdown (default)")):
        calls, seconds = measured[pushdown]
        table.add(label, rows, passing, calls, f"{seconds:.2f}", ratio(measured[False][1], seconds))
    saved = 1 - measured[True][0] / measured[False][0]
    section = Section(
        "3. Filter pushdown",
        f"""\
`ENRICH orders WITH HTTP GET` (fixed 20 ms, UNORDERED CAPACITY 100) then `SELECT ... WHERE amount > 900`
on {rows:,} orders with amounts uniform in [0, 1000); the filter reads only input columns, so the
optimiser moves it before the calls.""",
        tables=[table],
        notes=[f"Calls saved by the rewrite: {saved:.0%} ({measured[False][0]} -> {measured[True][0]}); "
               f"the calls made with it equal the rows that pass the filter ({passing})."],
    )
    section.seconds = time.perf_counter() - started
    return section
