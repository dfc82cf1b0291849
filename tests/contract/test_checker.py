"""`dslc check` and `dslc check --spark`, as the contract promises them: every error before Spark
starts, at its line and column, and the output names Spark itself gives (issue #33, items 3 and 8)."""
from __future__ import annotations

import pytest

from dslc.compiler.cli.main import main
from dslc.compiler.pipeline import check_text

pytestmark = pytest.mark.spark

RULES = """SOURCE orders FROM JSON 'in/orders/' SCHEMA (id STRING, tags ARRAY<STRING>, country STRING, amount DOUBLE);
SOURCE rule_updates FROM JSON 'in/rules/' SCHEMA (rule_id STRING, op STRING, country STRING);
BROADCAST rules FROM rule_updates KEY rule_id OP op;
"""


def test_check_spark_looks_at_match_conditions(tmp_path, capsys, spark):
    """A MATCH condition comparing ARRAY<STRING> with STRING fails when the job starts
    (DATATYPE_MISMATCH); `dslc check --spark` says so at the condition, before any data."""
    flow = tmp_path / "p.flow"
    flow.write_text(RULES + "STREAM hit = MATCH orders AGAINST rules AS r\n"
                    "  WHERE orders.tags = r.country;\nSINK hit TO CONSOLE;\n")
    assert main(["check", "--spark", str(flow)]) == 1
    err = capsys.readouterr().err
    assert "p.flow:5:9: error[E0212]: Spark rejects this query (DATATYPE_MISMATCH" in err, err
    assert "orders.tags = r.country" in err


def test_a_valid_match_condition_passes_check_spark(tmp_path, capsys, spark):
    flow = tmp_path / "p.flow"
    flow.write_text(RULES + "STREAM hit = MATCH orders AGAINST rules AS r\n"
                    "  WHERE array_contains(orders.tags, r.country);\nSINK hit TO CONSOLE;\n")
    assert main(["check", "--spark", str(flow)]) == 0, capsys.readouterr().err


def test_check_spark_reports_the_fast_checks_errors_and_sparks_in_one_run(tmp_path, capsys, spark):
    """A misspelt column (the fast check finds it) and a GROUP BY mistake (only Spark's analyzer
    finds it) in one file: one run of `dslc check --spark` reports both."""
    flow = tmp_path / "p.flow"
    flow.write_text(RULES + "STREAM a = SELECT id, cuntry FROM orders;\n"
                    "STREAM b = SELECT id, amount FROM orders GROUP BY id;\n"
                    "SINK a TO CONSOLE;\nSINK b TO CONSOLE;\n")
    assert main(["check", "--spark", str(flow)]) == 1
    err = capsys.readouterr().err
    assert "p.flow:4:23: error[E0204]" in err, err
    assert "p.flow:5:23: error[E0212]: Spark rejects this query (MISSING_AGGREGATION)" in err, err
    assert "2 errors found" in err


def test_a_stream_reading_a_rejected_one_is_not_reported_twice(tmp_path, capsys, spark):
    flow = tmp_path / "p.flow"
    flow.write_text(RULES + "STREAM a = SELECT id, cuntry FROM orders;\n"
                    "STREAM b = SELECT * FROM a;\nSINK b TO CONSOLE;\n")
    assert main(["check", "--spark", str(flow)]) == 1
    err = capsys.readouterr().err
    assert "1 error found" in err and "E0204" in err, err


@pytest.mark.parametrize("call", ["substr(country, 1, 30)", "SUBSTR(country, 2)", "substring(country, 1, 3)",
                                  "any(amount > 1)", "not(amount IS NULL)", "max(struct(amount))"])
def test_unaliased_calls_are_named_as_spark_names_them(call, spark):
    """Spark names an unaliased call by the function name as written (`substr`, not sqlglot's
    `substring`): TPC-DS q79, q85, q99."""
    text = RULES + f"STREAM q = SELECT {call} FROM orders;\nSINK q TO CONSOLE;\n"
    ours = [f.name for f in check_text(text).node("q").schema]
    session = spark.newSession()
    session.createDataFrame([], "id STRING, tags ARRAY<STRING>, country STRING, amount DOUBLE") \
        .createOrReplaceTempView("orders")
    assert ours == [f.name for f in session.sql(f"SELECT {call} FROM orders").schema.fields]


def test_what_spark_accepts_the_fast_check_accepts():
    """Issue #34's false rejections: interval and VOID columns in SCHEMA, a table alias with a
    column list, timestampadd/timestampdiff, FROM-first queries, a comment before the query."""
    text = ("SOURCE s FROM JSON 'in/' SCHEMA (ym INTERVAL YEAR TO MONTH, ds INTERVAL DAY TO SECOND,\n"
            "  d INTERVAL DAY, nothing VOID, ts TIMESTAMP, n INT);\n"
            "STREAM a = /* intervals */ SELECT ym, ds, d, nothing FROM s;\n"
            "STREAM b = SELECT x, y FROM s AS t(ym2, ds2, x, y) WHERE x > INTERVAL '1' DAY;\n"
            "STREAM c = FROM s SELECT timestampadd(HOUR, 1, ts), timestampdiff(MONTH, ts, ts);\n"
            "SINK a TO CONSOLE;\nSINK b TO CONSOLE;\nSINK c TO CONSOLE;\n")
    plan = check_text(text)
    assert [(f.name, f.type) for f in plan.node("a").schema] == [
        ("ym", "INTERVAL YEAR TO MONTH"), ("ds", "INTERVAL DAY TO SECOND"), ("d", "INTERVAL DAY"), ("nothing", "VOID")]
    assert [f.name for f in plan.node("b").schema] == ["x", "y"]
    assert [(f.name, f.type) for f in plan.node("c").schema] == [
        ("timestampadd(HOUR, 1, ts)", "TIMESTAMP"), ("timestampdiff(MONTH, ts, ts)", "BIGINT")]


def test_operand_types_spark_refuses_are_reported_by_the_fast_check():
    """`1 + true` and ARRAY<STRING> = STRING fail in Spark's analyzer whatever the data: the
    fast check says so with Spark's condition, at the expression."""
    from dslc.compiler.diagnostics import CompileError
    text = RULES + "STREAM q = SELECT amount + (id = 'x'),\n  tags = country FROM orders;\nSINK q TO CONSOLE;\n"
    with pytest.raises(CompileError) as info:
        check_text(text, "p.flow")
    found = [(d.code, info.value.source.line_col(d.span.start), d.message) for d in info.value.diagnostics]
    assert [(code, at) for code, at, _ in found] == [("E0212", (4, 19)), ("E0212", (5, 3))]
    assert all("DATATYPE_MISMATCH.BINARY_OP_DIFF_TYPES" in m for *_, m in found)


@pytest.mark.parametrize("clause, ceiling", [
    ("", None), ("UP TO 5%", "UP TO 5%"), ("UP TO 100%", "UP TO 100%"), ("UP TO 12 ROWS", "UP TO 12 ROWS"),
])
def test_a_dead_letter_ceiling_reaches_the_operator(clause, ceiling):
    from dslc.compiler.codegen import configs

    plan = check_text("SOURCE s FROM JSON 'in/' SCHEMA (id STRING);\n"
                      "STREAM e = ENRICH s WITH HTTP GET 'http://127.0.0.1:1/x/{id}' RETURNS (x INT)\n"
                      f"  ON MISS DEAD LETTER 'dlq' ON ERROR DEAD LETTER 'dlq' {clause};\nSINK e TO CONSOLE;\n")
    config = configs.enrich(plan.node("e"))
    assert (str(config.ceiling) if config.ceiling else None) == ceiling
