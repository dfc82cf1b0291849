"""SOURCE ... FROM DATABASE and SINK ... TO DATABASE on real Spark (its JDBC source and sink)
against a real PostgreSQL, and what stops a run before Spark starts: a database that cannot be
reached, a wrong password (masked), a secret that is not set, a sink table that does not fit."""
from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

COPY = """
PIPELINE copy MODE BATCH;
DATABASE crm AT '{url}';
SOURCE orders FROM DATABASE crm TABLE 'public.src_orders' PARTITION BY order_no (4)
  SCHEMA (order_no BIGINT, customer_id STRING, amount DOUBLE);
STREAM big = SELECT order_no, customer_id, amount * 2 AS doubled FROM orders WHERE amount > 10;
SINK big TO DATABASE crm TABLE 'public.{target}' KEY (order_no) MODE UPSERT;
"""


def test_a_table_read_in_ranges_and_upserted_into_a_table_created_from_the_stream(spark, crm, run_flow, tmp_path):
    crm.execute("DROP TABLE IF EXISTS src_orders; DROP TABLE IF EXISTS big_orders")
    crm.execute("CREATE TABLE src_orders (order_no BIGINT, customer_id TEXT, amount DOUBLE PRECISION)")
    crm.copy_rows("src_orders", ["order_no", "customer_id", "amount"],
                  [(i, f"c{i % 7}", float(i)) for i in range(1, 101)] + [(None, "nobody", 5.0)])
    flow = tmp_path / "pipeline.flow"
    flow.write_text(COPY.format(url=crm.flow_url, target="big_orders"))
    crm.mark()
    run_flow(flow)
    got = crm.query("SELECT order_no, customer_id, doubled FROM big_orders ORDER BY order_no")
    assert [r["order_no"] for r in got] == list(range(11, 101))
    assert got[0] == {"order_no": 11, "customer_id": "c4", "doubled": 22.0}
    ranges = [s for s in crm.statements() if "src_orders" in s and "WHERE" in s and "order_no" in s]
    assert len(ranges) == 4                                          # PARTITION BY order_no (4): four reads
    key = crm.query("SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid "
                    "AND a.attnum = ANY(i.indkey) WHERE i.indrelid = 'big_orders'::regclass AND i.indisprimary")
    assert key == [{"attname": "order_no"}]
    # run again over changed amounts: upserted, never doubled
    crm.execute("UPDATE src_orders SET amount = amount + 1000 WHERE order_no = 11")
    run_flow(flow)
    again = crm.query("SELECT count(*) AS n, max(doubled) AS top FROM big_orders")
    assert again == [{"n": 90, "top": 2022.0}]


def test_a_sink_table_with_an_incompatible_column_is_named(spark, crm, run_flow, tmp_path):
    crm.execute("DROP TABLE IF EXISTS src_orders; DROP TABLE IF EXISTS odd_orders")
    crm.execute("CREATE TABLE src_orders (order_no BIGINT, customer_id TEXT, amount DOUBLE PRECISION)")
    crm.execute("INSERT INTO src_orders VALUES (20, 'c1', 20.0)")
    crm.execute("CREATE TABLE odd_orders (order_no BIGINT PRIMARY KEY, customer_id TEXT, doubled BOOLEAN)")
    flow = tmp_path / "pipeline.flow"
    flow.write_text(COPY.format(url=crm.flow_url, target="odd_orders"))
    with pytest.raises(Exception, match="odd_orders does not fit the stream: its column doubled is boolean, "
                                        "the stream's is DOUBLE"):
        run_flow(flow)


STREAMED = """
PIPELINE streamed MODE STREAMING CHECKPOINT 'chk' TRIGGER AVAILABLE NOW;
DATABASE crm AT '{url}';
SOURCE orders FROM JSON 'in/' SCHEMA (order_id STRING, customer_id STRING, amount DOUBLE);
STREAM enriched = ENRICH orders
  WITH SQL crm 'SELECT tier FROM st_customers WHERE customer_id = {{customer_id}}'
  RETURNS (tier STRING) ASYNC UNORDERED CAPACITY 20 BATCH 10;
SINK enriched TO DATABASE crm TABLE 'st_out' {sink};
"""


