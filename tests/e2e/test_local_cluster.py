"""One pipeline on `local-cluster[2,1,1024]`: two executor JVMs in their own processes, as on a
real cluster. ENRICH (a user module), BROADCAST state and MATCH must work there, with the user
module and the dslc runtime shipped to the executors by the job itself (their Python has no dslc)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow]

FLOW = """
PIPELINE on_cluster MODE BATCH;
SET spark.sql.files.maxPartitionBytes = 512;
SOURCE events FROM JSON 'in/events/' SCHEMA (id STRING, user STRING, amount DOUBLE);
SOURCE limit_updates FROM CSV 'in/limits/' OPTIONS (header = 'true') SCHEMA (user STRING, op STRING, max_amount DOUBLE);
BROADCAST limits FROM limit_updates KEY user OP op;
STREAM located = ENRICH events WITH PYTHON 'where_am_i:locate' RETURNS (work_dir STRING, shipped STRING)
  ASYNC UNORDERED CAPACITY 4 TIMEOUT 10s;
STREAM over = MATCH located AGAINST limits AS l WHERE located.user = l.user AND located.amount > l.max_amount;
SINK over TO JSON 'out/over' MODE OVERWRITE;
"""

WHERE_AM_I = '''
import asyncio, os, sys
from pyspark import SparkFiles

async def locate(row):
    await asyncio.sleep(0.01)
    on_path = [os.path.basename(p) for p in sys.path if p.endswith("dslc_runtime.zip")]
    files = sorted(set(os.listdir(SparkFiles.getRootDirectory())) & {"where_am_i.py", "dslc_runtime.zip"})
    return {"work_dir": os.getcwd(), "shipped": ",".join(on_path + files)}
'''


def test_enrich_broadcast_and_user_module_on_separate_executors(tmp_path, executor_python):
    """The executors run a Python without dslc: the runtime comes from the shipped zip."""
    (tmp_path / "pipeline.flow").write_text(FLOW)
    (tmp_path / "where_am_i.py").write_text(WHERE_AM_I)
    users = ["a", "b", "c"]
    events = [{"id": f"e{i}", "user": users[i % 3], "amount": float(i)} for i in range(120)]
    (tmp_path / "in/events").mkdir(parents=True)
    for part in range(4):
        (tmp_path / f"in/events/{part}.json").write_text(
            "".join(json.dumps(e) + "\n" for e in events[part::4]))
    (tmp_path / "in/limits").mkdir(parents=True)
    (tmp_path / "in/limits/1.csv").write_text("user,op,max_amount\na,set,100\nb,set,10\nc,set,0\n")
    (tmp_path / "in/limits/2.csv").write_text("user,op,max_amount\nc,delete,\n")

    env = {k: v for k, v in os.environ.items() if k not in ("DSLC_FLOW_FOLDER", "PYSPARK_PYTHON")}
    result = subprocess.run(
        [sys.executable, "-m", "dslc.compiler.cli", "run", str(tmp_path / "pipeline.flow"),
         "--master", "local-cluster[2,1,1024]", "--", "--conf", f"spark.pyspark.python={executor_python}"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=400)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]

    rows = [json.loads(line) for path in sorted((tmp_path / "out/over").glob("*.json"))
            for line in path.read_text().splitlines()]
    limits = {"a": 100.0, "b": 10.0}
    expected = {e["id"] for e in events if e["user"] in limits and e["amount"] > limits[e["user"]]}
    assert sorted(r["id"] for r in rows) == sorted(expected)
    work_dirs = {Path(r["work_dir"]) for r in rows}
    try:
        # each executor runs in its own work folder <SPARK_HOME>/work/<app>/<executor id>
        assert {d.parent.parent.name for d in work_dirs} == {"work"}
        assert len({d.name for d in work_dirs}) == 2, work_dirs
        # addPyFile put the user module and the runtime zip on every executor's sys.path
        assert {r["shipped"] for r in rows} == {"dslc_runtime.zip,dslc_runtime.zip,where_am_i.py"}
        assert "located" in result.stdout     # the metrics summary of dslc run names the operator
    finally:
        for app in {d.parent for d in work_dirs}:
            shutil.rmtree(app, ignore_errors=True)
