"""5. Cache and coalescing: calls saved and speedup with CACHE on, keys drawn from a Zipf law.

The same HTTP ENRICH (fixed 20 ms, UNORDERED CAPACITY 100) runs over rows whose key follows a
Zipf distribution over KEYS distinct keys, without and with `CACHE n TTL 5m`. The cache is per
operator and Python worker (one per partition here); while a key's call is in flight, later rows
with that key wait for it instead of calling (coalescing).
"""
from __future__ import annotations

import itertools
import random
import time

from .common import Context, run_flow, write_input
from .report import Section, Table, ratio

FLOW = """\
SOURCE events FROM PARQUET 'input/' SCHEMA (event_id STRING, customer_id STRING);
STREAM {name} = ENRICH events WITH HTTP GET '{url}'
  RETURNS (value STRING) ASYNC UNORDERED CAPACITY 100 TIMEOUT 30s{cache};
SINK {name} TO PARQUET 'out/' MODE OVERWRITE;
"""
ROWS = 20_000
KEYS = 10_000
EXPONENT = 1.1
CACHE_SIZE = 10_000


def zipf_keys(rows: int, keys: int, exponent: float, seed: int = 5) -> list[str]:
    """`rows` keys drawn from a Zipf law over `keys` keys: P(rank k) ~ 1 / k**exponent."""
    weights = itertools.accumulate(1.0 / k ** exponent for k in range(1, keys + 1))
    ranks = random.Random(seed).choices(range(1, keys + 1), cum_weights=list(weights), k=rows)
    return [f"c{rank}" for rank in ranks]


def run(ctx: Context) -> Section:
    started = time.perf_counter()
    rows = ROWS * (5 if ctx.full else 1)
    folder = ctx.folder("cache")
    customers = zipf_keys(rows, KEYS, EXPONENT)
    distinct = len(set(customers))
    write_input(folder / "input", {"event_id": [f"e{i}" for i in range(rows)], "customer_id": customers})
    flow = folder / "pipeline.flow"
    measured = {}
    for run_index, cached in enumerate((False, True)):
        # a new operator name per run: the worker's cache of an earlier run must not serve this one
        flow.write_text(FLOW.format(name=f"enriched{run_index}", url=ctx.service.url("fixed", "{customer_id}"),
                                    cache=f"\n  CACHE {CACHE_SIZE} TTL 5m" if cached else ""))
        ctx.service.reset()
        result = run_flow(flow)
        metrics = result.metrics[f"enriched{run_index}"]
        measured[cached] = (ctx.service.stats()["calls"], result.seconds, metrics)
    calls_off, seconds_off, _ = measured[False]
    calls_on, seconds_on, metrics_on = measured[True]
    table = Table(["CACHE", "rows", "service calls", "cache hits", "coalesced", "seconds", "rows/s", "speedup"])
    table.add("off", rows, calls_off, 0, 0, f"{seconds_off:.2f}", f"{rows / seconds_off:.0f}", "1.00x")
    table.add(f"{CACHE_SIZE} TTL 5m", rows, calls_on, metrics_on["cache_hits"], metrics_on["coalesced"],
              f"{seconds_on:.2f}", f"{rows / seconds_on:.0f}", ratio(seconds_off, seconds_on))
    section = Section(
        "5. Cache and coalescing",
        f"""\
{rows:,} rows whose `customer_id` is drawn from a Zipf law (exponent {EXPONENT}) over {KEYS:,} keys
({distinct:,} distinct keys drawn); `ENRICH ... WITH HTTP GET` (fixed 20 ms, UNORDERED CAPACITY 100) in
2 partitions, without and with `CACHE {CACHE_SIZE} TTL 5m` (one cache per Python worker).""",
        tables=[table],
        notes=[f"Calls saved: {1 - calls_on / calls_off:.0%} ({calls_off} -> {calls_on}); the floor is one call per "
               f"distinct key per worker ({distinct} distinct keys overall)."],
    )
    section.seconds = time.perf_counter() - started
    return section
