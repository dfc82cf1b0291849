"""SOURCE ... FROM TABLE 'name' and SINK ... TO TABLE 'name' [MODE APPEND | OVERWRITE]: tables of
the Spark session's catalog (runtime/spark/tables.py reads and writes them).

A name is `table`, `namespace.table` or `catalog.namespace.table`. Without a SCHEMA clause a
source's columns are the local table's: run locally, the tables live under the pipeline's folder
(`spark-warehouse/<namespace>.db/<table>`, parquet files whose footer carries Spark's own schema),
so the compiler reads them from there; a table kept elsewhere (a cluster's metastore, Unity,
Iceberg) needs its SCHEMA written.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dslc.compiler.diagnostics import error
from dslc.compiler.frontend import ast
from dslc.compiler.plan import logical as plan
from dslc.runtime.warehouse import local_folder

if TYPE_CHECKING:
    from dslc.compiler.plan.planner import _Planner as Planner

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*){0,2}")
_SPARK_KEY = b"org.apache.spark.sql.parquet.row.metadata"
_ATOMS = {"string": "STRING", "long": "BIGINT", "integer": "INT", "short": "SMALLINT", "byte": "TINYINT",
          "double": "DOUBLE", "float": "FLOAT", "boolean": "BOOLEAN", "date": "DATE", "timestamp": "TIMESTAMP",
          "timestamp_ntz": "TIMESTAMP_NTZ", "binary": "BINARY"}


def check_name(planner: Planner, connector: ast.Connector) -> bool:
    """A table name Spark's catalog takes (reported when not)."""
    if connector.arg is None or _NAME.fullmatch(connector.arg.value):
        return True
    planner.add(error("E0309", connector.arg.span, text=connector.arg.value, what="table name",
                      hint="write 'table', 'namespace.table' or 'catalog.namespace.table' (letters, digits, _)"))
    return False


def source_schema(planner: Planner, stmt: ast.Source) -> plan.Schema | None:
    """The columns of a TABLE source without SCHEMA: the local table's (None: reported)."""
    connector = stmt.connector
    if connector.arg is None:
        return None
    folder = local_folder(planner.source.folder, connector.arg.value)
    found = _parquet_schema(folder)
    if found is None:
        planner.add(error("E0310", connector.span, connector="TABLE", role="SOURCE", what="a SCHEMA (...) clause",
                          hint=f"the table is not in this pipeline's local catalog ({folder.relative_to(planner.source.folder)}"
                               " holds no data): write its columns, SCHEMA (col TYPE, ...)"))
        return None
    return tuple(plan.Column(name, kind) for name, kind in found)


def _parquet_schema(folder: Path) -> list[tuple[str, str]] | None:
    """Spark's schema kept in the footer of one of the table's parquet files."""
    import pyarrow.parquet as pq

    if not folder.is_dir():
        return None
    files = sorted(p for p in folder.rglob("*.parquet")
                   if not any(part.startswith(("_", ".")) for part in p.relative_to(folder).parts))
    for path in files:
        metadata = pq.read_schema(path).metadata or {}
        if _SPARK_KEY in metadata:
            fields = json.loads(metadata[_SPARK_KEY])["fields"]
            return [(f["name"], ddl_type(f["type"])) for f in fields]
    return None


def ddl_type(kind: Any) -> str:
    """Spark's type as its JSON form writes it, in the DDL the compiler reads."""
    if isinstance(kind, str):
        if kind.startswith("decimal"):
            return kind.upper().replace(" ", "")
        return _ATOMS.get(kind, kind.upper())
    if kind["type"] == "array":
        return f"ARRAY<{ddl_type(kind['elementType'])}>"
    if kind["type"] == "map":
        return f"MAP<{ddl_type(kind['keyType'])}, {ddl_type(kind['valueType'])}>"
    return "STRUCT<" + ", ".join(f"{f['name']}: {ddl_type(f['type'])}" for f in kind["fields"]) + ">"


def sink_checks(planner: Planner, stmt: ast.Sink, mode: str) -> None:
    """A TABLE sink appends or overwrites (Spark's streaming table sink appends only)."""
    check_name(planner, stmt.connector)
    if mode == "COMPLETE":
        at = next((o.span for o in stmt.options if o.key == "mode"), stmt.connector.span)
        planner.add(error("E0304", at, first="MODE COMPLETE", second="a TABLE sink",
                          hint="Spark's table sink appends each micro-batch: write an aggregation's whole result "
                               "to files (MODE COMPLETE) or to a database (KEY (...) MODE UPSERT)"))
