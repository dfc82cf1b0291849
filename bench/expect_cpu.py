"""CPU per row of an EXPECT inside a chain, judged per row (its Python forms) and per batch
(pyarrow.compute), in one process: section 18's five constraints over 200,000 good rows in chunks
of 10,000 (a chain's input batches), the two interleaved, median of ROUNDS.

Section 18 times whole jobs, whose wall time swings on a loaded machine far more than the
EXPECT costs; this isolates the operator (what the chain's Python pass pays for it).

    .venv/bin/python -m bench.expect_cpu [--rounds N]
"""
from __future__ import annotations

import argparse
import random
import re
import statistics
import sys
import time

import sqlglot

from dslc.compiler.plan import expect_arrow
from dslc.compiler.plan.expect_python import translate
from dslc.runtime import config as C
from dslc.runtime.core.chain import OperatorChain
from dslc.runtime.core.expect_operator import ExpectOperator

from .expect_overhead import CONSTRAINTS

COLUMNS = {"device": ("device", "STRING"), "value": ("value", "DOUBLE"), "score": ("score", "DOUBLE")}
ROWS, CHUNK, ROUNDS = 200_000, 10_000, 5


def expect(batched: bool) -> C.Expect:
    """Section 18's EXPECT as the chain gets it, with or without the Arrow forms."""
    constraints = []
    for name, text in re.findall(r"CONSTRAINT (\w+) CHECK \((.*)\)", CONSTRAINTS):
        tree = sqlglot.parse_one(text, dialect="spark")
        constraints.append(C.Constraint(name=name, line=1, sql=text, python=translate(tree, COLUMNS).python,
                                        arrow=expect_arrow.translate(tree, COLUMNS).python if batched else None))
    return C.Expect(name="scored", line=1, constraints=tuple(constraints))


def cpu_per_row(batched: bool, chunks: list[list[dict]]) -> float:
    """Nanoseconds of CPU per row for the operator alone in a chain of its own."""
    chain = OperatorChain([ExpectOperator(expect(batched))])
    started = time.process_time()
    passed = sum(len(emitted.rows) for emitted in chain.run(chunks))
    seconds = time.process_time() - started
    assert passed == ROWS, "every row is good: all of them pass"
    return seconds / ROWS * 1e9


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    args = parser.parse_args(argv)
    rng = random.Random(17)
    rows = [{"device": f"d{i % 100}", "value": rng.uniform(0.0, 100.0), "score": rng.uniform(0.0, 100.0)}
            for i in range(ROWS)]
    chunks = [rows[i:i + CHUNK] for i in range(0, ROWS, CHUNK)]
    runs: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(args.rounds):
        for batched in (False, True):
            runs[batched].append(cpu_per_row(batched, chunks))
    per_row, per_batch = statistics.median(runs[False]), statistics.median(runs[True])
    print(f"CPU per row of section 18's EXPECT alone ({ROWS:,} rows in chunks of {CHUNK:,}, median of "
          f"{args.rounds} interleaved rounds)")
    print("| judged | ns/row | against per row |\n|---|---:|---:|")
    print(f"| per row (Python forms) | {per_row:.0f} | 1.00 |")
    print(f"| per batch (pyarrow.compute) | {per_batch:.0f} | {per_batch / per_row:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
