"""PIPELINE and SET, as the contract states them."""
from __future__ import annotations

import pytest

from dslc.compiler.diagnostics import CompileError
from dslc.compiler.pipeline import check_file

pytestmark = pytest.mark.spark

SOURCE = "SOURCE orders FROM JSON 'in/orders/' SCHEMA (id STRING, ts TIMESTAMP);\n"


def test_batch_is_the_default_mode(flow):
    """"PIPELINE ... -- optional, at most one; MODE BATCH is the default"."""
    assert check_file(flow.write(SOURCE + "SINK orders TO CONSOLE;")).settings.mode == "BATCH"
    assert check_file(flow.write("PIPELINE p;\n" + SOURCE + "SINK orders TO CONSOLE;")).settings.mode == "BATCH"


def test_at_most_one_pipeline_and_trigger_only_in_streaming(flow):
    """"PIPELINE ... -- optional, at most one"; "TRIGGER EVERY 10s; -- or TRIGGER AVAILABLE NOW"
    (docs/language.md: "STREAMING only (E0304 in BATCH)"). Both problems in one run."""
    path = flow.write("PIPELINE a;\nPIPELINE b MODE BATCH TRIGGER EVERY 10s;\n" + SOURCE + "SINK orders TO CONSOLE;")
    with pytest.raises(CompileError) as failed:
        check_file(path)
    assert sorted(d.code for d in failed.value.diagnostics) == ["E0210", "E0304"]


def test_trigger_available_now_processes_what_is_there_then_stops(flow):
    """"TRIGGER AVAILABLE NOW (process what is there, then stop)": the job returns, with every row."""
    flow.rows_file("in/orders/1.json", [{"id": "o1", "ts": "2024-01-01T00:00:00Z"}])
    flow.rows_file("in/orders/2.json", [{"id": "o2", "ts": "2024-01-01T00:00:01Z"}])
    flow.run(SOURCE + "SINK orders TO PARQUET 'out/o';", "STREAMING")
    assert sorted(r["id"] for r in flow.read("out/o")) == ["o1", "o2"]


def test_set_is_spark_configuration(flow):
    """"SET spark.sql.shuffle.partitions = 8; -- Spark configuration" (docs/language.md: the
    session time zone is UTC "unless a SET overrides it")."""
    flow.rows_file("in/orders/1.json", [{"id": "o1", "ts": "2024-01-01T12:00:00Z"}])
    try:
        flow.run("SET spark.sql.session.timeZone = 'America/New_York';\nSET spark.dslc.contract = 'set';\n" + SOURCE
                 + "STREAM h = SELECT id, hour(ts) AS hour FROM orders;\nSINK h TO PARQUET 'out/h';", "BATCH")
        assert flow.spark.conf.get("spark.dslc.contract") == "set"
    finally:
        flow.spark.conf.set("spark.sql.session.timeZone", "UTC")
    assert flow.read("out/h") == [{"id": "o1", "hour": 7}]


def test_without_set_the_session_time_zone_is_utc(flow):
    """docs/language.md: "The session time zone is always pinned to UTC (`spark.sql.session.timeZone`),
    unless a SET overrides it."""
    flow.spark.conf.set("spark.sql.session.timeZone", "Asia/Tokyo")
    try:
        flow.rows_file("in/orders/1.json", [{"id": "o1", "ts": "2024-01-01T12:00:00Z"}])
        flow.run(SOURCE + "STREAM h = SELECT id, hour(ts) AS hour FROM orders;\nSINK h TO PARQUET 'out/h';", "BATCH")
    finally:
        flow.spark.conf.set("spark.sql.session.timeZone", "UTC")
    assert flow.read("out/h") == [{"id": "o1", "hour": 12}]


def test_streaming_console_only_needs_no_checkpoint(flow):
    """docs/language.md: CHECKPOINT is "Required in STREAMING when a sink is not CONSOLE (E0308).
    Without it, `target/checkpoint/<name>` is used."""
    flow.rows_file("in/orders/1.json", [{"id": "o1", "key": "k"}])
    flow.run("PIPELINE loose MODE STREAMING TRIGGER AVAILABLE NOW;\n" + SOURCE + "SINK orders TO CONSOLE;")
    assert (flow.folder / "target/checkpoint/loose").is_dir()


