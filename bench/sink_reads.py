"""`dslc test`'s read of a case's sinks: pyarrow (testing/sink_files.py) against a Spark read job,
on every sink of every case of `dslc test examples/`, the two reads of each sink one after the
other (so the load is the same for both), in one local Spark session:

    .venv/bin/python -m bench.sink_reads [FOLDER]

Prints the cases' outcome, the number of sinks read, each way's total and the ratio; every read
by pyarrow must equal Spark's (as the case's diff sees the rows), or the script fails."""
from __future__ import annotations

import io
import os
import sys
import time
from types import SimpleNamespace

from dslc.testing import harness, runner, sink_files, values


def _compared(rows: list) -> str:
    return repr([values.comparable(r.asDict(recursive=False)) for r in rows])


def main(argv: list[str]) -> int:
    folder = argv[0] if argv else "examples"
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = runner.session()
    totals = {"pyarrow": 0.0, "spark": 0.0}
    reads, unread = 0, 0
    arrow_read = sink_files.read

    def both(sink_folder, files, wanted):
        nonlocal reads, unread
        started = time.perf_counter()
        ours = arrow_read(sink_folder, files, wanted)
        totals["pyarrow"] += time.perf_counter() - started
        started = time.perf_counter()
        theirs = harness._read_sink_with_spark(spark, sink_folder, [SimpleNamespace(name=n) for n in wanted])
        totals["spark"] += time.perf_counter() - started
        reads += 1
        if ours is None:
            unread += 1
        elif _compared(ours) != _compared(theirs):
            raise AssertionError(f"{sink_folder}: pyarrow's rows differ from Spark's")
        return ours

    sink_files.read = both
    try:
        out = io.StringIO()
        runner.run_paths([folder], out=out, spark=spark)
    finally:
        sink_files.read = arrow_read
    print(out.getvalue().rstrip().splitlines()[-1])
    print(f"{reads} sinks read ({unread} left to Spark): pyarrow {totals['pyarrow']:.2f} s, "
          f"Spark {totals['spark']:.2f} s, {totals['spark'] / max(totals['pyarrow'], 1e-9):.0f}x; "
          f"load {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
