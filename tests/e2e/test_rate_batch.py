"""RATE in BATCH: a fixed run of rows with the streaming rate source's columns and spacing."""
from __future__ import annotations

import datetime as dt
import json

import pytest
from jobs import run_flow

pytestmark = pytest.mark.spark


def test_rate_in_batch_yields_num_rows_spaced_by_the_rate(spark, tmp_path):
    (tmp_path / "pipeline.flow").write_text(
        "PIPELINE ticks MODE BATCH;\n"
        "SOURCE ticks FROM RATE OPTIONS (RowsPerSecond = '4', numRows = '10');\n"
        "STREAM even = SELECT value, timestamp FROM ticks WHERE value % 2 = 0;\n"
        "SINK even TO JSON 'out' MODE OVERWRITE;\n")
    run_flow(tmp_path / "pipeline.flow")
    rows = sorted((json.loads(line) for p in (tmp_path / "out").glob("*.json")
                   for line in p.read_text().splitlines()), key=lambda r: r["value"])
    assert [r["value"] for r in rows] == [0, 2, 4, 6, 8]
    stamps = [dt.datetime.fromisoformat(r["timestamp"]) for r in rows]
    assert [(b - a).total_seconds() for a, b in zip(stamps, stamps[1:])] == [0.5] * 4
    assert stamps[0].microsecond == 0
