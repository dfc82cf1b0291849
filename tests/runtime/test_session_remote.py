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
