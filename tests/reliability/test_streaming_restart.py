"""3. Streaming restart: a STREAMING job (JSON file sources, HTTP ENRICH with dead letters,
BROADCAST rules with MATCH, an aggregation per user and minute after the MATCH, parquet and JSON
sinks) runs as `python job.py` in its own process group and is SIGKILLed twice on the same
checkpoint: once idle between micro-batches, once in the middle of a micro-batch (its calls are in
flight). A last run (the same flow compiled with TRIGGER AVAILABLE NOW) finishes the work. Every
sink and the dead letters must hold each expected row exactly once, as Spark's readers see them
(the files committed in each folder's _spark_metadata log), and the rules state after the restart
must equal the state before the kill (also as seen by new events after the restart). External
calls of the interrupted batch are made again (at-least-once), which the service sees."""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from reliability_support import (
    JobProcess,
    committed_lines,
    committed_parquet_rows,
    compile_job,
    wait_for,
    write_jsonl,
)

pytestmark = [pytest.mark.spark, pytest.mark.slow]

FLOW = """PIPELINE limits MODE STREAMING CHECKPOINT 'chk' TRIGGER EVERY 500ms;
SET spark.ui.enabled = 'false';
SET spark.sql.shuffle.partitions = 2;
SOURCE events FROM JSON 'in/events/' SCHEMA (id STRING, user STRING, amount DOUBLE, ts TIMESTAMP)
  WATERMARK ts DELAY 0s;
SOURCE limit_updates FROM JSON 'in/limits/' SCHEMA (user STRING, op STRING, max_amount DOUBLE);
BROADCAST limits FROM limit_updates KEY user OP op;
STREAM scored = ENRICH events WITH HTTP GET '{base}/svc/{{id}}' RETURNS (value STRING)
  ASYNC ORDERED CAPACITY 2 TIMEOUT 30s ON ERROR DEAD LETTER 'out/dlq';
STREAM over = MATCH scored AGAINST limits AS l WHERE scored.user = l.user AND scored.amount > l.max_amount;
STREAM per_user = SELECT user, window(ts, '1 minute') AS w, count(*) AS n FROM over GROUP BY user, window(ts, '1 minute');
SINK over TO PARQUET 'out/over';
SINK per_user TO JSON 'out/per_user';
"""
MINUTE = {"e": 0, "f": 1, "g": 2}       # each group of events in its own minute
POISON = {"e007", "f011", "f042", "g005"}   # the service always fails them: dead letters


def _events(prefix: str, n: int) -> list[dict]:
    return [{"id": f"{prefix}{i:03d}", "user": "abc"[i % 3], "amount": float(i),
             "ts": f"2026-11-01T12:{MINUTE[prefix]:02d}:{i % 60:02d}"} for i in range(n)]


def _expected(events: list[dict], limits: dict[str, float]) -> set[tuple]:
    return {(e["id"], e["user"], f"v-{e['id']}", limits[e["user"]])
            for e in events if e["user"] in limits and e["amount"] > limits[e["user"]] and e["id"] not in POISON}


def _sink(folder: Path) -> list[tuple]:
    return [(r["id"], r["user"], r["value"], r["max_amount"]) for r in committed_parquet_rows(folder / "out" / "over")]


def _per_user(folder: Path) -> list[tuple]:
    return [(r["user"], r["w"]["start"][:16], r["n"]) for r in map(json.loads, committed_lines(folder / "out" / "per_user"))]


def _dead_letters(folder: Path) -> list[str]:
    return [json.loads(line)["row"]["id"] for line in committed_lines(folder / "out" / "dlq")]


def _state(folder: Path) -> tuple[dict, dict]:
    """applied.json and the snapshot it points at."""
    root = folder / "chk" / "state" / "limits"
    applied = json.loads((root / "applied.json").read_text())
    return applied, json.loads((root / "snapshots" / f"v{applied['version']}.json").read_text())


def _batch_versions(folder: Path) -> dict[tuple[str, int], int]:
    """(query id, micro-batch) -> the rules version that micro-batch saw."""
    root = folder / "chk" / "state" / "limits" / "batches"
    return {(p.parent.name, int(p.stem)): json.loads(p.read_text())["version"] for p in root.glob("*/*.json")}


