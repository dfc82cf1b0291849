"""14. What HEADERS with a secret and an ANSWER path cost: section 1's workload (every row one GET
to the bench service, 20 ms fixed latency, ENRICH ASYNC UNORDERED CAPACITY 100, Parquet in and
out) with and without them, in the same run, interleaved, median of the rounds.

The featured run sends `Authorization: Bearer ${BENCH_TOKEN}` (a secret read by the job's driver
and shipped in the chain) and reads its value from the wrapped answer the service then gives
(`{"data": {"item": {"value": ...}}}`) with ANSWER 'data.item' and a PATH; the plain one reads
`{"value": ...}` as it is. Both answers are checked to be the same rows.

    python -m bench --only services          # as part of RESULTS.md
    python -m bench.services                  # alone, prints the table
"""
from __future__ import annotations

import os
import statistics
import sys
import time

from .common import PARTITIONS, Context, run_flow, write_input
from .report import Section, Table, Target, ratio

CAPACITY = 100
PLAIN = """\
SOURCE keys FROM PARQUET 'input/' SCHEMA (id STRING);
STREAM enriched = ENRICH keys WITH HTTP GET '{url}' RETURNS (value STRING)
  ASYNC UNORDERED CAPACITY {capacity} TIMEOUT 30s;
SINK enriched TO PARQUET 'out/' MODE OVERWRITE;
"""
FEATURED = """\
SOURCE keys FROM PARQUET 'input/' SCHEMA (id STRING);
STREAM enriched = ENRICH keys WITH HTTP GET '{url}?wrap=1'
    HEADERS ('Authorization' = 'Bearer ${{BENCH_TOKEN}}', 'Accept' = 'application/json')
    ANSWER 'data.item'
  RETURNS (value STRING PATH 'value')
  ASYNC UNORDERED CAPACITY {capacity} TIMEOUT 30s;
SINK enriched TO PARQUET 'out/' MODE OVERWRITE;
"""


def run(ctx: Context) -> Section:
    started = time.perf_counter()
    folder = ctx.folder("services")
    n = 60_000 if ctx.full else 20_000
    rounds = 5 if ctx.full else 3
    write_input(folder / "input", {"id": [f"k{i}" for i in range(n)]})
    os.environ["BENCH_TOKEN"] = "bench-token-not-secret"
    url = ctx.service.url("fixed")
    flows = {"plain": PLAIN.format(url=url, capacity=CAPACITY), "featured": FEATURED.format(url=url, capacity=CAPACITY)}
    rates: dict[str, list[float]] = {"plain": [], "featured": []}
    values: dict[str, set] = {}
    for name in ("plain", "featured"):        # warm up: workers, sessions, the runtime zip
        (folder / "pipeline.flow").write_text(flows[name].replace("'input/'", "'input/part-000.parquet'"))
        run_flow(folder / "pipeline.flow")
    for round_ in range(rounds):
        for name in ("plain", "featured"):
            ctx.service.reset()
            (folder / "pipeline.flow").write_text(flows[name])
            seconds = run_flow(folder / "pipeline.flow").seconds
            calls = ctx.service.stats()["calls"]
            if calls != n:
                raise RuntimeError(f"{name}: {calls} calls for {n} rows")
            rates[name].append(n / seconds)
            if round_ == rounds - 1:
                values[name] = {tuple(r) for r in ctx.spark.read.parquet(str(folder / "out")).collect()}
    if values["plain"] != values["featured"]:
        raise RuntimeError("the featured run wrote other rows than the plain one")
    plain, featured = statistics.median(rates["plain"]), statistics.median(rates["featured"])
    section = Section(
        "14. HEADERS with a secret and an ANSWER path",
        f"""\
Section 1's workload: N = {n} rows in {PARTITIONS} Parquet files, one GET each to the bench service (fixed
20 ms), ENRICH ASYNC UNORDERED CAPACITY {CAPACITY}, Parquet out; rows/s = N / wall time of the job. The
featured run adds `HEADERS ('Authorization' = 'Bearer ${{BENCH_TOKEN}}', 'Accept' = ...)` and reads the value
from the wrapped answer with `ANSWER 'data.item'` and `PATH 'value'`. {rounds} rounds, plain and featured
interleaved; medians.""")
    table = Table(["run", "rows/s per round", "median rows/s", "vs plain"])
    table.add("plain", ", ".join(f"{r:.0f}" for r in rates["plain"]), f"{plain:.0f}", "1.00x")
    table.add("HEADERS + secret + ANSWER + PATH", ", ".join(f"{r:.0f}" for r in rates["featured"]),
              f"{featured:.0f}", ratio(featured, plain))
    section.tables.append(table)
    section.targets.append(Target("with HEADERS (one secret) and an ANSWER path >= 0.95x of without",
                                  ratio(featured, plain), featured >= 0.95 * plain))
    section.seconds = time.perf_counter() - started
    return section


def main() -> int:
    import shutil
    import tempfile
    from pathlib import Path

    from .common import spark_session
    from .service import LatencyService

    root = Path(tempfile.mkdtemp(prefix="dslc-bench-services-"))
    try:
        spark = spark_session()
        with LatencyService() as service:
            section = run(Context(spark=spark, service=service, full="--full" in sys.argv, root=root))
        spark.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(section.markdown())
    return 0


if __name__ == "__main__":
    sys.exit(main())
