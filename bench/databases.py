"""16. Databases (issue #43), against a private PostgreSQL (dslc.testing.postgres) holding a
1,000,000-row customers table, on the bench's SparkSession (local[2], PostgreSQL's JDBC jar):

  (a) ENRICH ... WITH SQL ... BATCH 200: one `customer_id = ANY($1)` query per 200 distinct keys,
  (b) the same lookup one query per row (Flink's JDBC lookup), goal (a) >= 5x (b) in rows per second,
      reported for the whole job and for the operator alone (rows per second of the operator's
      task time: what the lookup costs without Spark's fixed start-up and I/O),
  (c) what Spark users do today: a JDBC read of the whole table and a broadcast join; (a) and (c)
      are run at two sizes, and the crossover is where their lines (fixed cost + cost per row) meet,
  (d) the upsert sink in STREAMING (staged, one transaction per micro-batch with its batch id)
      against Spark's plain JDBC append in the same kind of job: a streaming query over the same
      Parquet files whose foreachBatch appends each micro-batch with Spark's JDBC writer; goal
      >= 0.5x in rows per second.

All dslc runs are real `.flow` files compiled by dslc; every ratio is of measurements of this run.

    python -m bench --only databases          # as part of RESULTS.md
    python -m bench.databases [--customers N] [--orders N]    # alone, prints the section
"""
from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

from .common import PARTITIONS, Context, CountingOutput, run_flow, write_input
from .report import Section, Table, Target, ratio

FLOW = """
PIPELINE lookups MODE BATCH;
DATABASE crm AT 'postgresql://app:${{CRM_PASSWORD}}@127.0.0.1:{port}/app';
SOURCE orders FROM PARQUET 'orders/' SCHEMA (order_id STRING, customer_id STRING, amount DOUBLE);
{body}
"""
LOOKUP = """STREAM enriched = ENRICH orders
  WITH SQL crm 'SELECT tier, risk FROM customers WHERE customer_id = {{customer_id}}'
  RETURNS (tier STRING, risk DOUBLE) ASYNC UNORDERED CAPACITY {capacity} TIMEOUT 60s {batch};
SINK enriched TO PARQUET 'out' MODE OVERWRITE;"""
JOINED = """SOURCE customers FROM DATABASE crm TABLE 'customers' PARTITION BY n ({parts})
  SCHEMA (n BIGINT, customer_id STRING, tier STRING, risk DOUBLE);
STREAM enriched = SELECT /*+ BROADCAST(customers) */ o.*, c.tier, c.risk
  FROM orders o LEFT JOIN customers c ON o.customer_id = c.customer_id;
SINK enriched TO PARQUET 'out' MODE OVERWRITE;"""
SINK = """
PIPELINE sinks MODE STREAMING CHECKPOINT 'chk' TRIGGER AVAILABLE NOW;
DATABASE crm AT 'postgresql://app:${{CRM_PASSWORD}}@127.0.0.1:{port}/app';
SOURCE orders FROM PARQUET 'orders/' SCHEMA (order_id STRING, customer_id STRING, amount DOUBLE)
  OPTIONS (maxFilesPerTrigger = {files});
SINK orders TO DATABASE crm TABLE '{table}' {how};
"""
CUSTOMERS = 1_000_000
FILES = 4        # the sinks' input: 4 Parquet files, one micro-batch each


