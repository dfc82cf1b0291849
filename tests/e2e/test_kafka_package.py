"""KAFKA needs the spark-sql-kafka package at submit time; without it the job stops before any
work with a message naming the statements and the --packages argument to add."""
from __future__ import annotations

import pytest
from jobs import run_flow

from dslc.runtime.spark.session import has_format

pytestmark = pytest.mark.spark

FLOW = """PIPELINE k;
SOURCE events FROM KAFKA OPTIONS ('kafka.bootstrap.servers' = '127.0.0.1:9', subscribe = 'events');
STREAM v = SELECT CAST(value AS STRING) AS value FROM events;
SINK v TO KAFKA OPTIONS ('kafka.bootstrap.servers' = '127.0.0.1:9', topic = 'out');
"""


def test_missing_kafka_package_is_a_clear_error(spark, tmp_path):
    assert has_format(spark, "parquet") and not has_format(spark, "kafka")
    (tmp_path / "pipeline.flow").write_text(FLOW)
    with pytest.raises(SystemExit) as stop:
        run_flow(tmp_path / "pipeline.flow")
    message = str(stop.value.code)
    assert message.startswith("dslc: error: SOURCE events (line 2), SINK v (line 4) needs Spark's Kafka connector")
    assert f"--packages org.apache.spark:spark-sql-kafka-0-10_2.13:{spark.version}" in message
