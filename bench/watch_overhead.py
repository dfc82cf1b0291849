"""What watching a run costs: section 1's workload (ENRICH ASYNC UNORDERED CAPACITY 100 against
the bench service's fixed 20 ms latency, two partitions) with live progress and per-micro-batch
figures on (the default) and off (DSLC_PROGRESS=0), in BATCH and in STREAMING (AVAILABLE NOW).
Runs alternate on and off, several times; the ratio is median throughput on / off (the target:
at least 0.97, a cost of at most 3%).

    python -m bench.watch_overhead [--rows N] [--repeat K]
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

CAPACITY = 100
FLOWS = {
    "BATCH": """SOURCE keys FROM PARQUET 'input/' SCHEMA (id STRING);
STREAM enriched = ENRICH keys WITH HTTP GET '{url}' RETURNS (value STRING)
  ASYNC UNORDERED CAPACITY {capacity} TIMEOUT 30s;
SINK enriched TO PARQUET 'out/' MODE OVERWRITE;
""",
    "STREAMING": """PIPELINE watched MODE STREAMING CHECKPOINT 'chk' TRIGGER AVAILABLE NOW;
SOURCE keys FROM PARQUET 'input/' SCHEMA (id STRING);
STREAM enriched = ENRICH keys WITH HTTP GET '{url}' RETURNS (value STRING)
  ASYNC UNORDERED CAPACITY {capacity} TIMEOUT 30s;
SINK enriched TO PARQUET 'out/';
""",
}


def one_run(folder: Path, mode: str, url: str, watched: bool) -> float:
    """Rows per second of one run (a fresh checkpoint and output)."""
    from bench.common import run_flow

    for leftover in ("chk", "out"):
        shutil.rmtree(folder / leftover, ignore_errors=True)
    flow = folder / "pipeline.flow"
    flow.write_text(FLOWS[mode].format(url=url, capacity=CAPACITY))
    if watched:
        os.environ.pop("DSLC_PROGRESS", None)
    else:
        os.environ["DSLC_PROGRESS"] = "0"
    try:
        run = run_flow(flow)
    finally:
        os.environ.pop("DSLC_PROGRESS", None)
    rows = int(run.metrics["enriched"]["elements_out"])
    return rows / run.seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from bench.common import spark_session, write_input
    from bench.service import LatencyService

    spark = spark_session()
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "1000")
    worst = 1.0
    with LatencyService() as service, tempfile.TemporaryDirectory(prefix="dslc-watch-bench-") as root:
        folder = Path(root)
        write_input(folder / "input", {"id": [f"k{i}" for i in range(args.rows)]})
        url = service.url("fixed")
        for mode in FLOWS:
            one_run(folder, mode, url, True)        # warm up the workers and the service
            on, off = [], []
            for _ in range(args.repeat):
                off.append(one_run(folder, mode, url, False))
                on.append(one_run(folder, mode, url, True))
            ratio = statistics.median(on) / statistics.median(off)
            worst = min(worst, ratio)
            print(f"{mode:9s} rows/s watched {statistics.median(on):8.0f}  not watched {statistics.median(off):8.0f}  "
                  f"ratio {ratio:.3f}  (runs on {[round(x) for x in on]}, off {[round(x) for x in off]})", flush=True)
    print(f"lowest ratio {worst:.3f} (target >= 0.97)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
