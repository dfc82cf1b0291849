"""EXPECT's per-batch judgement of a 10,000-row batch in which rows break (section 18's five
constraints, all with an Arrow form): this tree's flush, which takes each constraint's flags only
at the broken rows, against an earlier revision's (default f98b85e, the flush before that change:
every constraint's flags made a Python list of all 10,000 rows), with 1, 100 and 10,000 broken
rows; and what those lists cost alone, as a share of the flush before. Each revision runs in its
own fresh process (bench.check_time.baseline_tree), the two interleaved, ROUNDS times; CPU time,
no Spark.

    .venv/bin/python -m bench.expect_flags [--baseline REV] [--rounds N]
"""
from __future__ import annotations

import argparse
import functools
import json
import random
import statistics
import sys
import tempfile
import time
import timeit
from collections.abc import Callable
from pathlib import Path

from dslc.runtime.core import expect_batch
from dslc.runtime.core.expect_operator import ExpectOperator

from .check_time import baseline_tree, run_in_revision
from .expect_cpu import expect

ROWS, ROUNDS, BROKEN = 10_000, 15, (1, 100, 10_000)


class _Collect:
    def __init__(self) -> None:
        self.rows: list = []

    def emit(self, row) -> None:
        self.rows.append(row)

    def emit_dead_letter(self, letter) -> None:
        raise AssertionError("every constraint WARNs")

    def emit_watermark(self, watermark) -> None:
        pass


def _batch(broken: int) -> list[dict]:
    rng = random.Random(17)
    rows = [{"device": f"d{i % 100}", "value": rng.uniform(0.0, 100.0), "score": rng.uniform(0.0, 100.0)}
            for i in range(ROWS)]
    for n in range(0, ROWS, ROWS // broken):
        rows[n] = {**rows[n], "value": 250.0}          # breaks value_range (WARN: passed on, counted)
    return rows


def _flush(rows: list[dict]) -> tuple[Callable[[], None], ExpectOperator]:
    operator = ExpectOperator(expect(True))
    operator.open(_Collect())

    def once() -> None:
        operator.output.rows.clear()
        operator.pending.extend(rows)
        operator.flush()
    return once, operator


def _cpu(fn: Callable[[], None]) -> float:
    return min(timeit.repeat(fn, number=10, repeat=3, timer=time.process_time)) / 10


def _as_lists(masks: list) -> None:
    """Every constraint's flags of every row as a Python list: what the flush before made."""
    [mask.to_pylist() for mask in masks]


def flushes() -> None:
    """One round in this process, of the `dslc` it imports: per count of broken rows, the CPU of
    one flush and of every row's flags as lists, and the judgement (to check both revisions agree);
    printed as JSON."""
    out = {}
    for broken in BROKEN:
        rows = _batch(broken)
        flush, operator = _flush(rows)
        flush()
        assert operator.row_broken is None, "every constraint is judged per batch"
        judged = {"failed": list(operator.failed), "passed": len(operator.output.rows)}
        masks = expect_batch.broken(operator.batch_checks, rows)
        out[broken] = {"flush": _cpu(flush), "lists": _cpu(functools.partial(_as_lists, masks)), **judged}
    print(json.dumps(out))


def _round(path_first: Path | None) -> dict[int, dict]:
    """`flushes` in a fresh process importing dslc from `path_first` (None: this tree)."""
    flushed = run_in_revision("from bench.expect_flags import flushes; flushes()", path_first)
    return {int(k): v for k, v in flushed.items()}


def summary(before: list[dict], now: list[dict]) -> dict[str, float]:
    """Medians over the rounds of one count of broken rows; the ratio is taken per round."""
    assert all(b["failed"] == n["failed"] and b["passed"] == n["passed"] == ROWS for b, n in zip(before, now)), \
        "the same judgement both ways"
    ratios = sorted(n["flush"] / b["flush"] for b, n in zip(before, now))
    return {"before": statistics.median(b["flush"] for b in before), "now": statistics.median(n["flush"] for n in now),
            "lists": statistics.median(b["lists"] for b in before), "ratio": statistics.median(ratios),
            "low": ratios[0], "high": ratios[-1]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", default="f98b85e")
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    args = parser.parse_args(argv)
    runs: dict[str, list[dict[int, dict]]] = {"before": [], "now": []}
    with tempfile.TemporaryDirectory() as tmp:
        base = baseline_tree(args.baseline, Path(tmp) / "base")
        for _ in range(args.rounds):
            runs["before"].append(_round(base))
            runs["now"].append(_round(None))
    print(f"EXPECT's flush of {ROWS:,} rows (5 constraints, all per batch), CPU, {args.baseline} (before) against "
          f"this tree (now), median of {args.rounds} interleaved rounds in fresh processes")
    print("| broken rows | before, ms | every row's flags alone | now, ms | now / before (rounds) |")
    print("|---:|---:|---:|---:|---:|")
    for broken in BROKEN:
        m = summary([r[broken] for r in runs["before"]], [r[broken] for r in runs["now"]])
        print(f"| {broken:,} | {m['before'] * 1e3:.2f} | {m['lists'] / m['before']:.1%} | {m['now'] * 1e3:.2f} | "
              f"{m['ratio']:.2f} ({m['low']:.2f}-{m['high']:.2f}) |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
