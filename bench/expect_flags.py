"""EXPECT's per-batch judgement of a 10,000-row batch in which rows break (section 18's five
constraints, all with an Arrow form): the operator as it is, which takes each constraint's flags
only at the broken rows, against the flush before that change (`Before`: every constraint's flags
made a Python list of all 10,000 rows), with 1, 100 and 10,000 broken rows; and what those lists
cost alone, as a share of the flush. Interleaved rounds in one process, CPU time, no Spark.

    .venv/bin/python -m bench.expect_flags [--rounds N]
"""
from __future__ import annotations

import argparse
import functools
import random
import statistics
import sys
import time
import timeit
from collections.abc import Callable

import pyarrow.compute as pc

from dslc.runtime.core import expect_batch
from dslc.runtime.core.expect_operator import ExpectOperator

from .expect_cpu import expect

ROWS, ROUNDS, BROKEN = 10_000, 15, (1, 100, 10_000)


class Before(ExpectOperator):
    """The flush before the change, kept to be measured against (the per-row fallback left out)."""

    def flush(self) -> None:
        rows = self.pending.copy()
        self.pending.clear()
        masks = expect_batch.broken(self.batch_checks, rows)
        self.rows += len(rows)
        bad = functools.reduce(pc.or_, masks)
        emit = self.output.emit
        if self.row_broken is None and not pc.any(bad).as_py():
            for row in rows:
                emit(row)
            return
        flags = [mask.to_pylist() for mask in masks]
        bad_rows = bad.to_pylist()
        for n, row in enumerate(rows):
            if not bad_rows[n] and (self.row_broken is None or not self.row_broken(row)):
                emit(row)
                continue
            broken = {self.batched[k] for k, flag in enumerate(flags) if flag[n]}
            broken.update(i for i, c in enumerate(self.constraints)
                          if c.arrow is None and self.checks[i](row) is False)
            self.judged(row, sorted(broken))


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


def _flush(kind: type[ExpectOperator], rows: list[dict]) -> tuple[Callable[[], None], ExpectOperator]:
    operator = kind(expect(True))
    operator.open(_Collect())

    def once() -> None:
        operator.output.rows.clear()
        operator.pending.extend(rows)
        operator.flush()
    return once, operator


def _cpu(fn: Callable[[], None]) -> float:
    return min(timeit.repeat(fn, number=10, repeat=3, timer=time.process_time)) / 10


def measure(broken: int, rounds: int) -> dict[str, float]:
    rows = _batch(broken)
    before, before_op = _flush(Before, rows)
    now, now_op = _flush(ExpectOperator, rows)
    before(), now()
    assert before_op.row_broken is None and before_op.failed == now_op.failed and \
        len(before_op.output.rows) == len(now_op.output.rows) == ROWS, "the same judgement both ways"
    masks = expect_batch.broken(now_op.batch_checks, rows)

    def lists() -> None:
        [mask.to_pylist() for mask in masks]
    times: dict[str, list[float]] = {"before": [], "now": [], "lists": []}
    for _ in range(rounds):
        times["before"].append(_cpu(before))
        times["now"].append(_cpu(now))
        times["lists"].append(_cpu(lists))
    ratios = sorted(n / b for b, n in zip(times["before"], times["now"]))
    return {"before": statistics.median(times["before"]), "now": statistics.median(times["now"]),
            "lists": statistics.median(times["lists"]), "ratio": statistics.median(ratios),
            "low": ratios[0], "high": ratios[-1]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    args = parser.parse_args(argv)
    print(f"EXPECT's flush of {ROWS:,} rows (5 constraints, all per batch), CPU, median of {args.rounds} "
          "interleaved rounds")
    print("| broken rows | before, ms | every row's flags alone | now, ms | now / before (rounds) |")
    print("|---:|---:|---:|---:|---:|")
    for broken in BROKEN:
        m = measure(broken, args.rounds)
        print(f"| {broken:,} | {m['before'] * 1e3:.2f} | {m['lists'] / m['before']:.1%} | {m['now'] * 1e3:.2f} | "
              f"{m['ratio']:.2f} ({m['low']:.2f}-{m['high']:.2f}) |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
