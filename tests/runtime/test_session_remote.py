"""Which Spark Connect server a compiled job uses: `--remote URL` on its command line, else
$SPARK_REMOTE; none means a classic session (with a master)."""
from __future__ import annotations

import pytest

from dslc.runtime.spark import session


@pytest.mark.parametrize("argv, env, expected", [
    (["job.py"], None, None),
    (["job.py"], "sc://env:15002", "sc://env:15002"),
    (["job.py", "--remote", "sc://arg:1"], "sc://env:15002", "sc://arg:1"),
    (["job.py", "--remote=sc://arg:2"], None, "sc://arg:2"),
    (["job.py", "--remote"], None, None),
])
def test_remote_url(monkeypatch, argv, env, expected):
    monkeypatch.setattr(session.sys, "argv", argv)
    if env is None:
        monkeypatch.delenv("SPARK_REMOTE", raising=False)
    else:
        monkeypatch.setenv("SPARK_REMOTE", env)
    assert session.remote_url() == expected


def test_a_classic_session_is_not_connect(spark):
    assert not session.is_connect(spark)
    assert session.parallelism(spark) == spark.sparkContext.defaultParallelism


class _LateWorkerWriter:
    """A Connect DataStreamWriter whose server misses the foreachBatch worker's start limit `late`
    times (Spark's fixed 10 s cannot be forced on a real server reliably: the one fake here)."""

    __module__ = "pyspark.sql.connect.streaming.readwriter"

    def __init__(self, late: int) -> None:
        self.late, self.starts = late, []

    def start(self, path=None):
        self.starts.append(path)
        if len(self.starts) <= self.late:
            raise RuntimeError("org.apache.spark.SparkException: Python worker failed to connect back.")
        return "query"


def test_a_late_foreach_batch_worker_is_started_again():
    writer = _LateWorkerWriter(late=session.WORKER_STARTS - 1)
    assert session.start_query(writer, "out/x") == "query"
    assert writer.starts == ["out/x"] * session.WORKER_STARTS


def test_a_worker_late_every_time_is_a_clear_error():
    writer = _LateWorkerWriter(late=session.WORKER_STARTS)
    with pytest.raises(SystemExit) as stopped:
        session.start_query(writer)
    assert str(stopped.value).startswith("dslc: error: the Spark Connect server could not start the Python worker")
    assert "hint: the server machine is overloaded" in str(stopped.value)
    assert len(writer.starts) == session.WORKER_STARTS


def test_other_start_failures_are_not_retried():
    writer = _LateWorkerWriter(late=1)
    writer.start = lambda path=None: (_ for _ in ()).throw(ValueError("bad option"))
    with pytest.raises(ValueError, match="bad option"):
        session.start_query(writer)
