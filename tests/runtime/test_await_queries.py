"""A streaming job under a continuous trigger waits on its own queries only: a query that an
earlier job of the same SparkSession left failed (dslc repl, dslc test, a user's pytest session)
neither ends it nor fails it, while its own query's failure still does."""
from __future__ import annotations

import threading

import pytest

from dslc.runtime.spark.streaming import await_queries

pytestmark = pytest.mark.spark


def _rate_query(spark, tmp_path, name: str, on_batch):
    """A rate-source query of the session whose micro-batches run `on_batch(batch_id)`."""
    return (spark.readStream.format("rate").option("rowsPerSecond", 5).load()
            .writeStream.foreachBatch(lambda batch, batch_id: on_batch(batch_id))
            .option("checkpointLocation", str(tmp_path / name))
            .trigger(processingTime="0.2 seconds").start())


def _fail(batch_id: int) -> None:
    raise ValueError(f"batch {batch_id} of an earlier job failed")


def test_an_earlier_jobs_failed_query_neither_ends_nor_fails_the_next_job(spark, tmp_path):
    earlier = _rate_query(spark, tmp_path, "earlier", _fail)
    with pytest.raises(Exception, match="of an earlier job failed"):
        earlier.awaitTermination(60)
    batches: list[int] = []
    query = _rate_query(spark, tmp_path, "this", batches.append)
    stopping = threading.Event()

    def stop() -> None:
        stopping.set()
        query.stop()

    stopper = threading.Timer(3.0, stop)
    stopper.start()
    try:
        await_queries([query], "every=1s")       # returns when its own query stops, with no error
        assert stopping.is_set(), "it ended before its own query did"
    finally:
        stopper.cancel()
        query.stop()
    assert batches, "its query ran no micro-batch"


def test_its_own_querys_failure_still_fails_the_job(spark, tmp_path):
    query = _rate_query(spark, tmp_path, "own", lambda batch_id: batch_id >= 2 and _fail(batch_id))
    try:
        with pytest.raises(Exception, match="batch 2 of an earlier job failed"):
            await_queries([query], "every=1s")
    finally:
        query.stop()
