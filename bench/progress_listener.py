"""The CPU a STREAMING job spends hearing its micro-batches' progress: pyspark's listeners against
the session's one feed (runtime/spark/progress_feed.py).

A dslc job keeps figures from every micro-batch in up to three places (the rows counted per
SOURCE and SINK, the EXPECT figures, --lineage's RUNNING events). Before, each had a pyspark
StreamingQueryListener, and pyspark turns every update into Python objects field by field for
each of them: some forty JVM calls, plus, per observed metric, a look-up of a JVM class by its
short name that searches every jar of the class path. The feed asks once per update for its JSON.

Each round runs the same query (one micro-batch per input file, a dozen observed metrics, as a
dslc query has) in a fresh local[2] session of its own process, once heard the old way and once
through the feed, in turn; the figure is the CPU (the driver's Python and the JVM together) per
micro-batch, and the ratio is measured within the run.

    .venv/bin/python -m bench.progress_listener [--rounds 3] [--batches 40]
"""
from __future__ import annotations

import argparse
import statistics
import time

from .check_time import run_in_revision

WAYS = ("pyspark listeners", "one feed")

ROUND = r"""
import json, os, sys, tempfile, time
from pathlib import Path
from bench.common import spark_session
from pyspark.sql import functions as F

way, batches, metrics = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
spark = spark_session()
jvm_pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()

def cpu():
    fields = Path(f"/proc/{jvm_pid}/stat").read_text().rsplit(")", 1)[1].split()
    return time.process_time() + (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

heard = []
def keep(update):
    heard.append(update)

if way == "one feed":
    from dslc.runtime.spark import progress_feed
    for _ in range(3):
        progress_feed.listen(spark, lambda update: keep(update))
else:
    from pyspark.sql.streaming import StreamingQueryListener

    class Listener(StreamingQueryListener):
        def onQueryStarted(self, event): pass
        def onQueryProgress(self, event):
            progress = event.progress
            keep({"id": str(progress.id), "batchId": progress.batchId,
                  "observedMetrics": {k: r.asDict() for k, r in progress.observedMetrics.items()}})
        def onQueryIdle(self, event): pass
        def onQueryTerminated(self, event): pass
    for _ in range(3):
        spark.streams.addListener(Listener())

folder = Path(tempfile.mkdtemp(prefix="dslc-bench-progress-"))
(folder / "in").mkdir()
for i in range(batches):
    (folder / "in" / f"{i:04d}.json").write_text("".join(json.dumps({"k": j}) + "\n" for j in range(10)))
df = spark.readStream.schema("k INT").option("maxFilesPerTrigger", 1).json(str(folder / "in"))
for m in range(metrics):
    df = df.observe(f"dslc_rows_{m}", F.count(F.lit(1)).alias("rows"))

def run(name):
    heard.clear()
    query = (df.writeStream.format("noop").queryName(name)
             .option("checkpointLocation", str(folder / name)).trigger(availableNow=True).start())
    query.awaitTermination()
    deadline = time.monotonic() + 120
    while len(heard) < 3 * batches and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(heard) == 3 * batches, (len(heard), batches)

run("warm")                     # the JVM's first query: classes and JIT, the same for both ways
start = cpu()
run("measured")
print(json.dumps({"cpu_per_batch_ms": (cpu() - start) / batches * 1000}))
spark.stop()
"""


def measure(way: str, batches: int, metrics: int) -> float:
    """CPU ms per micro-batch of one round, heard `way`, in a process (and session) of its own."""
    return run_in_revision(ROUND, None, way, str(batches), str(metrics))["cpu_per_batch_ms"]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batches", type=int, default=40)
    parser.add_argument("--metrics", type=int, default=12)
    args = parser.parse_args(argv)
    runs: dict[str, list[float]] = {way: [] for way in WAYS}
    started = time.monotonic()
    for _ in range(args.rounds):
        for way in WAYS:
            runs[way].append(measure(way, args.batches, args.metrics))
    old, new = (statistics.median(runs[way]) for way in WAYS)
    print(f"{args.batches} micro-batches, {args.metrics} observed metrics, 3 parts hearing each update; "
          f"median of {args.rounds} rounds ({time.monotonic() - started:.0f} s)\n")
    print("| way | CPU per micro-batch (ms) |\n|---|---:|")
    for way in WAYS:
        print(f"| {way} | {statistics.median(runs[way]):.1f} |")
    print(f"\none feed / pyspark listeners: {new / old:.2f}")


if __name__ == "__main__":
    main()
