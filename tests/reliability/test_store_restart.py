"""A BATCH job with STORE SIGKILLed in the middle of its calls (driver, JVM and Python workers at
once, as a machine losing power), then run again: every answer received before the kill is in
the store and is not paid again; only the calls in flight at the kill are sent a second time
(their answers never arrived); the rerun's output is complete."""
from __future__ import annotations

import json
import sqlite3
from collections import Counter

import pytest
from reliability_support import JobProcess, compile_job, wait_for, write_jsonl

pytestmark = [pytest.mark.spark, pytest.mark.slow]

FLOW = """PIPELINE killed MODE BATCH;
SOURCE events FROM JSON 'in/' SCHEMA (id STRING, user STRING);
STREAM spread = SELECT /*+ REPARTITION(2) */ * FROM events;
STREAM enriched = ENRICH spread WITH HTTP GET '{base}/svc/{{user}}' RETURNS (value STRING)
  ASYNC UNORDERED CAPACITY 4 TIMEOUT 10s STORE;
SINK enriched TO JSON 'out/enriched' MODE OVERWRITE;
"""


def _stored_users(path) -> set[str]:
    with sqlite3.connect(path) as db:
        keys = [json.loads(k)[1] for (k,) in db.execute("SELECT key FROM answers")]
    return {url.rsplit("/", 1)[1] for url in keys}


def test_sigkill_mid_run_then_rerun_pays_no_received_answer_twice(flaky, tmp_path):
    service = flaky(delay_ms=60)
    users = [f"u{i}" for i in range(120)]
    write_jsonl(tmp_path / "in/1.json", [{"id": f"e{i}", "user": users[i % 120]} for i in range(360)])
    (tmp_path / "pipeline.flow").write_text(FLOW.format(base=service.base))
    job = compile_job(tmp_path / "pipeline.flow", tmp_path / "job.py")

    run1 = JobProcess(job, tmp_path / "run1.log")
    wait_for(lambda: service.total() >= 30, 180, "calls of run 1", run1)
    run1.kill()
    first = Counter(service.by_key)
    stored = _stored_users(tmp_path / "target/answers.db")
    assert 20 <= len(stored) < 120, "the kill came before any answer, or after the last"

    run2 = JobProcess(job, tmp_path / "run2.log")
    assert run2.wait(300) == 0, run2.output()[-3000:]
    again = {k for k in service.by_key if service.by_key[k] > first.get(k, 0) and k in first}
    assert not again & stored, "an answer received before the kill was paid again"
    assert len(again) <= 8                                   # at most the calls in flight (2 tasks x 4)
    assert set(service.by_key) == set(users)
    out = [json.loads(line) for p in (tmp_path / "out/enriched").glob("*.json") for line in p.read_text().splitlines()]
    assert len(out) == 360 and all(r["value"] == f"v-{r['user']}" for r in out)
