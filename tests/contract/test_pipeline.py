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
