"""`:show NAME` computes only NAME's lineage, writes nothing, and cuts the input before the first
external call when the operators on the way are row-by-row (compiler side, no Spark)."""
from __future__ import annotations

import pytest

from dslc.compiler.cli.repl_session import Session
from dslc.compiler.pipeline import check_text, lower_plan
from dslc.compiler.plan import subset

FLOW = """\
PIPELINE p MODE BATCH;
SOURCE orders FROM JSON 'data/' SCHEMA (order_id STRING, customer_id STRING, amount DOUBLE);
STREAM paid = SELECT order_id, customer_id, amount FROM orders WHERE amount > 0;
STREAM enriched = ENRICH paid WITH HTTP GET 'http://127.0.0.1:1/c/{customer_id}'
  RETURNS (tier STRING) ON ERROR DEAD LETTER 'target/dlq';
STREAM gold = SELECT * FROM enriched WHERE tier = 'gold';
STREAM per_tier = SELECT tier, count(*) AS n FROM enriched GROUP BY tier;
STREAM other = ENRICH orders WITH HTTP GET 'http://127.0.0.1:1/o/{order_id}' RETURNS (x STRING);
SINK per_tier TO JSON 'target/out';
SINK other TO JSON 'target/other';
"""


@pytest.fixture
def session(tmp_path):
    flow = tmp_path / "p.flow"
    flow.write_text(FLOW)
    s = Session()
    s.load(flow)
    return s


def test_show_plan_keeps_only_what_the_name_reads(session):
    shown = session.show_plan("paid")
    assert [n.name for n in shown.nodes] == ["orders", "paid"]
    assert [k.connector for k in shown.sinks] == ["CONSOLE"]
    assert [n.name for n in session.show_plan("gold").nodes] == ["orders", "paid", "enriched", "gold"]


def test_show_job_writes_nothing_and_holds_dead_letters(session, tmp_path):
    job = session.show_job("gold", 5, str(tmp_path))
    assert "enriched = captured.keep(enriched)" in job.code and "chains.keep" not in job.code
    assert "enriched = captured.hold_dead_letters(enriched, ('enriched',))" in job.code
    assert "target/dlq" not in job.code and "write_" not in job.code and ".write" not in job.code and "127.0.0.1:1/o/" not in job.code
    assert "paid.limit(5)," in job.code and job.limit.operator == "enriched"
    assert job.code.rstrip().endswith('failure.run_main(main)  # a failure: one clear line (under dslc run, the traceback in its log)') \
        and "return captured" in job.code


def test_row_limit_only_on_row_by_row_paths(session):
    assert subset.row_limit(session.show_plan("enriched"), "enriched").operator == "enriched"
    assert subset.row_limit(session.show_plan("paid"), "paid").operator is None
    blocked = subset.row_limit(session.show_plan("per_tier"), "per_tier")
    assert blocked.operator is None and "per_tier aggregates" in blocked.reason and "enriched" in blocked.reason


@pytest.mark.parametrize("sql, reason", [
    ("SELECT DISTINCT customer_id FROM orders", "DISTINCT"),
    ("SELECT * FROM orders ORDER BY amount", "sorts"),
    ("SELECT *, row_number() OVER (ORDER BY amount) AS r FROM orders", "aggregates"),
    ("SELECT * FROM orders LIMIT 3", "LIMIT"),
])
def test_operators_that_need_all_rows_block_the_limit(sql, reason):
    p = check_text("SOURCE orders FROM JSON 'd' SCHEMA (order_id STRING, customer_id STRING, amount DOUBLE);\n"
                   f"STREAM q = {sql};\n"
                   "STREAM e = ENRICH q WITH HTTP GET 'http://h/{customer_id}' RETURNS (t STRING);\n"
                   "SINK e TO CONSOLE;")
    assert subset.row_limit(p, "e").operator == "e"           # the ENRICH itself is row-by-row
    assert reason in (subset.not_row_by_row(p.node("q")) or "")


def test_writing_nothing_is_batch_only():
    p = check_text("PIPELINE s MODE STREAMING;\nSOURCE r FROM RATE;\nSINK r TO CONSOLE;")
    with pytest.raises(ValueError, match="BATCH"):
        lower_plan(p, job_folder=".", writes=False)