def test_sigkill_between_and_during_micro_batches_then_restart(flaky, tmp_path):
    service = flaky()
    service.poison |= POISON
    (tmp_path / "pipeline.flow").write_text(FLOW.format(base=service.base))
    job = compile_job(tmp_path / "pipeline.flow", tmp_path / "job.py")
    job_once = compile_job(tmp_path / "pipeline.flow", tmp_path / "job_once.py", trigger="available-now")
    limits_1 = {"a": 10.0, "b": 50.0}
    limits_2 = {"b": 5.0, "c": 1.0}                                  # b lowered, a deleted, c added
    events_1, events_2, events_3 = _events("e", 60), _events("f", 60), _events("g", 30)
    # events_3 arrive after the last kill: only the restored rules state can match them
    expected = _expected(events_1, limits_1) | _expected(events_2, limits_2) | _expected(events_3, limits_2)

    # run 1: rules, then events; killed while idle between micro-batches
    write_jsonl(tmp_path / "in/limits/1.json", [{"user": u, "op": "set", "max_amount": m} for u, m in limits_1.items()])
    write_jsonl(tmp_path / "in/events/1.json", events_1)
    run1 = JobProcess(job, tmp_path / "run1.log")
    wait_for(lambda: set(_sink(tmp_path)) == _expected(events_1, limits_1), 150, "run 1 output", run1)
    wait_for(lambda: service.in_flight == 0, 10, "no call in flight")
    state_1 = _state(tmp_path)
    run1.kill()
    assert _state(tmp_path) == state_1

    # run 2: new rules and events with a slow service; killed in the middle of the micro-batch
    service.delay_ms = 150
    write_jsonl(tmp_path / "in/limits/2.json", [{"user": "b", "op": "set", "max_amount": 5.0},
                                                 {"user": "a", "op": "delete", "max_amount": None},
                                                 {"user": "c", "op": "set", "max_amount": 1.0}])
    write_jsonl(tmp_path / "in/events/2.json", events_2)
    run2 = JobProcess(job, tmp_path / "run2.log")
    wait_for(lambda: len(service.keys_called(lambda k: k.startswith("f"))) >= 6, 150, "batch 2 calls", run2)
    state_2 = _state(tmp_path)                 # the new rules were applied before the data batch ran
    assert state_2[0]["version"] > state_1[0]["version"]
    run2.kill()
    seen_before = _batch_versions(tmp_path)    # which state version each data batch saw
    calls_before_restart = Counter({k: c for k, c in service.by_key.items() if k.startswith("f")})
    assert len(calls_before_restart) < len(events_2), "the kill came after the batch had finished"
    assert not any(r[0].startswith("f") for r in _sink(tmp_path)), "batch 2 was committed before the kill"
    assert _state(tmp_path) == state_2

    # restart on the same checkpoint (AVAILABLE NOW, so it ends by itself); the batch is replayed
    service.delay_ms = 0
    write_jsonl(tmp_path / "in/events/3.json", events_3)
    run3 = JobProcess(job_once, tmp_path / "run3.log")
    assert run3.wait(180) == 0, run3.output()[-4000:]

    rows = _sink(tmp_path)
    duplicated = [r for r, c in Counter(rows).items() if c > 1]
    assert not duplicated, duplicated[:10]
    assert set(rows) == expected
    letters = _dead_letters(tmp_path)
    assert sorted(letters) == sorted(POISON), "dead letters exactly once across the kills"
    # minutes 0 and 1 are closed by the watermark (the latest ts is in minute 2), each written once
    counts = Counter((user, f"2026-11-01T12:{MINUTE[i[0]]:02d}") for i, user, _, _ in expected if MINUTE[i[0]] < 2)
    assert sorted(_per_user(tmp_path)) == sorted((u, m, n) for (u, m), n in counts.items())
    assert _state(tmp_path) == state_2                       # rules state restored, not re-applied
    assert {k: v["max_amount"] for k, v in state_2[1]["states"]["limits"]} == limits_2
    after = _batch_versions(tmp_path)
    assert {b: v for b, v in after.items() if b in seen_before} == seen_before   # a replay sees the same state
    assert set(after.values()) - set(seen_before.values()) <= {state_2[0]["version"]}   # later batches too
    # at-least-once external calls: keys called before the kill were called again by the replay
    again = [k for k, c in calls_before_restart.items() if service.by_key[k] > c]
    assert again, "the replayed micro-batch made no call again"
    assert all(service.by_key[e["id"]] >= 1 for e in events_2)
