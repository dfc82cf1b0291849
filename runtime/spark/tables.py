"""SOURCE ... FROM TABLE 'name' and SINK ... TO TABLE 'name' [MODE APPEND | OVERWRITE]: the Spark
session's catalog (`read.table`, `readStream.table`, `saveAsTable`, `writeStream.toTable`), so a
pipeline reads and writes whatever tables the cluster has (Hive, Delta, Iceberg, Unity).

Run locally (Spark's in-memory catalog, no catalog of the user's own), the catalog forgets its
tables when the session ends; dslc keeps them under the pipeline's folder instead, in Spark's
layout (`spark-warehouse/<namespace>.db/<table>`, parquet), and registers each table the job
uses from its folder when the job starts, so tables persist between runs and two pipelines of
one session (a test run, the REPL) each see their own. A sink's missing namespace is created.
A streaming table sink is Spark's file sink into the table's folder: each micro-batch is
committed in its `_spark_metadata` log, which every reader of the table follows (exactly once).
"""
from __future__ import annotations

from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from dslc.runtime.warehouse import local_folder

from . import metrics
from .streaming import trigger_args


def local(spark: SparkSession) -> bool:
    """True when dslc keeps the tables itself: Spark's in-memory catalog, no session catalog of
    the user's (a Delta or Iceberg SparkSessionCatalog keeps its own)."""
    implementation = spark.conf.get("spark.sql.catalogImplementation", None) or "in-memory"
    return implementation == "in-memory" and not spark.conf.get("spark.sql.catalog.spark_catalog", None)


def _quoted(name: str) -> str:
    return ".".join(f"`{part}`" for part in name.split("."))


def _namespace(name: str) -> str | None:
    parts = name.split(".")
    return ".".join(parts[:-1]) if len(parts) > 1 else None


def _location(spark: SparkSession, name: str) -> tuple[str, str] | None:
    """(type, location) of a table the catalog has (None when it has none)."""
    if not spark.catalog.tableExists(name):
        return None
    rows = spark.sql(f"DESCRIBE TABLE EXTENDED {_quoted(name)}").collect()
    found = {row["col_name"]: row["data_type"] for row in rows}
    return found.get("Type", ""), found.get("Location", "")


def _has_data(folder: Path) -> bool:
    return folder.is_dir() and any(not p.name.startswith(".") for p in folder.iterdir())


def prepare(spark: SparkSession, folder: str, name: str, *, sink: bool = False) -> str | None:
    """Make `name` known to the session: locally, its namespace (kept under the pipeline's folder)
    and, when its folder holds data, the table itself (registered again if the catalog had it
    from another folder); elsewhere only a sink's missing namespace. The table's folder (local)
    or None (a catalog of the cluster's)."""
    namespace = _namespace(name)
    if not local(spark):
        if sink and namespace:
            spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {_quoted(namespace)}")
        return None
    path = local_folder(folder, name)
    if namespace and namespace.lower() not in ("default", "spark_catalog.default"):
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {_quoted(namespace)} LOCATION '{path.parent.as_posix()}'")
    known = _location(spark, name)
    wanted = path.resolve().as_uri()
    if known is not None and known[1].rstrip("/") != wanted.rstrip("/") and known[1].rstrip("/") != f"file:{path}":
        if known[0].upper() != "EXTERNAL":
            raise RuntimeError(f"table {name} is a managed table of this session at {known[1]}, not this pipeline's "
                               f"({path}): drop it, or use another name")
        spark.sql(f"DROP TABLE {_quoted(name)}")      # an external table: its files stay where they are
        known = None
    if known is None and _has_data(path):
        spark.sql(f"CREATE TABLE {_quoted(name)} USING parquet LOCATION '{path.as_posix()}'")
    return str(path)


def read(spark: SparkSession, name: str, folder: str, *, columns: tuple[tuple[str, str], ...] = (),
         streaming: bool = False) -> DataFrame:
    """A catalog table as a DataFrame (a stream of its new files in STREAMING), its SCHEMA's
    columns taken by name and cast to the declared types."""
    prepare(spark, folder, name)
    df = spark.readStream.table(name) if streaming else spark.read.table(name)
    if not columns:
        return df
    spelled = {c.lower(): c for c in df.columns}
    missing = [n for n, _ in columns if n.lower() not in spelled]
    if missing:
        raise RuntimeError(f"table {name} has no column {', '.join(missing)} (it has {', '.join(df.columns)})")
    return df.selectExpr(*[f"CAST(`{spelled[n.lower()]}` AS {kind}) AS `{n}`" for n, kind in columns])


def write(df: DataFrame, name: str, folder: str, *, mode: str) -> None:
    """BATCH: saveAsTable, appending or replacing the table's rows (locally, in its folder)."""
    path = prepare(df.sparkSession, folder, name, sink=True)
    writer = df.write.mode(mode.lower())
    if path is not None:
        writer = writer.format("parquet").option("path", path)
    writer.saveAsTable(name)


def write_stream(df: DataFrame, query: str, checkpoint: str, trigger: str | None, *, table: str,
                 folder: str) -> StreamingQuery:
    """STREAMING: writeStream.toTable, each micro-batch appended and committed once."""
    path = prepare(df.sparkSession, folder, table, sink=True)
    writer = df.writeStream.outputMode("append").option("checkpointLocation", str(Path(checkpoint) / query))
    if path is not None:
        writer = writer.format("parquet").option("path", path)
    args = trigger_args(trigger)
    if args:
        writer = writer.trigger(**args)
    started = writer.toTable(table)
    metrics.track(started)
    return started
