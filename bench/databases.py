"""ENRICH WITH SQL against a 1,000,000-row customers table in a private PostgreSQL (issue #43):

  (a) BATCH 200: one `customer_id = ANY($1)` query per 200 distinct keys,
  (b) one query per row (Flink's JDBC lookup), goal (a) >= 5x (b) in rows per second,
  (c) what Spark users do today: a JDBC read of the whole table and a join; the crossover is the
      number of enriched rows below which (a) finishes first (its time grows with rows, (c)'s is
      mostly the table's read),
  (d) the upsert sink in STREAMING (staged, one transaction per micro-batch with its id) against
      Spark's plain JDBC append of the same rows, goal >= 0.5x.

All are real `.flow` files compiled by dslc and run in this process on one SparkSession; the
ratios are of measurements taken in this one run.

    .venv/bin/python -m bench.databases [--customers N] [--orders N]
"""
from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
from pathlib import Path

from .common import PARTITIONS, run_flow, write_input

FLOW = """
PIPELINE lookups MODE BATCH;
DATABASE crm AT 'postgresql://app:${{CRM_PASSWORD}}@127.0.0.1:{port}/app';
SOURCE orders FROM PARQUET 'orders/' SCHEMA (order_id STRING, customer_id STRING, amount DOUBLE);
{body}
"""
LOOKUP = """STREAM enriched = ENRICH orders
  WITH SQL crm 'SELECT tier, risk FROM customers WHERE customer_id = {{customer_id}}'
  RETURNS (tier STRING, risk DOUBLE) ASYNC UNORDERED CAPACITY {capacity} TIMEOUT 30s {batch};
SINK enriched TO PARQUET 'out' MODE OVERWRITE;"""
JOINED = """SOURCE customers FROM DATABASE crm TABLE 'customers' PARTITION BY n ({parts})
  SCHEMA (n BIGINT, customer_id STRING, tier STRING, risk DOUBLE);
STREAM enriched = SELECT /*+ BROADCAST(customers) */ o.*, c.tier, c.risk
  FROM orders o LEFT JOIN customers c ON o.customer_id = c.customer_id;
SINK enriched TO PARQUET 'out' MODE OVERWRITE;"""
SINKS = """
PIPELINE sinks MODE STREAMING CHECKPOINT 'chk' TRIGGER AVAILABLE NOW;
DATABASE crm AT 'postgresql://app:${{CRM_PASSWORD}}@127.0.0.1:{port}/app';
SOURCE orders FROM PARQUET 'orders/' SCHEMA (order_id STRING, customer_id STRING, amount DOUBLE);
SINK orders TO DATABASE crm TABLE '{table}' {how};
"""


def _session():
    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable
    return (SparkSession.builder.master(f"local[{PARTITIONS}]").appName("dslc-bench-databases")
            .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", str(PARTITIONS)).config("spark.log.level", "ERROR")
            .config("spark.driver.memory", "2g")
            .config("spark.jars", os.environ.get("DSLC_JDBC_JAR", "/usr/share/java/postgresql.jar"))
            .getOrCreate())


def _flow(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    flow = folder / "pipeline.flow"
    flow.write_text(text)
    return flow


def main(argv: list[str] | None = None) -> int:
    from dslc.testing.postgres import LocalPostgres

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--customers", type=int, default=1_000_000)
    parser.add_argument("--orders", type=int, default=20_000)
    args = parser.parse_args(argv)
    _session()
    rng = random.Random(7)
    with LocalPostgres() as db, tempfile.TemporaryDirectory(prefix="dslc-bench-db-") as scratch:
        os.environ["CRM_PASSWORD"] = db.password
        db.execute("CREATE TABLE customers (n BIGINT, customer_id TEXT PRIMARY KEY, tier TEXT, risk DOUBLE PRECISION)")
        db.copy_rows("customers", ["n", "customer_id", "tier", "risk"],
                     [(i, f"c{i:07d}", "gold" if i % 3 else "silver", i % 100 / 100) for i in range(args.customers)])
        db.execute("ANALYZE customers")
        root = Path(scratch)
        keys = [f"c{rng.randrange(args.customers):07d}" for _ in range(args.orders)]
        columns = {"order_id": [f"o{i}" for i in range(args.orders)], "customer_id": keys,
                   "amount": [float(i % 500) for i in range(args.orders)]}
        for name in ("batched", "per_row", "joined", "upsert", "append"):
            write_input(root / name / "orders", columns)
        seconds = {}
        bodies = {"batched": LOOKUP.format(capacity=2000, batch="BATCH 200"),
                  "per_row": LOOKUP.format(capacity=100, batch=""),
                  "joined": JOINED.format(parts=PARTITIONS)}
        for name, body in bodies.items():
            run_flow(_flow(root / name, FLOW.format(port=db.port, body=body)))        # warm: workers, pools
            seconds[name] = run_flow(_flow(root / name, FLOW.format(port=db.port, body=body))).seconds
        rate = {name: args.orders / s for name, s in seconds.items()}
        for name, how in (("upsert", "KEY (order_id) MODE UPSERT"), ("append", "MODE APPEND")):
            seconds[name] = run_flow(_flow(root / name, SINKS.format(port=db.port, table=f"sink_{name}",
                                                                         how=how))).seconds
        append_plain = _plain_append(db, root, args.orders)
        per_row_batched = seconds["batched"] / args.orders
        crossover = int(seconds["joined"] / per_row_batched) if per_row_batched else 0
        print(f"customers {args.customers:,}, orders enriched {args.orders:,}, {PARTITIONS} tasks")
        for name in ("batched", "per_row", "joined"):
            print(f"  {name:8s} {seconds[name]:7.2f} s  {rate[name]:10.0f} rows/s")
        print(f"(a)/(b) BATCH 200 vs one query per row: {rate['batched'] / rate['per_row']:.1f}x (goal >= 5x)")
        print(f"(a) vs (c) JDBC read + broadcast join: {rate['batched'] / rate['joined']:.2f}x at {args.orders:,} rows; "
              f"crossover about {crossover:,} rows enriched")
        print(f"(d) STREAMING upsert sink {seconds['upsert']:.2f} s, exactly-once append {seconds['append']:.2f} s, "
              f"Spark's plain JDBC append {append_plain:.2f} s: upsert at {append_plain / seconds['upsert']:.2f}x "
              f"the plain append's rows per second (goal >= 0.5x)")
    return 0


def _plain_append(db, root: Path, rows: int) -> float:
    """Spark's own JDBC append of the same rows, timed as run_flow times a job."""
    import time

    from pyspark.sql import SparkSession

    from dslc.runtime.databases.url import jdbc

    spark = SparkSession.builder.getOrCreate()
    df = spark.read.parquet(str(root / "append" / "orders"))
    options = jdbc(db.url()).options()
    started = time.perf_counter()
    df.write.format("jdbc").options(**options).option("dbtable", "sink_plain").mode("append").save()
    return time.perf_counter() - started


if __name__ == "__main__":
    sys.exit(main())