def _flow(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    flow = folder / "pipeline.flow"
    flow.write_text(text)
    return flow


def _orders(root: Path, names: tuple[str, ...], n: int, customers: int, seed: int = 7) -> None:
    rng = random.Random(seed)
    columns = {"order_id": [f"o{i}" for i in range(n)],
               "customer_id": [f"c{rng.randrange(customers):07d}" for _ in range(n)],
               "amount": [float(i % 500) for i in range(n)]}
    for name in names:
        write_input(root / name / "orders", columns, partitions=FILES if name.startswith("sink") else PARTITIONS)


BODIES = {"batched": LOOKUP.format(capacity=2000, batch="BATCH 200"),
          "per_row": LOOKUP.format(capacity=100, batch=""),
          "sync": LOOKUP.format(capacity=1, batch=""),
          "joined": JOINED.format(parts=PARTITIONS)}


def _lookups(db, root: Path, n: int, customers: int, names: tuple[str, ...]) -> dict[str, dict[str, float]]:
    """The runs `names` of (a), (b), (b'), (c) at n orders: whole-job seconds, the operator's task
    seconds and CPU seconds (its metrics), the queries PostgreSQL ran."""
    tag = f"n{n}"
    _orders(root / tag, names, n, customers)
    found: dict[str, dict[str, float]] = {}
    for name in names:
        body = BODIES[name]
        flow = _flow(root / tag / name, FLOW.format(port=db.port, body=body))
        db.execute("SELECT pg_stat_statements_reset()", user="postgres")
        done = run_flow(flow)
        operator = done.metrics.get("enriched", {})
        found[name] = {"seconds": done.seconds, "task_seconds": operator.get("task_seconds", 0.0),
                       "cpu_seconds": operator.get("cpu_seconds", 0.0), "queries": _queries(db)}
    return found


def _operator_rate(url: str, batch: bool, capacity: int, rows: int, customers: int) -> float:
    """Rows per second of one ENRICH ... WITH SQL operator alone (no Spark): the runtime's
    EnrichOperator on its event loop, fed in chunks of 10,000 rows as a chain feeds it."""
    from dslc.compiler.plan.sql_lookup import compile_lookup
    from dslc.runtime.config import Batch, Column, Enrich, Mode, SqlCall
    from dslc.runtime.core.async_operator import EnrichOperator
    from dslc.runtime.core.loop_chain import LoopDriver

    query = "SELECT tier, risk FROM customers WHERE customer_id = {customer_id}"
    found, _ = compile_lookup(query, {"customer_id": "STRING"}, ("tier", "risk"), batch)
    assert found is not None
    call = SqlCall("crm", url, found.query, found.params, found.batch_query, found.batch_key, 10)
    config = Enrich(name="lookup", line=1, call=call, returns=(Column("tier", "STRING"), Column("risk", "DOUBLE")),
                    key_columns=("customer_id",), mode=Mode.UNORDERED, capacity=capacity, timeout_s=60.0,
                    batch=Batch(200, 0.0) if batch else None)
    rng = random.Random(rows)
    data = [{"order_id": f"o{i}", "customer_id": f"c{rng.randrange(customers):07d}"} for i in range(rows)]
    operator, out = EnrichOperator(config), CountingOutput()
    driver = LoopDriver([operator])
    operator.open(out)
    started = time.perf_counter()
    try:
        for at in range(0, rows, 10_000):
            driver.call(driver.chunk(iter(data[at:at + 10_000])))
        driver.call(driver.finish())
        operator.close()
    finally:
        operator.dispose()
    if out.rows != rows:
        raise RuntimeError(f"{out.rows} rows out of {rows}")
    return rows / (time.perf_counter() - started)


def _operator_rates(db, customers: int, rounds: int) -> dict[str, list[float]]:
    """(a), (b) and (b') as operators alone, interleaved, `rounds` rounds after a warm-up."""
    runs = {"batched": (True, 2000, 100_000), "per_row": (False, 100, 20_000), "sync": (False, 1, 5_000)}
    found: dict[str, list[float]] = {name: [] for name in runs}
    for round_ in range(rounds + 1):
        for name, (batch, capacity, rows) in runs.items():
            rate = _operator_rate(db.url(), batch, capacity, rows if round_ else 1_000, customers)
            if round_:
                found[name].append(rate)
    return found


def _queries(db) -> int:
    """How many statements read the customers table since the last reset (pg_stat_statements)."""
    rows = db.query("SELECT coalesce(sum(calls), 0)::bigint AS n FROM pg_stat_statements "
                    "WHERE query LIKE '%FROM customers%' AND query NOT LIKE '%pg_stat_statements%'", user="postgres")
    return int(rows[0]["n"])


def _plain_append_job(spark, db, folder: Path, table: str) -> float:
    """Spark's own JDBC append in a streaming job like dslc's: foreachBatch over the same files."""
    from dslc.runtime.databases.url import jdbc

    options = jdbc(db.url()).options()

    def append(batch, _batch_id: int) -> None:
        batch.write.format("jdbc").options(**options).option("dbtable", table).mode("append").save()

    started = time.perf_counter()
    query = (spark.readStream.schema("order_id STRING, customer_id STRING, amount DOUBLE")
             .option("maxFilesPerTrigger", FILES // 2).parquet(str(folder / "orders"))
             .writeStream.foreachBatch(append).option("checkpointLocation", str(folder / "chk"))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    return time.perf_counter() - started


def _sinks(spark, db, root: Path, n: int, customers: int, rounds: int) -> dict[str, list[float]]:
    """(d): seconds of the STREAMING upsert and exactly-once append sinks, and of the plain append
    job, after a small warm-up round of each; `rounds` rounds, the three kinds interleaved, each
    round into new tables from a new checkpoint."""
    found: dict[str, list[float]] = {"upsert": [], "append": [], "plain": []}
    for round_, rows in enumerate([2_000] + [n] * rounds):
        folder = root / f"sinks{round_}"
        _orders(folder, ("sink_upsert", "sink_append", "sink_plain"), rows, customers, seed=11)
        seconds = {}
        for name, how in (("upsert", "KEY (order_id) MODE UPSERT"), ("append", "MODE APPEND")):
            flow = _flow(folder / f"sink_{name}", SINK.format(port=db.port, files=FILES // 2,
                                                              table=f"sink_{name}{round_}", how=how))
            seconds[name] = run_flow(flow).seconds
        seconds["plain"] = _plain_append_job(spark, db, folder / "sink_plain", f"sink_plain{round_}")
        counts = {t: db.query(f"SELECT count(*)::int AS n FROM sink_{t}{round_}")[0]["n"] for t in found}
        if set(counts.values()) != {rows}:
            raise RuntimeError(f"the sinks wrote {counts} rows, not {rows} each")
        if round_:
            for name, value in seconds.items():
                found[name].append(value)
    return found


def _crossover(small: int, large: int, a: dict, c: dict) -> tuple[float, float, float, float, int | None]:
    """Fixed seconds and seconds per row of (a) and (c) from their two sizes; where they meet."""
    per_a = (a[large]["seconds"] - a[small]["seconds"]) / (large - small)
    per_c = (c[large]["seconds"] - c[small]["seconds"]) / (large - small)
    fixed_a = a[small]["seconds"] - per_a * small
    fixed_c = c[small]["seconds"] - per_c * small
    meet = int((fixed_c - fixed_a) / (per_a - per_c)) if per_a > per_c else None
    return fixed_a, per_a, fixed_c, per_c, meet


def run(ctx: Context, customers: int = CUSTOMERS, orders: int | None = None) -> Section:
    from dslc.testing.postgres import LocalPostgres

    started = time.perf_counter()
    large = orders or 200_000
    small = large // 10
    root = ctx.folder("databases")
    with LocalPostgres() as db:
        # the test cluster logs every statement: a cost per query that would weigh on (b) alone
        db.execute("ALTER SYSTEM SET log_statement = 'none'", database="postgres", user="postgres")
        db.execute("SELECT pg_reload_conf()", database="postgres", user="postgres")
        os.environ["CRM_PASSWORD"] = db.password
        db.execute("CREATE TABLE customers (n BIGINT, customer_id TEXT PRIMARY KEY, tier TEXT, risk DOUBLE PRECISION)")
        db.copy_rows("customers", ["n", "customer_id", "tier", "risk"],
                     [(i, f"c{i:07d}", "gold" if i % 3 else "silver", i % 100 / 100) for i in range(customers)])
        db.execute("ANALYZE customers")
        _lookups(db, root / "warm", 2_000, customers, tuple(BODIES))         # workers, pools, the jar
        at = {small: _lookups(db, root, small, customers, ("batched", "joined")),
              large: _lookups(db, root, large, customers, tuple(BODIES))}
        rounds = 3 if ctx.full else 2
        alone = _operator_rates(db, customers, rounds + 1)
        sink_rounds = _sinks(ctx.spark, db, root, large, customers, rounds)
    sinks = {name: min(values) for name, values in sink_rounds.items()}   # the best round: least disturbed
    lookups = at[large]
    rate = {name: large / figures["seconds"] for name, figures in lookups.items()}
    own = {name: large / figures["task_seconds"] * PARTITIONS for name, figures in lookups.items()
           if figures["task_seconds"]}
    fixed_a, per_a, fixed_c, per_c, meet = _crossover(small, large, {k: v["batched"] for k, v in at.items()},
                                                      {k: v["joined"] for k, v in at.items()})
    section = Section(
        "16. Databases: ENRICH WITH SQL and the upsert sink",
        f"""\
A private PostgreSQL (Debian's server, fsync off, statements not logged) holds {customers:,} customers (primary key customer_id);
{large:,} orders in {PARTITIONS} Parquet files, each of a random customer. (a) `ENRICH ... WITH SQL ... BATCH 200`
(CAPACITY 2000: 10 queries in flight per task), (b) the same lookup one query per row (CAPACITY 100: dslc's
asynchronous lookup without BATCH), (b') one query per row and one at a time per task (CAPACITY 1: what Flink's
JDBC lookup function does, a synchronous lookup per subtask), (c) `SOURCE customers FROM DATABASE ... PARTITION BY n ({PARTITIONS})` and a broadcast LEFT JOIN. Whole job:
rows / wall seconds of the job (Spark's start of the job, Parquet in and out included); operator: rows per
second of the ENRICH's own task time (its metrics' task_seconds over {PARTITIONS} tasks), and the time its Python
workers' threads were on a CPU or waiting for one per row (cpu_seconds: a busy machine makes it grow). The operators
alone: the runtime's EnrichOperator driven on its event loop in this process, as a chain drives it, no Spark,
the three interleaved, the best of the rounds. (a) and (c) also ran
at {small:,} orders: each is fitted as fixed seconds + seconds per row, and the crossover is where the lines
meet. (d) {large:,} rows in {FILES} files, two per micro-batch, STREAMING AVAILABLE NOW into PostgreSQL: dslc's
`MODE UPSERT` (KEY order_id: a staged micro-batch moved by one INSERT ... ON CONFLICT with its batch id, one
transaction) and exactly-once `MODE APPEND`, against a streaming query over the same files whose
foreachBatch appends with Spark's JDBC writer (no exactly once); after a warm-up round of 2,000 rows, the three
interleaved, each round into new tables; the best round of each is compared.""")
    table = Table(["run", "job seconds", "job rows/s", "operator rows/s", "operator busy µs per row", "queries"])
    names = {"batched": "(a) WITH SQL, BATCH 200 (CAPACITY 2000)",
             "per_row": "(b) WITH SQL, one query per row (CAPACITY 100)",
             "sync": "(b') one query per row, one at a time per task (CAPACITY 1)",
             "joined": "(c) JDBC read + broadcast join"}
    for name, label in names.items():
        cpu = lookups[name]["cpu_seconds"]
        table.add(label, f"{lookups[name]['seconds']:.1f}", f"{rate[name]:,.0f}",
                  f"{own[name]:,.0f}" if name in own else "-", f"{cpu / large * 1e6:.0f}" if cpu else "-",
                  f"{lookups[name]['queries']:,}")
    section.tables.append(table)
    best = {name: max(values) for name, values in alone.items()}
    alone_table = Table(["operator alone (no Spark)", "rows/s per round", "best rows/s", "vs (b)"])
    for name, label in (("batched", "(a) BATCH 200, CAPACITY 2000, 100,000 rows"),
                        ("per_row", "(b) one query per row, CAPACITY 100, 20,000 rows"),
                        ("sync", "(b') one query at a time, CAPACITY 1, 5,000 rows")):
        alone_table.add(label, ", ".join(f"{r:,.0f}" for r in alone[name]), f"{best[name]:,.0f}",
                        ratio(best[name], best["per_row"]))
    section.tables.append(alone_table)
    fit = Table(["run", "fixed seconds", "ms per 1,000 rows", f"seconds at {small:,}", f"seconds at {large:,}"])
    fit.add("(a) BATCH 200", f"{fixed_a:.1f}", f"{per_a * 1e6:.1f}", f"{at[small]['batched']['seconds']:.1f}",
            f"{at[large]['batched']['seconds']:.1f}")
    fit.add("(c) JDBC read + join", f"{fixed_c:.1f}", f"{per_c * 1e6:.1f}", f"{at[small]['joined']['seconds']:.1f}",
            f"{at[large]['joined']['seconds']:.1f}")
    section.tables.append(fit)
    sink_table = Table(["STREAMING sink", "seconds per round", "best rows/s", "vs Spark's JDBC append job"])
    for name, label in (("upsert", "dslc MODE UPSERT (exactly once)"), ("append", "dslc MODE APPEND (exactly once)"),
                        ("plain", "foreachBatch + Spark's JDBC append")):
        sink_table.add(label, ", ".join(f"{s:.1f}" for s in sink_rounds[name]), f"{large / sinks[name]:,.0f}",
                       ratio(sinks["plain"], sinks[name]))
    section.tables.append(sink_table)
    whole = rate["batched"] / rate["per_row"]
    operator = own.get("batched", 0) / own["per_row"] if own.get("per_row") else 0
    section.targets.append(Target("(a) BATCH 200 >= 5x (b) one query per row, whole job", f"{whole:.1f}x", whole >= 5))
    section.targets.append(Target("(a) >= 5x (b), the operator's rate within the job", f"{operator:.1f}x", operator >= 5))
    apart = best["batched"] / best["per_row"]
    section.targets.append(Target("(a) >= 5x (b), the operators alone (no Spark)", f"{apart:.1f}x", apart >= 5))
    flink = rate["batched"] / rate["sync"]
    section.targets.append(Target("(a) >= 5x (b') one query at a time, as Flink's synchronous JDBC lookup "
                                  "function sends them, whole job", f"{flink:.1f}x", flink >= 5))
    section.targets.append(Target("STREAMING upsert sink >= 0.5x Spark's JDBC append (same kind of job)",
                                  ratio(sinks["plain"], sinks["upsert"]), sinks["plain"] / sinks["upsert"] >= 0.5))
    section.notes.append(
        f"Crossover of (a) and (c): about {meet:,} rows enriched" if meet is not None else
        "(a) costs no more per row than (c): no crossover in this run")
    section.notes.append(
        f"(a) sent {lookups['batched']['queries']:,} queries for {large:,} rows, (b) {lookups['per_row']['queries']:,}.")
    section.seconds = time.perf_counter() - started
    return section


def main(argv: list[str] | None = None) -> int:
    from .common import spark_session

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--customers", type=int, default=CUSTOMERS)
    parser.add_argument("--orders", type=int, default=200_000)
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="dslc-bench-db-"))
    try:
        spark = spark_session()
        section = run(Context(spark=spark, service=None, full=False, root=root), args.customers, args.orders)
        spark.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(section.markdown())
    return 0


if __name__ == "__main__":
    sys.exit(main())
