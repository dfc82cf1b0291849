"""#16 item 4: `SINK agg TO PARQUET ... MODE COMPLETE` in STREAMING works: after each run the
folder holds the whole current result (not the increments), switched in atomically, and readers
of the sink path see one complete version."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from jobs import run_flow

pytestmark = pytest.mark.spark

FLOW = """
PIPELINE totals MODE STREAMING CHECKPOINT 'chk' TRIGGER AVAILABLE NOW;
SOURCE orders FROM JSON 'in/' SCHEMA (order_id STRING, country STRING, amount DOUBLE);
STREAM per_country = SELECT country, count(*) AS n, sum(amount) AS total FROM orders GROUP BY country;
SINK per_country TO PARQUET 'out/per_country' MODE COMPLETE;
"""


def _write(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _result(spark, folder: Path) -> dict:
    rows = spark.read.parquet(str(folder / "out/per_country")).collect()
    assert len(rows) == len({r.country for r in rows}), "a group appears twice: increments, not the result"
    return {r.country: (r.n, r.total) for r in rows}


def test_complete_mode_file_sink_holds_the_whole_result_after_each_run(spark, tmp_path):
    (tmp_path / "pipeline.flow").write_text(FLOW)
    _write(tmp_path / "in/1.json", [{"order_id": "a", "country": "DE", "amount": 1.0},
                                    {"order_id": "b", "country": "FR", "amount": 2.0}])
    run_flow(tmp_path / "pipeline.flow")
    assert _result(spark, tmp_path) == {"DE": (1, 1.0), "FR": (1, 2.0)}
    first = (tmp_path / "out/per_country").resolve()

    _write(tmp_path / "in/2.json", [{"order_id": "c", "country": "DE", "amount": 5.0},
                                    {"order_id": "d", "country": "US", "amount": 7.0}])
    run_flow(tmp_path / "pipeline.flow")
    assert _result(spark, tmp_path) == {"DE": (2, 6.0), "FR": (1, 2.0), "US": (1, 7.0)}
    link = tmp_path / "out/per_country"
    assert link.is_symlink() and link.resolve() != first      # a new version, switched in by rename
    assert first.is_dir()                                      # the previous one stays for readers on it
    assert not list(tmp_path.glob("out/.per_country.link"))   # no half-made link left behind
