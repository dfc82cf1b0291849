"""EXPECT across SIGKILL: a STREAMING job whose EXPECTs run in all three places (on a SOURCE and
on a chain's last operator as Spark expressions, on an ENRICH inside the chain in its Python
pass), each quarantining to its own folder, runs as `python job.py` in its own process group and
is SIGKILLed in the middle of a micro-batch (its calls in flight). A restart on the same
checkpoint (TRIGGER AVAILABLE NOW) finishes the work: the sink and every quarantine folder must
hold each expected row exactly once, as Spark's readers see them (the files committed in each
folder's _spark_metadata log)."""
from __future__ import annotations

import json
from collections import Counter

import pytest
from reliability_support import JobProcess, committed_lines, committed_parquet_rows, compile_job, wait_for, write_jsonl

pytestmark = [pytest.mark.spark, pytest.mark.slow]

FLOW = """PIPELINE judged MODE STREAMING CHECKPOINT 'chk' TRIGGER EVERY 500ms;
SET spark.ui.enabled = 'false';
SET spark.sql.shuffle.partitions = 2;
SOURCE events FROM JSON 'in/events/' SCHEMA (id STRING, user STRING, amount DOUBLE);
EXPECT ON events CONSTRAINT known_user CHECK (user IN ('a', 'b')) ON VIOLATION QUARANTINE 'out/q_events';
STREAM scored = ENRICH events WITH HTTP GET '{base}/svc/{{id}}' RETURNS (value STRING)
  ASYNC ORDERED CAPACITY 2 TIMEOUT 30s;
EXPECT ON scored CONSTRAINT small CHECK (amount < 50) ON VIOLATION QUARANTINE 'out/q_scored';
STREAM tagged = PROCESS scored USING PYTHON 'tags:tag' RETURNS (id STRING, user STRING, amount DOUBLE, value STRING, odd BOOLEAN);
EXPECT ON tagged CONSTRAINT not_seven CHECK (id NOT LIKE '%7') ON VIOLATION QUARANTINE 'out/q_tagged';
SINK tagged TO PARQUET 'out/tagged';
"""
TAGS = '''
def tag(row):
    return {**row, "odd": int(row["id"][1:]) % 2 == 1}
'''


def _events(prefix: str, n: int) -> list[dict]:
    return [{"id": f"{prefix}{i:03d}", "user": "abc"[i % 3], "amount": float(i)} for i in range(n)]


def _fates(events: list[dict]) -> dict[str, set[str]]:
    """Where each event must end, from the constraints (strictest first, statement order)."""
    out: dict[str, set[str]] = {"q_events": set(), "q_scored": set(), "q_tagged": set(), "tagged": set()}
    for e in events:
        if e["user"] not in ("a", "b"):
            out["q_events"].add(e["id"])
        elif e["amount"] >= 50:
            out["q_scored"].add(e["id"])
        elif e["id"].endswith("7"):
            out["q_tagged"].add(e["id"])
        else:
            out["tagged"].add(e["id"])
    return out


def _found(folder) -> dict[str, list[str]]:
    found = {name: [json.loads(line)["id"] for line in committed_lines(folder / "out" / name)]
             for name in ("q_events", "q_scored", "q_tagged")}
    found["tagged"] = [row["id"] for row in committed_parquet_rows(folder / "out" / "tagged")]
    return found


def test_quarantine_and_sink_exactly_once_across_a_sigkill(flaky, tmp_path):
    service = flaky()
    (tmp_path / "pipeline.flow").write_text(FLOW.format(base=service.base))
    (tmp_path / "tags.py").write_text(TAGS)
    job = compile_job(tmp_path / "pipeline.flow", tmp_path / "job.py")
    job_once = compile_job(tmp_path / "pipeline.flow", tmp_path / "job_once.py", trigger="available-now")
    events_1, events_2 = _events("e", 60), _events("f", 60)

    write_jsonl(tmp_path / "in/events/1.json", events_1)
    run1 = JobProcess(job, tmp_path / "run1.log")
    wait_for(lambda: {k: set(v) for k, v in _found(tmp_path).items()} == _fates(events_1), 180, "run 1 output", run1)
    service.delay_ms = 150
    write_jsonl(tmp_path / "in/events/2.json", events_2)
    wait_for(lambda: len(service.keys_called(lambda k: k.startswith("f"))) >= 6, 150, "batch 2 calls", run1)
    run1.kill()
    before = _found(tmp_path)
    assert not any(i.startswith("f") for i in before["tagged"] + before["q_tagged"]), "batch 2 committed before the kill"

    service.delay_ms = 0
    run2 = JobProcess(job_once, tmp_path / "run2.log")
    assert run2.wait(240) == 0, run2.output()[-4000:]
    found = _found(tmp_path)
    for name, ids in found.items():
        assert [i for i, n in Counter(ids).items() if n > 1] == [], f"{name} holds rows twice"
    assert {k: set(v) for k, v in found.items()} == _fates(events_1 + events_2)
    quarantined = [json.loads(line) for line in committed_lines(tmp_path / "out" / "q_scored")]
    assert {(q["_operator"], q["_line"], tuple(q["_constraints"])) for q in quarantined} == {("scored", 8, ("small",))}
    assert all(q["value"] == f"v-{q['id']}" for q in quarantined)      # the row as the ENRICH made it
