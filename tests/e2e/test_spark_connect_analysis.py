"""`dslc run --remote`: Spark's analyzer (the Spark Connect server's) looks at every query before
the job's first action, as with spark-submit: every refused query at its .flow line, nothing written."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow]

REFUSED = """PIPELINE refused MODE BATCH;
SOURCE orders FROM JSON 'in/orders/' SCHEMA (id STRING, amount DOUBLE);
STREAM fine = SELECT id, amount * 2 AS twice FROM orders;
STREAM q = SELECT id, sort_array(amount) AS s FROM orders;
STREAM g = SELECT id, size(twice) AS x FROM fine;
SINK fine TO PARQUET 'out/fine';
SINK q TO PARQUET 'out/q';
SINK g TO PARQUET 'out/g';
"""


def test_every_refused_query_is_reported_before_the_job_starts(tmp_path, connect_server):
    (tmp_path / "in" / "orders").mkdir(parents=True)
    (tmp_path / "in" / "orders" / "1.json").write_text('{"id": "o1", "amount": 2.5}\n')
    (tmp_path / "p.flow").write_text(REFUSED)
    env = {k: v for k, v in os.environ.items() if k not in ("DSLC_FLOW_FOLDER", "PYSPARK_PYTHON", "SPARK_REMOTE")}
    done = subprocess.run([sys.executable, "-m", "dslc.compiler.cli", "run", "p.flow", "--remote", connect_server.url],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=400)
    shown = done.stdout + done.stderr
    assert done.returncode == 1, shown[-3000:]
    assert "p.flow:4:23: error[E0212]: Spark rejects this query (DATATYPE_MISMATCH.UNEXPECTED_INPUT_TYPE)" in shown
    assert 'p.flow:5:23: error[E0212]: Spark rejects this query (DATATYPE_MISMATCH.UNEXPECTED_INPUT_TYPE): ' \
           'Cannot resolve "size(twice)"' in shown and "2 errors found" in shown, shown[-3000:]
    assert "Traceback" not in shown
    assert not (tmp_path / "out").exists()      # the first SINK's query is valid: nothing ran
