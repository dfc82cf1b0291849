"""Section 16's ENRICH WITH SQL lookups, this tree against an earlier one, in one run: BATCH 200
against one query per row, as operators alone and as whole jobs, the two trees interleaved.

One private PostgreSQL (dslc.testing.postgres) holds the customers (1,000,000 by default) for
both trees. Each round runs, for each tree in turn, a fresh process of that tree's own Python
(its `.venv`, its `bench/databases.py`): the operators alone (a) BATCH 200 CAPACITY 2000 and (b)
one query per row CAPACITY 100, then, unless `--no-jobs`, the whole jobs (a) and (b) at `--orders`
rows on a SparkSession of its own (warmed by a small run of each first). The ratios (a)/(b)
are each tree's own, measured minutes apart on the same database; the best round of each counts.

    .venv/bin/python -m bench.sql_batch_ab --baseline-tree DIR [--rounds N] [--orders N] [--no-jobs]

DIR is a checkout of the baseline revision with its own `.venv` (e.g. a `git worktree add`).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_RUN = r"""
import json, os, sys, tempfile
from pathlib import Path
from bench import databases as D
url, customers, orders, jobs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
found = {}
for name, (batch, capacity, rows) in {"batched": (True, 2000, 100_000), "per_row": (False, 100, 20_000)}.items():
    D._operator_rate(url, batch, capacity, 1_000, customers)              # pools, prepared statements
    found["operator " + name] = D._operator_rate(url, batch, capacity, rows, customers)
if jobs:
    from bench.common import run_flow, spark_session
    spark_session()
    port = url.rsplit(":", 1)[1].split("/")[0]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for n, tag in ((2_000, "warm"), (orders, "job")):
            D._orders(root / tag, ("batched", "per_row"), n, customers)
            for name in ("batched", "per_row"):
                flow = D._flow(root / tag / name, D.FLOW.format(port=port, body=D.BODIES[name]))
                done = run_flow(flow)
                if tag == "job":
                    found["job " + name] = n / done.seconds
                    task = done.metrics.get("enriched", {}).get("task_seconds", 0.0)
                    if task:
                        found["in job " + name] = n / task * D.PARTITIONS
print("RESULT " + json.dumps(found))
"""


def _one(tree: Path, url: str, customers: int, orders: int, jobs: bool) -> dict[str, float]:
    done = subprocess.run([str(tree / ".venv" / "bin" / "python"), "-c", _RUN, url, str(customers), str(orders),
                           "1" if jobs else "0"], cwd=tree, capture_output=True, text=True, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode or not lines:
        raise RuntimeError(f"{tree}: exit {done.returncode}\n{done.stderr[-3000:]}")
    return json.loads(lines[-1][len("RESULT "):])


def _table(runs: dict[str, list[dict[str, float]]]) -> str:
    """Each tree's best round of each rate, and its (a)/(b) ratio per round: (a) and (b) of one round
    ran in one process minutes apart, so the ratio is fairer on a shared machine than best against best."""
    best = {side: {name: max(run[name] for run in side_runs) for name in side_runs[0]} for side, side_runs in runs.items()}
    lines = ["| rows per second (best round) | before | after | after/before |", "|---|---:|---:|---:|"]
    for name in best["before"]:
        lines.append(f"| {name} | {best['before'][name]:,.0f} | {best['after'][name]:,.0f} | "
                     f"{best['after'][name] / best['before'][name]:.2f} |")
    lines += ["", "| (a) BATCH 200 / (b) one query per row | before, per round | after, per round | "
              "before, median | after, median |", "|---|---|---|---:|---:|"]
    for kind in ("operator", "job", "in job"):
        if f"{kind} batched" not in best["before"]:
            continue
        ratios = {side: [run[f"{kind} batched"] / run[f"{kind} per_row"] for run in side_runs]
                  for side, side_runs in runs.items()}
        lines.append(f"| {kind} | " + " | ".join(", ".join(f"{r:.2f}x" for r in ratios[side]) for side in ("before", "after"))
                     + " | " + " | ".join(f"{statistics.median(ratios[side]):.2f}x" for side in ("before", "after")) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from dslc.testing.postgres import LocalPostgres

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline-tree", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--customers", type=int, default=1_000_000)
    parser.add_argument("--orders", type=int, default=60_000)
    parser.add_argument("--no-jobs", action="store_true")
    args = parser.parse_args(argv)
    runs: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
    with LocalPostgres() as db, tempfile.TemporaryDirectory():
        db.execute("ALTER SYSTEM SET log_statement = 'none'", database="postgres", user="postgres")
        db.execute("SELECT pg_reload_conf()", database="postgres", user="postgres")
        os.environ["CRM_PASSWORD"] = db.password
        db.execute("CREATE TABLE customers (n BIGINT, customer_id TEXT PRIMARY KEY, tier TEXT, risk DOUBLE PRECISION)")
        db.copy_rows("customers", ["n", "customer_id", "tier", "risk"],
                     [(i, f"c{i:07d}", "gold" if i % 3 else "silver", i % 100 / 100) for i in range(args.customers)])
        db.execute("ANALYZE customers")
        for round_ in range(args.rounds):
            for side, tree in (("before", args.baseline_tree), ("after", ROOT)) if round_ % 2 == 0 else \
                    (("after", ROOT), ("before", args.baseline_tree)):
                runs[side].append(_one(tree.resolve(), db.url(), args.customers, args.orders, not args.no_jobs))
                print(side, round_, json.dumps(runs[side][-1]), file=sys.stderr, flush=True)
    print(f"ENRICH WITH SQL, {args.customers:,} customers, {args.rounds} interleaved rounds, "
          f"whole jobs at {args.orders:,} orders")
    print(_table(runs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
