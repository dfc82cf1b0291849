"""SOURCE ... FROM DATABASE and SINK ... TO DATABASE on Spark's JDBC source and sink.

Reading is Spark's JDBC reader (`dbtable` or `query`), in `partitions` parallel ranges of a
numeric or date column with `PARTITION BY col (n)`: the bounds are the column's minimum and
maximum, read first, and rows whose column is NULL fall in the first range, as Spark's reader
puts them. Executors need only the PostgreSQL JDBC driver (`dslc run` passes its jar).

Writing: APPEND and OVERWRITE in BATCH are Spark's JDBC writer (OVERWRITE truncates, so the
table keeps its definition); UPSERT, and every STREAMING sink, stage the rows with Spark's writer
and move them into the table in one transaction with the micro-batch's id (databases/tables.py),
so a micro-batch replayed after a crash writes nothing twice. A missing table is created from
the stream's schema first, KEY its primary key. The password travels as the JDBC `password`
option, which Spark redacts wherever it shows options.
"""
from __future__ import annotations

from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from dslc.runtime import secrets as S
from dslc.runtime.databases import driver, tables
from dslc.runtime.databases.url import jdbc

from .streaming import for_each_batch


def reach(databases: dict[str, str], secrets: S.Secrets) -> None:
    """Each DATABASE answers before Spark starts (none is asked when no call may reach a service:
    `dslc test`, `dslc run --replay`)."""
    if not S.optional():
        driver.reach(databases, secrets)


def read(spark: SparkSession, url: str, secrets: S.Secrets, *, name: str, table: str | None = None,
         query: str | None = None, partition_column: str | None = None, partitions: int = 1,
         columns: tuple[tuple[str, str], ...] = (), held: bool = False) -> DataFrame:
    """A database table or query as a DataFrame (in `partitions` ranges of `partition_column`),
    its SCHEMA's `columns` (name, Spark type) taken by name (as the database spells them, case
    aside) and cast to the declared types. `held` (STREAMING): read now and kept in Spark's
    memory (spilling to disk) for the run, so the micro-batches that join it do not read the
    table again each (a static side is otherwise evaluated per micro-batch)."""
    df = _read(spark, url, secrets, name=name, table=table, query=query, partition_column=partition_column,
               partitions=partitions, columns=columns)
    if held:
        df = df.persist()
        df.count()
    return df


def _read(spark: SparkSession, url: str, secrets: S.Secrets, *, name: str, table: str | None,
          query: str | None, partition_column: str | None, partitions: int,
          columns: tuple[tuple[str, str], ...]) -> DataFrame:
    filled = secrets.fill(url)
    reader = spark.read.format("jdbc").options(**jdbc(filled).options())
    relation = tables.safe_table(table) if table else f"({query}) AS dslc_source"
    if partition_column and partitions > 1:
        low, high = driver.run(filled, lambda c: c.fetchrow(
            f"SELECT min({tables.quote(partition_column)}) AS low, max({tables.quote(partition_column)}) AS high "
            f"FROM {relation}"), name=name, secrets=secrets)
        if low is not None:
            reader = reader.options(partitionColumn=partition_column, lowerBound=str(low), upperBound=str(high),
                                    numPartitions=str(partitions))
    df = reader.option("dbtable", relation).load()
    if not columns:
        return df
    spelled = {c.lower(): c for c in df.columns}
    missing = [n for n, _ in columns if n.lower() not in spelled]
    if missing:
        raise driver.DatabaseProblem(f"DATABASE {name}: {table or 'the query'} has no column "
                                     + ", ".join(missing) + " (it has " + ", ".join(df.columns) + ")")
    return df.selectExpr(*[f"CAST(`{spelled[n.lower()]}` AS {kind}) AS `{n}`" for n, kind in columns])


class DatabaseSink:
    """One SINK ... TO DATABASE: prepares its table once, then writes each (micro-)batch."""

    def __init__(self, url: str, secrets: S.Secrets, *, database: str, table: str, mode: str,
                 key: tuple[str, ...], sink: str) -> None:
        self.url = secrets.fill(url)
        self.secrets = secrets
        self.database, self.table, self.mode, self.key = database, tables.safe_table(table), mode, key
        self.sink = sink
        self.names: dict[str, str] | None = None

    def _run(self, work):
        return driver.run(self.url, work, name=self.database, secrets=self.secrets)

    def _prepare(self, df: DataFrame) -> list[tuple[str, str]]:
        columns = [(f.name, f.dataType.simpleString()) for f in df.schema.fields]
        if self.names is None:
            self.names = self._run(lambda c: tables.prepare_table(c, self.table, columns, self.key, self.sink))
        return columns

    def _writer(self, df: DataFrame, table: str, mode: str):
        return df.write.format("jdbc").options(**jdbc(self.url).options()).option("dbtable", table).mode(mode)

    def write(self, df: DataFrame) -> None:
        """BATCH: the whole result at once."""
        self._prepare(df)
        if self.mode == "UPSERT":
            self.write_batch(df, None, None)
        elif self.mode == "OVERWRITE":
            self._writer(self._renamed(df), self.table, "overwrite").option("truncate", "true").save()
        else:
            self._writer(self._renamed(df), self.table, "append").save()

    def _renamed(self, df: DataFrame) -> DataFrame:
        assert self.names is not None
        return df.toDF(*[self.names[name] for name in df.columns])

    def write_batch(self, df: DataFrame, identity: str | None, batch_id: int | None) -> None:
        """Stage the rows, then one transaction: the INSERT (or upsert) and the batch's id."""
        from pyspark.sql import functions as F

        columns = self._prepare(df)
        assert self.names is not None
        if identity is not None and self._run(lambda c: tables.committed(c, identity, batch_id)):
            return          # replayed after a crash: committed before, written nothing again
        stage = tables.stage_name(identity or f"{self.sink} {self.table}")
        self._run(lambda c: tables.prepare_stage(c, stage, columns))
        staged = df.withColumn(tables.SEQUENCE, F.monotonically_increasing_id())
        self._writer(staged, stage, "append").save()
        merge = tables.merge_sql(self.table, stage, self.names, self.key)
        self._run(lambda c: tables.commit(c, merge, identity, batch_id))


def write_batch(df: DataFrame, url: str, secrets: S.Secrets, **sink) -> None:
    """SINK ... TO DATABASE in BATCH."""
    DatabaseSink(url, secrets, **sink).write(df)


def write_stream(df: DataFrame, name: str, checkpoint: str, trigger: str | None, url: str,
                 secrets: S.Secrets, **sink):
    """SINK ... TO DATABASE in STREAMING: each micro-batch committed exactly once. The sink is
    known to the database by its query's name and checkpoint location (`sink0 /path/chk`), and
    each micro-batch by the batch id foreachBatch gives, so nothing is read from the checkpoint
    (under Spark Connect it is the server's) and a restart on the same checkpoint is recognised.
    As with Spark's file sink and its _spark_metadata log, a checkpoint deleted and begun again
    at the same place finds its first batch ids done: delete its rows of dslc_batches too."""
    target = DatabaseSink(url, secrets, **sink)
    identity = f"{name} {Path(checkpoint).resolve() / name}"

    def each(batch: DataFrame, batch_id: int) -> None:
        target.write_batch(batch, identity, batch_id)

    return for_each_batch(df, each, name, checkpoint, trigger)