@pytest.mark.parametrize("sink", ["MODE APPEND", "KEY (order_id) MODE UPSERT"])
def test_a_replayed_micro_batch_writes_nothing_twice(spark, crm, run_flow, tmp_path, sink):
    crm.execute("DROP TABLE IF EXISTS st_customers; DROP TABLE IF EXISTS st_out")
    crm.execute("CREATE TABLE st_customers (customer_id TEXT PRIMARY KEY, tier TEXT)")
    crm.execute("INSERT INTO st_customers VALUES ('c0', 'gold'), ('c1', 'silver')")
    (tmp_path / "in").mkdir()
    (tmp_path / "in/a.json").write_text("\n".join(json.dumps({"order_id": f"o{i}", "customer_id": f"c{i % 3}",
                                                               "amount": 1.0}) for i in range(30)) + "\n")
    flow = tmp_path / "pipeline.flow"
    flow.write_text(STREAMED.format(url=crm.flow_url, sink=sink))
    run_flow(flow)
    first = crm.query("SELECT order_id, tier FROM st_out ORDER BY order_id")
    assert len(first) == 30 and {r["tier"] for r in first} == {"gold", "silver", None}
    # a crash after the sink committed but before Spark recorded the micro-batch as done: Spark
    # runs it again on restart; the database already holds its id, so nothing is written twice
    commits = tmp_path / "chk/sink0/commits"
    last = max(int(f.name) for f in commits.iterdir() if f.name.isdigit())
    for name in (str(last), f".{last}.crc"):
        (commits / name).unlink(missing_ok=True)
    run_flow(flow)
    assert crm.query("SELECT order_id, tier FROM st_out ORDER BY order_id") == first
    assert crm.query("SELECT count(*)::int AS n FROM dslc_batches WHERE batch_id = 0")[0]["n"] >= 1


BAD = """
DATABASE crm AT '{url}';
SOURCE orders FROM JSON 'in/' SCHEMA (order_id STRING, customer_id STRING);
STREAM enriched = ENRICH orders WITH SQL crm 'SELECT tier FROM st_customers WHERE customer_id = {{customer_id}}'
  RETURNS (tier STRING);
SINK enriched TO JSON 'out';
"""


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _fails_before_spark(run_flow, tmp_path: Path, url: str, capsys) -> str:
    (tmp_path / "in").mkdir()
    (tmp_path / "in/a.json").write_text('{"order_id": "o1", "customer_id": "c1"}\n')
    flow = tmp_path / "pipeline.flow"
    flow.write_text(BAD.format(url=url))
    with pytest.raises(SystemExit) as stopped:
        run_flow(flow)
    assert stopped.value.code == 2
    assert not (tmp_path / "out").exists()
    return capsys.readouterr().err


def test_an_unreachable_database_is_named_before_anything_runs(crm, run_flow, tmp_path, capsys):
    url = crm.flow_url.replace(f":{crm.port}/", f":{_closed_port()}/")
    err = _fails_before_spark(run_flow, tmp_path, url, capsys)
    assert "DATABASE crm" in err and "cannot be reached" in err
    assert crm.password not in err


def test_a_wrong_password_is_refused_and_masked(crm, run_flow, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("CRM_PASSWORD", "not-the-password-42")
    err = _fails_before_spark(run_flow, tmp_path, crm.flow_url, capsys)
    assert "DATABASE crm" in err and "password authentication failed" in err
    assert "not-the-password-42" not in err


def test_a_missing_secret_stops_the_run_naming_it(crm, run_flow, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("CRM_PASSWORD")
    err = _fails_before_spark(run_flow, tmp_path, crm.flow_url, capsys)
    assert "CRM_PASSWORD" in err and "not set" in err


JOINED = """
PIPELINE joined MODE STREAMING CHECKPOINT 'chk' TRIGGER AVAILABLE NOW;
DATABASE crm AT '{url}';
SOURCE orders FROM JSON 'in/' SCHEMA (order_id STRING, customer_id STRING) OPTIONS (maxFilesPerTrigger = 1);
SOURCE customers FROM DATABASE crm TABLE 'held_customers';
STREAM joined = SELECT o.order_id, c.tier FROM orders o JOIN customers c ON o.customer_id = c.customer_id;
SINK joined TO PARQUET 'out';
"""


def test_streaming_reads_a_database_source_once_per_run(spark, crm, run_flow, tmp_path):
    """docs/databases.md: in STREAMING a table is read when the job starts and held for the run;
    three micro-batches (one file each) join it without reading it again. No SCHEMA: the columns
    come from the table at compile time."""
    crm.execute("DROP TABLE IF EXISTS held_customers")
    crm.execute("CREATE TABLE held_customers (customer_id TEXT PRIMARY KEY, tier TEXT)")
    crm.execute("INSERT INTO held_customers VALUES ('c1', 'gold'), ('c2', 'silver')")
    (tmp_path / "in").mkdir()
    for n in range(3):
        (tmp_path / f"in/{n}.json").write_text(json.dumps({"order_id": f"o{n}", "customer_id": f"c{n % 2 + 1}"}) + "\n")
    flow = tmp_path / "pipeline.flow"
    flow.write_text(JOINED.format(url=crm.flow_url))
    crm.mark()
    run_flow(flow)
    rows = sorted((r["order_id"], r["tier"]) for r in spark.read.parquet(str(tmp_path / "out")).collect())
    assert rows == [("o0", "gold"), ("o1", "silver"), ("o2", "gold")]
    assert len(list((tmp_path / "chk/sink0/commits").glob("[0-9]*"))) == 3     # three micro-batches
    reads = [s for s in crm.statements() if "held_customers" in s and s.lstrip().upper().startswith("SELECT")
             and "WHERE 1=0" not in s]       # Spark asks for the columns first
    assert len(reads) == 1, reads
