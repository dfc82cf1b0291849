"""CPU per element of one EnrichOperator alone, no Spark, against the bench service's /instant
answers over HTTP: this tree against an earlier revision, measured in one run on the same machine.

Section 8's ceiling is what dslc's runtime costs per call on top of its HTTP client; this is that
runtime alone, where an element's whole life runs (admission, the attempt loop and its policies,
the call pool, TIMEOUT deadlines, emission): an HTTP ENRICH UNORDERED CAPACITY 100 with no policy,
and with RETRY 2, a RATE it never reaches and ON OUTAGE PAUSE (each one's hooks run for every
element), driven on the loop as a chain drives it and from another thread (tests, benchmarks).
Each revision runs in its own fresh process, the two interleaved, ROUNDS times; a run reports
the best of 3 passes over N elements (process CPU time, so the loop's thread counts).

    .venv/bin/python -m bench.operator_cpu [--baseline REV] [--rounds N] [--rows N]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from .check_time import baseline_tree, before_after_table, run_in_revision
from .service import LatencyService

ROUNDS = 3

_RUN = r"""
import json, sys, time
from dslc.runtime import config as C
from dslc.runtime.core.async_operator import EnrichOperator
from dslc.runtime.core.loop_chain import LoopDriver

url, rows, passes = sys.argv[1], int(sys.argv[2]), 3

class Counting:
    def __init__(self):
        self.rows = 0
    def emit(self, row):
        self.rows += 1
    def emit_watermark(self, watermark):
        pass
    def emit_dead_letter(self, letter):
        raise AssertionError(letter)

names = iter(range(10**6))

def config(policies):
    extra = dict(retry=C.Retry(2), rate=C.Rate(1e6), outage=C.Outage("PAUSE", pause_s=30.0)) if policies else {}
    return C.Enrich(name=f"op{next(names)}", line=1, call=C.HttpCall(url), returns=(C.Column("value", "STRING"),),
                    key_columns=("id",), mode=C.Mode.UNORDERED, capacity=100, timeout_s=30.0, **extra)

def one_pass(policies, on_loop, n):
    op, out = EnrichOperator(config(policies)), Counting()
    driver = LoopDriver([op]) if on_loop else None
    op.open(out)
    elements = [{"id": f"k{i}"} for i in range(n)]
    started = time.process_time()
    try:
        if driver is not None:
            driver.call(driver.chunk(elements))
            driver.call(driver.finish())
        else:
            for element in elements:
                op.process_element(element)
            op.finish()
        op.close()
        spent = time.process_time() - started
    finally:
        op.dispose()
    assert out.rows == n, (out.rows, n)
    return spent / n * 1e6

out = {}
for policies in (False, True):
    for on_loop in (True, False):
        one_pass(policies, on_loop, 500)      # warm-up: imports, the loop, the HTTP session
        name = f"{'RETRY + RATE + ON OUTAGE' if policies else 'no policy'}, {'on the loop' if on_loop else 'from a thread'}"
        out[name] = min(one_pass(policies, on_loop, rows) for _ in range(passes))
print(json.dumps(out))
"""


def measure(path_first: Path | None, url: str, rows: int) -> dict[str, float]:
    """µs of CPU per element of each workload, in a fresh process importing dslc from
    `path_first` (None: this tree)."""
    return run_in_revision(_RUN, path_first, url, str(rows))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", default="7dc1aba")
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--rows", type=int, default=10_000)
    args = parser.parse_args(argv)
    runs: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
    with tempfile.TemporaryDirectory() as tmp, LatencyService() as service:
        url = service.url("instant")
        base = baseline_tree(args.baseline, Path(tmp) / "base")
        for _ in range(args.rounds):
            runs["before"].append(measure(base, url, args.rows))
            runs["after"].append(measure(None, url, args.rows))
    print(f"CPU per element of one EnrichOperator (HTTP, /instant, UNORDERED CAPACITY 100), {args.baseline} "
          f"(before) against this tree (after); best of 3 passes over {args.rows:,} elements, median of "
          f"{args.rounds} interleaved rounds")
    print(before_after_table(runs, "µs/element", 1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
