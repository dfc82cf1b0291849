"""What a `dslc run` on a local master spends starting its Python workers, with dslc's worker
daemon (runtime/spark/daemon.py: the installed, compiled PySpark, the chain's runtime loaded
once before the fork) against Spark's own (`spark.python.daemon.module = pyspark.daemon`, which
imports PySpark from the source zip spark-submit puts first and compiles it in every process).

    python -m bench.run_start [--runs 5]

The same small pipeline (one ENRICH WITH PYTHON, 2 input files, local[2]) runs with each daemon
in turn; Spark's own log (INFO) gives each Python task's boot and init times and the job's
time. The driver imports the compiled PySpark in both (runtime/spark/__init__.py); the bench
reports medians and their ratios from this one run.
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import tempfile
from pathlib import Path

from .common import dslc_run

FLOW = """\
PIPELINE start MODE BATCH;
SOURCE rows FROM JSON 'in/' SCHEMA (id STRING, customer STRING);
STREAM tagged = ENRICH rows WITH PYTHON 'tags:tag' RETURNS (tag STRING) ASYNC UNORDERED CAPACITY 100 TIMEOUT 30s;
SINK tagged TO PARQUET 'out/' MODE OVERWRITE;
"""
TAGS = """\
async def tag(row):
    return {"tag": row["customer"][-1]}
"""
SPARKS_OWN = ("--conf", "spark.python.daemon.module=pyspark.daemon")
TASK_TIMES = re.compile(r"Times: total = (\d+), boot = (\d+), init = (\d+), finish = (\d+)")
JOB_TIME = re.compile(r"Job \d+ finished: .* took ([\d.]+) ms")


def _run(folder: Path, extra: tuple[str, ...]) -> dict[str, float]:
    """One `dslc run`: its wall seconds, Spark's job seconds, and the Python tasks' mean boot + init seconds."""
    logs = folder / "target" / "logs"
    for old in logs.glob("*.log"):
        old.unlink()
    wall = dslc_run(folder / "pipeline.flow", "--conf", "spark.log.level=INFO", *extra)
    log = "".join(path.read_text() for path in logs.glob("*.log"))
    tasks = [tuple(map(int, m)) for m in TASK_TIMES.findall(log)]
    return {"wall": wall, "job": sum(float(t) for t in JOB_TIME.findall(log)) / 1000,
            "start": statistics.mean(boot + init for _, boot, init, _ in tasks) / 1000}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.run_start", description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="runs with each daemon, alternating")
    parser.add_argument("--rows", type=int, default=20_000)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="dslc-bench-start-") as root:
        folder = Path(root)
        (folder / "in").mkdir()
        for part in range(2):
            (folder / f"in/{part}.json").write_text("".join(
                json.dumps({"id": f"r{i}", "customer": f"c{i % 97}"}) + "\n" for i in range(part, args.rows, 2)))
        (folder / "tags.py").write_text(TAGS)
        (folder / "pipeline.flow").write_text(FLOW)
        figures: dict[str, list[dict[str, float]]] = {"dslc's daemon": [], "Spark's own daemon": []}
        for _ in range(args.runs):
            figures["dslc's daemon"].append(_run(folder, ()))
            figures["Spark's own daemon"].append(_run(folder, SPARKS_OWN))
    medians = {name: {k: statistics.median(r[k] for r in runs) for k in runs[0]} for name, runs in figures.items()}
    print(f"`dslc run` of one ENRICH over {args.rows:,} rows on local[2], median of {args.runs} runs each, alternating\n")
    print("| Python workers from | whole run (s) | Spark job (s) | a Python task's boot + init (s) |")
    print("|---|---|---|---|")
    for name, m in medians.items():
        print(f"| {name} | {m['wall']:.2f} | {m['job']:.2f} | {m['start']:.2f} |")
    ours, theirs = medians["dslc's daemon"], medians["Spark's own daemon"]
    print(f"\nWith dslc's daemon a Python task starts {theirs['start'] / ours['start']:.2f}x faster, the Spark job takes "
          f"{ours['job'] / theirs['job']:.2f}x the time and the whole run {ours['wall'] / theirs['wall']:.2f}x.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
