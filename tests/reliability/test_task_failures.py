"""2. Task failures: the Python worker running a chain dies (SIGKILL of its own process) in the
middle of a partition, on its first attempt only. The job runs as `python job.py` in a
subprocess on `local[2,4]` (local mode with task retries; plain `local[N]` never retries), so
Spark retries the task: the parquet output and the dead letters have no loss and no duplicate,
although the dead worker had already handed rows of that partition to Spark."""
from __future__ import annotations

import json
from collections import Counter

import pytest
from reliability_support import (
    JobProcess,
    compile_job,
    dead_letters,
    parquet_rows,
    write_jsonl,
)

pytestmark = [pytest.mark.spark, pytest.mark.slow]

FLOW = """SET spark.sql.execution.arrow.maxRecordsPerBatch = 40;
SET spark.ui.enabled = 'false';
SOURCE items FROM JSON 'in/' SCHEMA (id STRING, n INT);
STREAM enriched = ENRICH items WITH PYTHON 'killer:lookup' RETURNS (doubled INT)
  ASYNC ORDERED CAPACITY 8 TIMEOUT 30s ON ERROR DEAD LETTER 'dlq';
SINK enriched TO PARQUET 'out' MODE OVERWRITE;
"""

# Kills its own worker process on the marker row, once (the marker file survives the process).
KILLER = '''
import os, signal, json
from pathlib import Path

MARKER = Path(__file__).with_name("killed.json")
calls = 0

def lookup(row):
    global calls
    calls += 1
    if row["id"] == "k0450":
        try:
            fd = os.open(MARKER, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            pass                                   # the retried attempt: carry on
        else:
            os.write(fd, json.dumps({"pid": os.getpid(), "calls_before": calls}).encode())
            os.close(fd)
            os.kill(os.getpid(), signal.SIGKILL)
    if row["n"] % 10 == 3:
        raise ValueError("unlucky " + row["id"])   # ON ERROR DEAD LETTER
    return {"doubled": 2 * row["n"]}
'''

N = 1200


def test_worker_killed_mid_partition_is_retried_without_loss_or_duplicates(tmp_path):
    rows = [{"id": f"k{i:04d}", "n": i} for i in range(N)]
    write_jsonl(tmp_path / "in" / "a.json", rows[:N // 2])      # k0450 is in the middle of this file
    write_jsonl(tmp_path / "in" / "b.json", rows[N // 2:])
    (tmp_path / "pipeline.flow").write_text(FLOW)
    (tmp_path / "killer.py").write_text(KILLER)
    job = compile_job(tmp_path / "pipeline.flow", tmp_path / "job.py")

    proc = JobProcess(job, tmp_path / "job.log", master="local[2,4]")
    code = proc.wait(240)
    log = proc.output()
    assert code == 0, log[-4000:]

    killed = json.loads((tmp_path / "killed.json").read_text())
    assert killed["calls_before"] > 100, killed       # the worker died mid-partition, not at its start
    assert "Lost task" in log and "Python worker exited unexpectedly" in log, log[-4000:]   # Spark saw it

    out = parquet_rows(tmp_path / "out")
    counts = Counter(r["id"] for r in out)
    assert max(counts.values()) == 1, [k for k, c in counts.items() if c > 1][:10]
    assert set(counts) == {r["id"] for r in rows if r["n"] % 10 != 3}
    assert all(r["doubled"] == 2 * r["n"] for r in out)

    letters = dead_letters(tmp_path / "dlq")
    dl = Counter(d["key"]["id"] for d in letters)
    assert max(dl.values()) == 1, [k for k, c in dl.items() if c > 1][:10]
    assert set(dl) == {r["id"] for r in rows if r["n"] % 10 == 3}
    assert all(d["kind"] == "error" and d["error"].startswith("ValueError: unlucky") for d in letters)
