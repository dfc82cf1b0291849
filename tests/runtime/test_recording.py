"""Record and replay of ENRICH calls (runtime/wrappers/recording.py) against the real local test server:
what a recording holds, that replay answers identically without any request, and the failures
of an unrecorded call."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from runtime_support import FaultServer, Reply
from runtime_support import run_operator as run

from dslc.runtime.config import Column, Enrich, HttpCall, Outcome, Retry
from dslc.runtime.core.operator import ElementFailure
from dslc.runtime.wrappers import recording

ROWS = [{"id": "a", "n": 1}, {"id": "gone", "n": 2}, {"id": "bad", "n": 3}, {"id": "slow", "n": 4}]


def make(server: FaultServer, template: str = "/kv/{id}", **kw: Any) -> Enrich:
    kw.setdefault("name", "lookup")
    kw.setdefault("line", 7)
    kw.setdefault("returns", (Column("key", "STRING"), Column("value", "STRING")))
    kw.setdefault("key_columns", ("id",))
    kw.setdefault("timeout_s", 2.0)
    kw.setdefault("on_error", Outcome.DEAD_LETTER)
    kw.setdefault("on_timeout", Outcome.DEAD_LETTER)
    return Enrich(call=HttpCall(server.url(template)), **kw)


def _script(server: FaultServer) -> None:
    server.script("gone", Reply(status=404))
    server.script("bad", Reply(status=500, body="boom"), Reply(status=500, body="boom"))
    server.script("slow", Reply(hang=True))


def _record(server: FaultServer, folder: Path, monkeypatch, **kw: Any):
    monkeypatch.setenv(recording.RECORD_ENV, recording.setting_json(folder))
    try:
        return run(make(server, **kw), ROWS)
    finally:
        monkeypatch.delenv(recording.RECORD_ENV)


def _replay(server: FaultServer, folder: Path, monkeypatch, rows=ROWS, **settings: Any):
    monkeypatch.setenv(recording.REPLAY_ENV, recording.setting_json(folder, **settings))
    recording.forget(str(folder.resolve()))
    try:
        return run(make(server), rows)
    finally:
        monkeypatch.delenv(recording.REPLAY_ENV)


def _without_timing(letters):
    return sorted((d["key"]["id"], d["kind"], d["error"], d["attempts"]) for d in letters)


def test_replay_answers_like_the_recorded_run_without_requests(fault_server: FaultServer, tmp_path, monkeypatch):
    _script(fault_server)
    _, recorded = _record(fault_server, tmp_path, monkeypatch)
    assert fault_server.total == 4
    written = recording.consolidate(tmp_path)
    assert [p.name for p in written] == ["lookup.yaml"] and not (tmp_path / ".parts").exists()
    document = yaml.safe_load((tmp_path / "lookup.yaml").read_text())
    calls = {c["key"]["id"]: c for c in document["calls"]}
    assert document["operator"] == "lookup" and document["line"] == 7
    assert calls["a"]["answer"] == {"key": "a", "value": "v-a"} and calls["gone"]["miss"] is True
    assert calls["bad"]["error"].startswith("HTTP 500") and calls["bad"]["error_type"] == "CallError"
    assert calls["slow"]["timeout"] is True and calls["a"]["latency_ms"] >= 0
    assert calls["a"]["request"] == f"GET {fault_server.base}/kv/a"

    fault_server.reset_counters()
    _, replayed = _replay(fault_server, tmp_path, monkeypatch)
    assert fault_server.total == 0                                   # no network at all
    assert sorted(map(str, replayed.rows)) == sorted(map(str, recorded.rows))
    assert _without_timing(replayed.dead_letters) == _without_timing(recorded.dead_letters)


def test_retries_replay_in_recorded_order(fault_server: FaultServer, tmp_path, monkeypatch):
    fault_server.script("a", Reply(status=503), Reply())
    monkeypatch.setenv(recording.RECORD_ENV, recording.setting_json(tmp_path))
    run(make(fault_server, retry=Retry(2, 0.0)), [{"id": "a"}])
    monkeypatch.delenv(recording.RECORD_ENV)
    recording.consolidate(tmp_path)
    calls = yaml.safe_load((tmp_path / "lookup.yaml").read_text())["calls"]
    assert ["error" in c for c in calls] == [True, False]            # sorted by key, then time
    monkeypatch.setenv(recording.REPLAY_ENV, recording.setting_json(tmp_path))
    recording.forget(str(tmp_path.resolve()))
    op, out = run(make(fault_server, retry=Retry(2, 0.0)), [{"id": "a"}])
    assert out.rows == [{"id": "a", "key": "a", "value": "v-a"}] and op.metrics()["retries"] == 1


def test_unrecorded_call_fails_naming_operator_and_key_or_is_a_miss(fault_server, tmp_path, monkeypatch):
    recording.write_answers(tmp_path, "lookup", [{"key": {"id": "a"}, "answer": {"value": "x"}}])
    with pytest.raises(ElementFailure) as failure:
        _replay(fault_server, tmp_path, monkeypatch, rows=[{"id": "a"}, {"id": "zz"}])
    text = str(failure.value)
    assert "lookup" in text and "id='zz'" in text and "no recorded answer" in text
    _, out = _replay(fault_server, tmp_path, monkeypatch, rows=[{"id": "a"}, {"id": "zz"}], unrecorded="miss")
    assert sorted((r["id"], r["value"]) for r in out.rows) == [("a", "x"), ("zz", None)]
    assert fault_server.total == 0


def test_replayed_latency_can_be_reproduced(fault_server, tmp_path, monkeypatch):
    recording.write_answers(tmp_path, "lookup", [{"key": {"id": "a"}, "answer": {"value": "x"}, "latency_ms": 1000}])
    started = time.perf_counter()
    _replay(fault_server, tmp_path, monkeypatch, rows=[{"id": "a"}])
    fast = time.perf_counter() - started
    started = time.perf_counter()
    _, out = _replay(fault_server, tmp_path, monkeypatch, rows=[{"id": "a"}], latency=True, )
    slow = time.perf_counter() - started
    assert out.rows[0]["value"] == "x"
    assert slow >= 1.0 and fast < slow          # the recorded second is waited only when asked


def test_secrets_are_not_written(fault_server, tmp_path, monkeypatch):
    template = "/kv/{id}?api_key=s3cr3t&lang=en&access_token=t0k3n"
    url = fault_server.url(template).replace("http://", "http://user:pa55@")
    monkeypatch.setenv(recording.RECORD_ENV, recording.setting_json(tmp_path))
    run(Enrich(name="lookup", line=7, call=HttpCall(url), returns=(Column("value", "STRING"),),
               key_columns=("id",), timeout_s=2.0, on_error=Outcome.NULL), [{"id": "a"}])
    monkeypatch.delenv(recording.RECORD_ENV)
    recording.consolidate(tmp_path)
    request = yaml.safe_load((tmp_path / "lookup.yaml").read_text())["calls"][0]["request"]
    # (the test server echoes the query in its answer; what dslc writes of the request is masked)
    assert request == f"GET {fault_server.base}/kv/a?api_key=***&lang=en&access_token=***"


class _Batched:
    """A minimal adapter with call_batch, standing for BATCH's HTTP POST / PYTHON adapters."""

    timeout_handler = None

    def __init__(self) -> None:
        self.calls = 0

    def cache_key(self, row):
        return (row["id"],)

    async def call_batch(self, rows):
        self.calls += 1
        return [None if r["id"] == "gone" else {"value": f"v-{r['id']}"} for r in rows]


def test_batch_calls_are_recorded_per_row_and_replayed(tmp_path):
    import asyncio

    config = Enrich(name="scorer", line=3, call=HttpCall("http://127.0.0.1:9/score"),
                    returns=(Column("value", "STRING"),), key_columns=("id",))
    recorder = recording.RecordingCall(_Batched(), config, tmp_path)
    rows = [{"id": "a"}, {"id": "gone"}]
    assert asyncio.run(recorder.call_batch(rows)) == [{"value": "v-a"}, None]
    recording.consolidate(tmp_path)
    inner = _Batched()
    recording.forget(str(tmp_path.resolve()))
    replayer = recording.ReplayCall(inner, config, {"dir": str(tmp_path.resolve())})
    assert asyncio.run(replayer.call_batch(list(reversed(rows)))) == [None, {"value": "v-a"}]
    assert inner.calls == 0
