"""What Spark's analysis of every query costs `dslc run` before the job's first action
(runtime/spark/preflight.py), against what the job pays to start Spark anyway.

In one fresh process: the time to start the job's SparkSession (the JVM, `local[1]`), then for
each workload the preflight on that session (the fast check plus one Spark analysis per query
over empty tables); the first workload also pays the compiler's imports, as a real run does.
Workloads: each example's pipeline.flow and TPC-H's 22 queries as 22 streams. The ratio
preflight / session start is the share `dslc run`'s start-up grows by (goal: well under 1).

    .venv/bin/python -m bench.run_preflight
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def workloads(folder: Path) -> dict[str, Path]:
    """name → .flow file."""
    flows = {f"example {p.parent.name}": p for p in sorted((ROOT / "examples").glob("*/pipeline.flow"))}
    tables = (ROOT / "tests" / "sql" / "tables.flow").read_text(encoding="utf-8")
    queries = sorted((ROOT / "tests" / "sql" / "tpch").glob("*.sql"))
    text = tables + "".join(f"STREAM q{i} = {q.read_text().strip().rstrip(';')};\nSINK q{i} TO CONSOLE;\n"
                            for i, q in enumerate(queries, 1))
    path = folder / "tpch.flow"
    path.write_text(text)
    flows["TPC-H, 22 streams"] = path
    return flows


def main() -> None:
    from pyspark.sql import SparkSession

    from dslc.runtime.spark import preflight
    from dslc.runtime.spark.analysis_errors import FLOW_ENV

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    t0 = time.perf_counter()
    spark = (SparkSession.builder.master("local[1]").appName("bench-preflight")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.log.level", "ERROR").getOrCreate())
    spark.range(1).count()      # the job's first action would pay this too
    start = time.perf_counter() - t0
    results = {"session_start_s": round(start, 3), "workloads": {}}
    with tempfile.TemporaryDirectory() as folder:
        for name, path in workloads(Path(folder)).items():
            os.environ[FLOW_ENV] = str(path)
            t0 = time.perf_counter()
            try:
                preflight.check_before_start(spark)
                refused = False
            except preflight.RefusedBySpark:
                refused = True
            took = time.perf_counter() - t0
            results["workloads"][name] = {"preflight_s": round(took, 3), "ratio_to_start": round(took / start, 3),
                                          "refused": refused}
            print(f"{name:<22} preflight {took:6.3f}s  = {took / start:5.2f} x the session start "
                  f"({start:.2f}s){'  (refused!)' if refused else ''}", file=sys.stderr)
    spark.stop()
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
