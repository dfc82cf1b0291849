"""Turn Spark's golden SQL tests into dslc flows judged by Spark's own analyzer.

Spark's `sql/core/src/test/resources/sql-tests/results/**.sql.out` files hold each test query
with the schema Spark gave it (`-- !query`, `-- !query schema`, `-- !query output`). This script
replays every file in a fresh Spark session of the installed PySpark: the statements that create
views and tables are run, and each query is (1) analysed by Spark — its output schema or the
condition of the error Spark raises — and (2) written as a flow, `STREAM q = <query>;` over one
SOURCE per view or table it names, with the schema Spark gives that relation. Judging by the
installed Spark rather than by the golden schema removes the drift between the Spark version the
golden files were written for and the one dslc targets (the golden schema is kept beside it).

    python tests/sql/golden/convert.py --git /path/to/spark/.git [--commit SHA] [--out FILE]

reads the files at that commit of a Spark clone (`git show`, no checkout needed) and writes
`corpus.jsonl` (one query a line) with a first line naming the commit and PySpark version.
tests/sql/golden/test_golden.py runs dslc's fast check over it.
"""
from __future__ import annotations

import argparse
import json
import logging
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RESULTS = "sql/core/src/test/resources/sql-tests/results/"
HERE = Path(__file__).parent
# Folders whose tests need what a flow cannot hold (Python/Scala UDFs registered by the suite).
SKIPPED_FOLDERS = ("udf/", "udaf/")
_QUERY_START = re.compile(r"^\s*(\(\s*)*(SELECT|WITH|FROM|VALUES|TABLE)\b", re.I)
_COMMENTS = re.compile(r"^(\s*(--[^\n]*\n|/\*.*?\*/))*", re.S)
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def blocks(text: str) -> list[tuple[str, str]]:
    """(query, golden schema) of every block of a .sql.out file."""
    found = []
    for part in re.split(r"^-- !query\n", text, flags=re.M)[1:]:
        sql, _, rest = part.partition("\n-- !query schema\n")
        schema = rest.split("\n", 1)[0]
        found.append((sql.strip(), schema.strip()))
    return found


def is_query(sql: str) -> bool:
    """A statement that returns rows and that a STREAM could hold (not a command)."""
    return bool(_QUERY_START.match(_COMMENTS.sub("", sql, count=1)))


def quoted(name: str) -> str:
    return name if _IDENT.match(name) else "`" + name.replace("`", "``") + "`"


def flow_text(sql: str, relations: dict[str, list[tuple[str, str]]]) -> str:
    """The flow: a SOURCE per relation the query names, the query as STREAM q, a console SINK."""
    lines = []
    for name, columns in relations.items():
        ddl = ", ".join(f"{quoted(c)} {t}" for c, t in columns)
        lines.append(f"SOURCE {quoted(name)} FROM PARQUET 'data/{name}' SCHEMA ({ddl});")
    lines.append("STREAM q =")
    lines.append(sql.rstrip().rstrip(";"))
    lines.append(";")                    # on a line of its own: the query may end in a -- comment
    lines.append("SINK q TO CONSOLE;")
    return "\n".join(lines) + "\n"


def relations(spark) -> dict[str, list[tuple[str, str]]]:
    """The session's views and tables with their schemas (views that no longer resolve left out)."""
    found = {}
    try:
        tables = spark.catalog.listTables()
    except Exception:           # noqa: BLE001 - the test dropped the current database
        spark.sql("USE default")
        tables = spark.catalog.listTables()
    for table in tables:
        try:
            fields = spark.table(quoted(table.name)).schema.fields
        except Exception:       # noqa: BLE001 - a view whose definition no longer resolves
            continue
        found[table.name] = [(f.name, f.dataType.simpleString()) for f in fields]
    return found


def named_in(sql: str, known: dict[str, list[tuple[str, str]]]) -> dict[str, list[tuple[str, str]]]:
    """The relations a query names (as words)."""
    return {name: columns for name, columns in known.items()
            if re.search(rf"(?<![\w.`]){re.escape(name)}(?![\w`])", sql, re.I)}


