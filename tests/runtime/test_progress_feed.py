"""The session's one progress listener (runtime/spark/progress_feed.py): every part that keeps
figures from micro-batches hears every update, as Spark's JSON of it, once each, and a part
that fails costs the others nothing."""
from __future__ import annotations

import json

import pytest
from polling import until

from dslc.runtime.spark import progress_feed

pytestmark = pytest.mark.spark


def _three_batches(spark, folder, name: str):
    """A stream of three files (2, 3 and 4 rows) read one per micro-batch, its rows counted by
    observation `name`; the query is named `name` too."""
    from pyspark.sql import functions as F

    source = folder / "in"
    source.mkdir()
    for i, rows in enumerate((2, 3, 4)):
        (source / f"{i}.json").write_text("".join(json.dumps({"k": i}) + "\n" for _ in range(rows)))
    df = (spark.readStream.schema("k INT").option("maxFilesPerTrigger", 1).json(str(source))
          .observe(name, F.count(F.lit(1)).alias("rows")))
    return (df.writeStream.format("noop").queryName(name).option("checkpointLocation", str(folder / "chk"))
            .trigger(availableNow=True).start())


def test_every_part_hears_each_update_once_as_sparks_json(spark, tmp_path):
    heard: list[dict] = []
    listening = [True]          # the parts stay with the session: they stop keeping after the test

    def keep(update):
        if listening[0] and update.get("name") == "feed_rows":
            heard.append(update)

    def broken(update):
        if listening[0]:
            raise RuntimeError("a part with a bug of its own")

    try:
        assert progress_feed.listen(spark, broken)
        assert progress_feed.listen(spark, keep)
        assert progress_feed.listen(spark, keep)          # told once, however often it asks
        query = _three_batches(spark, tmp_path, "feed_rows")
        query.awaitTermination(120)
        until(lambda: len(heard) >= 3, "the parts heard fewer than three updates", seconds=60)
        assert len(heard) == 3                            # once each
        assert {u["id"] for u in heard} == {str(query.id)}
        assert sorted(u["batchId"] for u in heard) == [0, 1, 2]
        assert sorted(u["observedMetrics"]["feed_rows"]["rows"] for u in heard) == [2, 3, 4]
        assert all("sources" in u and "sink" in u for u in heard)   # Spark's whole JSON of the update
    finally:
        listening[0] = False
