"""SQL conformance: every corpus query passes `dslc check` with exactly the output schema Spark's
analyzer derives (names and types, asked from Spark here), and every broken variant gets the right
error at the right line and column, which Spark also rejects."""
from __future__ import annotations

from pathlib import Path

import corpus
import pytest

from dslc.compiler.cli.main import main
from dslc.compiler.diagnostics import CompileError
from dslc.compiler.pipeline import check_text


@pytest.fixture(scope="module")
def analyzer(spark):
    """A Spark session of its own (same JVM, its own temp views) over empty tables of the
    declared schemas."""
    session = spark.newSession()
    corpus.spark_views(session, check_text(corpus.TABLES + "SINK users TO CONSOLE;\n"))
    return session


def test_the_corpus_is_complete():
    assert len(corpus.TPCH) == 22
    assert len(corpus.QUERIES) >= 50
    assert len(corpus.BROKEN) >= 12


@pytest.mark.parametrize("path", corpus.TPCH + corpus.QUERIES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_schema_is_sparks(path: Path, analyzer):
    sql = path.read_text(encoding="utf-8")
    checked = check_text(corpus.program(sql), "corpus.flow").node("q").schema
    assert [(f.name, f.type) for f in checked] == corpus.spark_schema(analyzer, sql)


@pytest.mark.parametrize("path", corpus.BROKEN, ids=lambda p: p.stem)
def test_broken_query_is_reported_where_it_is_wrong(path: Path, analyzer):
    code, line, col = corpus.expectation(path)
    sql = path.read_text(encoding="utf-8")
    with pytest.raises(CompileError) as info:
        check_text(corpus.program(sql), "corpus.flow")
    first = info.value.diagnostics[0]
    where = info.value.source.line_col(first.span.start)
    assert (first.code, where[0] - corpus.FIRST_QUERY_LINE + 1, where[1]) == (code, line, col)
    with pytest.raises(Exception) as spark_error:       # Spark agrees: the query is wrong
        _ = analyzer.sql(sql).schema   # analysed when its schema is read
    assert type(spark_error.value).__name__ in ("AnalysisException", "ParseException")
    condition = corpus.expected_condition(path)
    if condition is not None:                           # ... and for the same reason
        assert f"({condition})" in first.message
        assert f"[{condition}]" in str(spark_error.value)


def test_dslc_check_accepts_tpch_as_one_pipeline(tmp_path, capsys):
    """The 22 TPC-H queries as streams of one .flow file, through the command line."""
    streams = "".join(f"STREAM {p.stem} =\n{p.read_text(encoding='utf-8').rstrip()};\nSINK {p.stem} TO CONSOLE;\n"
                      for p in corpus.TPCH)
    flow = tmp_path / "tpch.flow"
    flow.write_text(corpus.TABLES + streams, encoding="utf-8")
    assert main(["check", str(flow)]) == 0, capsys.readouterr().err


ODD = ("x'zz'", "1e400", "1_000", "sum(qty) OVER (ORDER BY ts ROWS 2 PRECEDING)", "lag(qty, 1.5) OVER (ORDER BY ts)",
       "CAST(NULL AS INT)", "TIMESTAMP_NTZ '2020-01-01'", "INTERVAL '1' YEAR + INTERVAL '2' MONTH", "array()", "map()",
       "reduce(scores, 0, (a, x) -> a + x, a -> a * 2)", "transform(items, i -> i.n * i.price)",
       "filter(items, i -> i.n > 1)[0].sku", "aggregate(array(1.5, 2.5), 0.0, (a, x) -> a + x)", "stack(2, qty, qty)",
       "posexplode(attrs)", "inline(array(struct(1 AS a, 'x' AS b)))", "(SELECT 1) + 1", "udf_unknown(qty)",
       "qty IN (SELECT qty FROM events)", "array_sort(scores, (l, r) -> l - r)", "ts::date", "amount DIV 2",
       "sum(amount) FILTER (WHERE flag) OVER (PARTITION BY kind)", "count(*) OVER w2", "row_number() OVER ()",
       "CASE WHEN flag THEN amount WHEN NOT flag THEN price END", "nvl(amount, 1.5)", "try_divide(qty, 0)")


@pytest.mark.parametrize("expression", ODD)
def test_odd_expressions_never_crash_the_checker(expression: str):
    """Names and types are derived for whatever sqlglot parses; a query is accepted or rejected
    with diagnostics, never a traceback."""
    for query in (f"SELECT {expression} FROM events", f"SELECT * FROM (SELECT {expression} FROM events) t"):
        try:
            check_text(corpus.program(query), "corpus.flow")
        except CompileError:
            pass
