"""`dslc check --spark`: Spark's analyzer over empty tables of the declared schemas finds what the
fast check cannot (struct fields, aggregation rules, function signatures), at the right place."""
from __future__ import annotations

from dslc.compiler.cli.main import main
from dslc.compiler.pipeline import check_text
from dslc.compiler.plan.dry_run import dry_run

ORDERS = ("SOURCE orders FROM JSON 'data/orders/'\n"
          "  SCHEMA (order_id STRING, customer_id STRING, amount DECIMAL(10, 2), country STRING,\n"
          "          ts TIMESTAMP, address STRUCT<city: STRING, zip: INT>);\n")


def where(source, diagnostic) -> tuple[int, int]:
    return source.line_col(diagnostic.span.start)


def test_a_valid_pipeline_passes_with_the_schemas_dslc_inferred(spark):
    text = (ORDERS + "STREAM a = SELECT country, count(*), sum(amount), avg(amount) FROM orders GROUP BY country;\n"
            "STREAM b = SELECT country, `count(1)` * 2 AS twice, `sum(amount)` / 3 FROM a;\n"
            "STREAM c = ENRICH b WITH HTTP GET 'http://h/{country}' RETURNS (tier STRING);\n"
            "STREAM d = SELECT tier, address.city FROM c JOIN orders USING (country);\n"
            "SINK d TO CONSOLE;\n")
    checked = check_text(text, "p.flow")
    from dslc.compiler.source import SourceFile
    problems, mismatches = dry_run(checked, SourceFile("p.flow", text), spark)
    assert problems == [] and mismatches == []


def test_what_only_spark_knows_is_reported_where_it_is_written(spark):
    from dslc.compiler.source import SourceFile
    text = (ORDERS + "STREAM a = SELECT country,\n  named_struct('city', country).cty AS c FROM orders;\n"
            "STREAM b = SELECT customer_id, amount + 1 AS a FROM orders GROUP BY customer_id, amount + 2;\n"
            "STREAM c = SELECT * FROM a;\n"
            "SINK b TO CONSOLE;\nSINK c TO CONSOLE;\n")
    checked = check_text(text, "p.flow")       # the fast check accepts it (a computed struct's fields and
                                               # `amount` grouped only inside `amount + 2` are Spark's)
    source = SourceFile("p.flow", text)
    problems, _ = dry_run(checked, source, spark)
    assert [(p.code, *where(source, p)) for p in problems] == [("E0212", 5, 17), ("E0212", 6, 32)]
    assert "FIELD_NOT_FOUND" in problems[0].message and "MISSING_AGGREGATION" in problems[1].message
    assert source.text[problems[0].span.start:problems[0].span.end] == "city"    # where Spark's query context points


def test_dslc_check_spark_on_the_command_line(spark, tmp_path, capsys):
    flow = tmp_path / "p.flow"
    flow.write_text(ORDERS + "STREAM b = SELECT customer_id, amount + 1 AS a FROM orders\n"
                    "  GROUP BY customer_id, amount + 2;\n"
                    "SINK b TO CONSOLE;\n")
    assert main(["check", str(flow)]) == 0
    capsys.readouterr()
    assert main(["check", "--spark", str(flow)]) == 1
    err = capsys.readouterr().err
    assert "p.flow:4:32: error[E0212]: Spark rejects this query (MISSING_AGGREGATION)" in err
    assert "SQLQueryContextLogger" not in err


def test_numbers_are_not_positions_when_the_pipeline_turns_ordinals_off(spark):
    """`SET spark.sql.groupByOrdinal/orderByOrdinal = false`: Spark groups and sorts by the number
    itself, so the fast check's position rules (GROUP_BY_POS_OUT_OF_RANGE...) must not refuse it,
    and the schema is still Spark's; with the settings on, the same queries are refused."""
    from dslc.compiler.diagnostics import CompileError
    from dslc.compiler.source import SourceFile
    queries = ("STREAM a = SELECT count(*) AS n FROM orders GROUP BY 5;\n"
               "STREAM b = SELECT order_id, amount FROM orders ORDER BY 3;\n"
               "SINK a TO CONSOLE;\nSINK b TO CONSOLE;\n")
    off = "SET spark.sql.groupByOrdinal = false;\nSET spark.sql.orderByOrdinal = false;\n"
    text = off + ORDERS + queries
    checked = check_text(text, "p.flow")
    assert [(f.name, f.type) for f in checked.node("a").schema] == [("n", "BIGINT")]
    problems, mismatches = dry_run(checked, SourceFile("p.flow", text), spark)
    assert problems == [] and mismatches == []
    try:
        check_text(ORDERS + queries, "p.flow")
    except CompileError as refused:
        assert [d.message.split(":")[0] for d in refused.diagnostics] == [
            "Spark rejects this query (GROUP_BY_POS_OUT_OF_RANGE)", "Spark rejects this query (ORDER_BY_POS_OUT_OF_RANGE)"]
    else:
        raise AssertionError("positions out of range were accepted with the settings on")
