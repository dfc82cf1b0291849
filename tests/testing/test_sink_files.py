"""`dslc test` reads a case's sink with pyarrow (testing/sink_files.py): the rows must be the very
rows Spark's read collects, for every type a sink holds, in Spark's order, from the files Spark
reads (a streaming sink's log); where it cannot be sure, it leaves the read to Spark."""
from __future__ import annotations

import datetime as dt
import shutil
from decimal import Decimal
from pathlib import Path
from types import SimpleNamespace

import pytest

from dslc.testing import harness, sink_files, values

pytestmark = pytest.mark.spark

DDL = ("i INT, l BIGINT, d DOUBLE, m DECIMAL(12,3), s STRING, b BINARY, day DATE, ts TIMESTAMP, "
       "ntz TIMESTAMP_NTZ, ok BOOLEAN, items ARRAY<STRUCT<n: INT, at: TIMESTAMP>>, "
       "tags MAP<STRING, ARRAY<INT>>, nested STRUCT<when: MAP<STRING, TIMESTAMP>, amount: DECIMAL(5,2)>")


def _rows(n: int) -> list[tuple]:
    stamp = dt.datetime(2024, 3, 31, 1, 30, 15, 123456, tzinfo=dt.timezone.utc)
    return [(i, 2**40 + i, float("nan") if i == 1 else i / 3, Decimal(f"{i}.125"), f"é{i}", bytes([i, 255]),
             dt.date(1999, 12, 31) + dt.timedelta(days=i), stamp + dt.timedelta(hours=i),
             dt.datetime(2024, 1, 1, 23, 59, 59) + dt.timedelta(minutes=i), i % 2 == 0,
             [(i, stamp), (None, None)], {"k": [i, None], "e": []}, ({"w": stamp}, Decimal("1.50")))
            for i in range(n)] + [tuple([99] + [None] * 12)]


def _spark_rows(spark, folder: Path, wanted: list[str]) -> list:
    return harness._read_sink_with_spark(spark, folder, [SimpleNamespace(name=n) for n in wanted])


def _compared(rows: list) -> str:
    """The rows as the case's diff sees them (repr: NaN equal to NaN, types told apart)."""
    return repr([values.comparable(r.asDict(recursive=False)) for r in rows])


def test_every_type_reads_as_spark_collects_it_in_spark_order(spark, tmp_path):
    df = spark.createDataFrame(_rows(7), DDL)
    df.repartition(3).write.parquet(str(tmp_path / "sink"))            # files of different sizes
    df.limit(1).write.mode("append").parquet(str(tmp_path / "sink"))
    folder = tmp_path / "sink"
    for wanted in (["s", "ts", "items", "tags", "nested", "ntz", "b", "day", "m", "d", "ok", "l", "i"],
                   ["i", "absent"], ["absent"]):
        ours = sink_files.read(folder, harness._files(folder), wanted)
        assert ours is not None
        theirs = _spark_rows(spark, folder, wanted)
        assert len(theirs) == 9 and _compared(ours) == _compared(theirs)


def test_a_streaming_sink_is_the_files_its_log_adds(spark, tmp_path):
    source, folder = tmp_path / "in", tmp_path / "sink"
    spark.createDataFrame(_rows(3), DDL).write.parquet(str(source))
    query = (spark.readStream.schema(DDL).parquet(str(source)).writeStream.format("parquet")
             .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True)
             .start(str(folder)))
    query.awaitTermination()
    stray = next(folder.glob("part-*.parquet"))
    shutil.copy(stray, folder / "part-99999-left-by-a-failed-batch.parquet")   # not in the log
    ours = sink_files.read(folder, harness._files(folder), ["i", "ts", "tags"])
    theirs = _spark_rows(spark, folder, ["i", "ts", "tags"])
    assert ours is not None and len(theirs) == 4
    assert _compared(ours) == _compared(theirs)


def test_files_it_cannot_be_sure_of_are_left_to_spark(spark, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = tmp_path / "sink"
    folder.mkdir()
    pq.write_table(pa.table({"i": [1, 2]}), folder / "part-0.parquet")              # no Spark schema
    assert sink_files.read(folder, harness._files(folder), ["i"]) is None
    spark.createDataFrame([(1, "a")], "i INT, s STRING").write.parquet(str(tmp_path / "other"))
    shutil.rmtree(folder)
    shutil.copytree(tmp_path / "other", folder)
    spark.createDataFrame([(1,)], "i INT").write.mode("append").parquet(str(folder))  # two schemas
    assert sink_files.read(folder, harness._files(folder), ["i"]) is None
    assert [r.i for r in harness._read_sink_with_spark(spark, folder, [])] == [1, 1]