SPEC_FLOW = """
SET spark.sql.shuffle.partitions = 2;
SOURCE orders FROM JSON 'data/orders/'
  OPTIONS (multiLine = 'false')
  SCHEMA (order_id STRING, customer_id STRING, amount DOUBLE, country STRING, ts TIMESTAMP)
  WATERMARK ts DELAY 30s;
SOURCE rule_updates FROM CSV 'data/rules/'
  OPTIONS (header = 'true')
  SCHEMA (rule_id STRING, op STRING, country STRING, max_amount DOUBLE);
BROADCAST rules FROM rule_updates KEY rule_id OP op;
STREAM paid = SELECT order_id, customer_id, amount, country, ts
              FROM orders WHERE amount > 0;
STREAM enriched = ENRICH paid
  WITH HTTP GET '{url}/kv/{{customer_id}}'
  RETURNS (tier STRING, risk DOUBLE)
  ASYNC UNORDERED CAPACITY 100 TIMEOUT 1s
  RETRY 3 BACKOFF 50ms EXPONENTIAL
  CACHE 10000 TTL 5m
  RATE 500 PER SECOND
  ON MISS NULL
  ON TIMEOUT DEAD LETTER 'target/dlq/enrich'
  ON ERROR FAIL;
STREAM flagged = MATCH enriched AGAINST rules AS r
  WHERE enriched.country = r.country AND enriched.amount > r.max_amount;
STREAM scored = PROCESS enriched WITH BROADCAST rules USING PYTHON 'fraud_rules:score'
  RETURNS (order_id STRING, score DOUBLE);
SINK flagged TO PARQUET 'target/out/flagged' MODE APPEND;
SINK scored TO JSON 'target/out/scored';
"""

FRAUD_RULES = """
def score(row, rules):
    limits = [r["max_amount"] for r in rules.values() if r["country"] == row["country"]]
    yield {"order_id": row["order_id"], "score": row["amount"] / min(limits) if limits else 0.0}
"""


def test_the_contracts_example_pipeline_runs_in_both_modes(flow, service, mode):
    """The contract's own example (spec "Statements"), statement for statement, with the service
    and the user module it names: the same rows and one call per customer in both modes. The count
    per customer and minute after MATCH is checked here in BATCH; in STREAMING its window closes only
    when a later row moves the watermark past it, which tests/e2e's fraud test does, comparing
    both modes row for row."""
    from contract.support import Reply, by
    service.script("c1", Reply(body={"tier": "gold", "risk": 0.1}))
    service.script("c2", Reply(status=404))
    flow.module("fraud_rules", FRAUD_RULES)
    flow.rows_file("data/orders/1.json", [
        {"order_id": "o1", "customer_id": "c1", "amount": 150.0, "country": "NL", "ts": "2024-01-01T10:00:00Z"},
        {"order_id": "o2", "customer_id": "c2", "amount": 50.0, "country": "NL", "ts": "2024-01-01T10:00:10Z"},
        {"order_id": "o3", "customer_id": "c1", "amount": 0.0, "country": "NL", "ts": "2024-01-01T10:00:20Z"},
        {"order_id": "o4", "customer_id": "c1", "amount": 500.0, "country": "DE", "ts": "2024-01-01T10:00:30Z"}])
    flow.text_file("data/rules/1.csv", "rule_id,op,country,max_amount\nr1,set,NL,100\nr2,set,NL,10\nr3,set,DE,1000\n")
    flow.text_file("data/rules/2.csv", "rule_id,op,country,max_amount\nr2,delete,,\n")
    text = SPEC_FLOW.format(url=service.url)
    head = ("PIPELINE fraud_alerts MODE STREAMING CHECKPOINT 'target/chk/fraud' TRIGGER AVAILABLE NOW;\n"
            if mode == "STREAMING" else "PIPELINE fraud_alerts;\n")
    if mode == "BATCH":   # STREAMING: windows close only once the watermark passes (see below)
        text += ("STREAM per_customer = SELECT customer_id, window(ts, '1 minute') AS w, count(*) AS n\n"
                 "  FROM flagged GROUP BY customer_id, window(ts, '1 minute');\n"
                 "SINK per_customer TO JSON 'target/out/per_customer';\n")
    flow.run(head + text)
    assert by(flow.read("target/out/flagged"), "order_id", "rule_id", "tier", "r_country") == [
        ("o1", "r1", "gold", "NL")]
    assert by(flow.read("target/out/scored", "json"), "order_id", "score") == [
        ("o1", 1.5), ("o2", 0.5), ("o4", 0.5)]
    assert service.calls == {"c1": 1, "c2": 1}                         # CACHE: one call per customer
    if mode == "BATCH":
        assert by(flow.read("target/out/per_customer", "json"), "customer_id", "n") == [("c1", 1)]