def analysed(spark, sql: str) -> dict:
    """Spark's verdict on a query: its output schema, or the condition of its error."""
    try:
        fields = spark.sql(sql).schema.fields
    except Exception as exc:    # noqa: BLE001 - AnalysisException, ParseException, ... via Py4J
        condition = exc.getCondition() if hasattr(exc, "getCondition") else None
        return {"error": condition or type(exc).__name__}
    return {"schema": [[f.name, f.dataType.simpleString()] for f in fields]}


def convert(spark, path: str, text: str) -> list[dict]:
    """Replay one golden file in a fresh session; one record per query."""
    session = spark.newSession()
    records = []
    known = relations(session)
    for index, (sql, golden) in enumerate(blocks(text)):
        if not is_query(sql):
            if re.match(r"\s*(CREATE|DROP|ALTER|USE|REPLACE)\b", sql, re.I):
                # what makes views and tables; data (INSERT, LOAD) does not change a schema, and
                # every query is judged under Spark's defaults (no SET)
                try:
                    session.sql(sql).collect()
                except Exception:   # noqa: BLE001 - a statement the test expects to fail
                    pass
                known = relations(session)
            continue
        records.append({"file": path, "index": index, "sql": sql, "golden": golden,
                        "spark": analysed(session, sql), "flow": flow_text(sql, named_in(sql, known))})
    for table in session.catalog.listTables():
        try:
            session.sql(f"DROP {'VIEW' if table.isTemporary else 'TABLE'} IF EXISTS {quoted(table.name)}")
        except Exception:           # noqa: BLE001
            pass
    return records


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--git", required=True, help="a Spark clone's git directory")
    parser.add_argument("--commit", default="HEAD")
    parser.add_argument("--out", default=str(HERE / "corpus.jsonl"))
    parser.add_argument("--only", help="a regular expression the file paths must match")
    parser.add_argument("--start", type=int, default=1, help="go on from the n-th file, appending to --out")
    args = parser.parse_args(argv)

    def git(*words: str) -> str:
        return subprocess.run(["git", "--git-dir", args.git, *words], check=True, capture_output=True,
                              text=True).stdout

    commit = git("rev-parse", args.commit).strip()
    paths = [p[len(RESULTS):] for p in git("ls-tree", "-r", "--name-only", commit, RESULTS).split()
             if p.endswith(".sql.out") and not p[len(RESULTS):].startswith(SKIPPED_FOLDERS)]
    if args.only:
        paths = [p for p in paths if re.search(args.only, p)]

    import pyspark
    from pyspark.sql import SparkSession
    warehouse = tempfile.mkdtemp(prefix="golden-warehouse-")
    spark = (SparkSession.builder.master("local[1]").appName("golden-convert")
             .config("spark.sql.warehouse.dir", warehouse).config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "1").getOrCreate())
    spark.sparkContext.setLogLevel("OFF")
    logging.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)      # PySpark logs each error
    started = time.monotonic()
    with open(args.out, "w" if args.start == 1 else "a", encoding="utf-8") as out:
        if args.start == 1:
            out.write(json.dumps({"spark_commit": commit, "pyspark": pyspark.__version__,
                                  "files": len(paths)}) + "\n")
        for n, path in enumerate(paths, 1):
            if n < args.start:
                continue
            try:
                records = convert(spark, path, git("show", f"{commit}:{RESULTS}{path}"))
            except Exception as exc:    # noqa: BLE001 - a file whose set-up this replay cannot do
                print(f"{path}: left out ({str(exc).splitlines()[0]})", file=sys.stderr)
                continue
            finally:
                spark.sql("USE default")
            for record in records:
                out.write(json.dumps(record) + "\n")
            print(f"[{n}/{len(paths)}] {path} ({time.monotonic() - started:.0f}s)", file=sys.stderr)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
