"""The SQL conformance corpus: TPC-H's 22 queries and hand-written ones, each checked by dslc
over the relations of tables.flow and compared with what Spark's own analyzer says."""
from __future__ import annotations

import re
from pathlib import Path

HERE = Path(__file__).parent
TABLES = (HERE / "tables.flow").read_text(encoding="utf-8")
TPCH = sorted((HERE / "tpch").glob("*.sql"))
QUERIES = sorted((HERE / "queries").glob("*.sql"))
BROKEN = sorted((HERE / "broken").glob("*.sql"))
FIRST_QUERY_LINE = TABLES.count("\n") + 2      # the query starts on the line after "STREAM q ="
_EXPECT = re.compile(r"^-- expect: (E\d{4}) (\d+):(\d+)(?: ([A-Z_.]+))?\s*$")


def program(sql: str) -> str:
    """A .flow program reading the corpus tables: the query as STREAM q, written to the console."""
    return f"{TABLES}STREAM q =\n{sql.rstrip().rstrip(';')};\nSINK q TO CONSOLE;\n"


def expectation(path: Path) -> tuple[str, int, int]:
    """(code, line, col) a broken query's first line promises, line counted in the .sql file."""
    match = _EXPECT.match(path.read_text(encoding="utf-8").splitlines()[0])
    assert match, f"{path.name}: first line must be '-- expect: CODE LINE:COL [CONDITION]'"
    return match[1], int(match[2]), int(match[3])


def expected_condition(path: Path) -> str | None:
    """Spark's error condition a broken query's first line names after its position, if any
    (`-- expect: E0212 2:14 MISSING_AGGREGATION`): both dslc's message and Spark's error carry it."""
    match = _EXPECT.match(path.read_text(encoding="utf-8").splitlines()[0])
    return match[4] if match else None


def spark_views(spark, plan) -> None:
    """Empty temp views with the declared schemas of the plan's sources."""
    for node in plan.nodes:
        if node.name != "q":
            ddl = ", ".join(f"`{f.name}` {f.type}" for f in node.schema)
            spark.createDataFrame([], ddl).createOrReplaceTempView(node.name)


def spark_schema(spark, sql: str) -> list[tuple[str, str]]:
    """(name, type) of every output column as Spark's analyzer derives them, types in dslc's
    canonical spelling."""
    from dslc.compiler.sparksql.sqltypes import canonical

    fields = spark.sql(sql).schema.fields
    return [(f.name, canonical(f.dataType.simpleString()) or f.dataType.simpleString().upper()) for f in fields]
