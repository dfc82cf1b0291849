"""PROVENANCE AS col inside the operator, against real services (the fault server, the local
OpenAI-compatible service) and a real answer store: where each answer came from (a call, the
store with its original time and model, a replay, a `dslc test` answer, the cache), attempts of
a retried row, the model as answered, and no secret anywhere in the struct."""
from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import hashlib
import json
import time
from typing import Any

import pytest
from runtime_support import FaultServer, Reply
from runtime_support import run_operator as run

from dslc.runtime.calls.factory import build_call
from dslc.runtime.config import Cache, Column, Enrich, HttpCall, Mode, ModelCall, Retry, Store
from dslc.runtime.schema.provenance import fields
from dslc.runtime.secrets import Secrets
from dslc.runtime.spark.stored_provenance import Noted
from dslc.runtime.store.open_stores import make_store
from dslc.runtime.wrappers import recording
from dslc.runtime.wrappers.joinable import variant_of
from dslc.testing.openai_service import OpenAIService, keyword_labeller, serve_in_thread

_names = iter(range(10**9))
SECRET = "s3cr3t-value-never-shown"


def http(server: FaultServer, **kw: Any) -> Enrich:
    kw.setdefault("name", f"scored{next(_names)}")
    kw.setdefault("line", 7)
    kw.setdefault("call", HttpCall(server.url("/kv/{id}?api_key=${API_KEY}")))
    kw.setdefault("secrets", Secrets({"API_KEY": SECRET}))
    kw.setdefault("mode", Mode.UNORDERED)
    kw.setdefault("capacity", 8)
    return Enrich(returns=(Column("value", "STRING"),), key_columns=("id",), timeout_s=5.0, provenance="how", **kw)


def rows(*keys: str) -> list[dict[str, Any]]:
    return [{"id": k} for k in keys]


def by_id(out) -> dict[str, dict[str, Any]]:
    return {r["id"]: r["how"] for r in out.rows}


def test_a_fresh_call_says_call_with_its_status_masked_url_and_time(fault_server: FaultServer):
    before = dt.datetime.now(dt.timezone.utc)
    config = http(fault_server)
    _, out = run(config, rows("a", "b"))
    how = by_id(out)
    assert set(how["a"]) == {name for name, _ in fields(config.call)}      # the struct the compiler typed
    a = how["a"]
    assert (a["source"], a["operator"], a["line"], a["attempts"], a["status"]) == ("call", config.name, 7, 1, 200)
    assert a["url"].endswith("/kv/a?api_key=***") and a["latency_ms"] >= 0
    assert before <= a["answered_at"] <= dt.datetime.now(dt.timezone.utc)
    key = build_call(config).request_key({"id": "a"})
    assert a["key"] == hashlib.sha256(key.encode()).hexdigest() and a["key"] != how["b"]["key"]
    assert SECRET not in json.dumps(how, default=str)


def test_a_retried_row_shows_two_attempts(fault_server: FaultServer):
    fault_server.script("flaky", Reply(status=503))
    _, out = run(http(fault_server, retry=Retry(3, 0.01)), rows("flaky", "fine"))
    how = by_id(out)
    assert (how["flaky"]["attempts"], how["fine"]["attempts"]) == (2, 1)
    assert fault_server.by_key["flaky"] == 2


def test_stored_answers_keep_their_original_time_and_say_store(fault_server: FaultServer, tmp_path):
    config = http(fault_server, store=Store(str(tmp_path / "answers.db"), run="run1"))
    _, first = run(config, rows("a", "b", "c"))
    assert {h["source"] for h in by_id(first).values()} == {"call"} and fault_server.total == 3
    time.sleep(0.05)            # a later run: a stored answer's time is the first run's, not now
    _, second = run(dataclasses.replace(config, store=Store(config.store.location, run="run2")), rows("a", "b", "c"))
    assert fault_server.total == 3                        # nothing was called again
    then, now = by_id(first), by_id(second)
    for key in "abc":
        assert now[key]["source"] == "store" and now[key]["attempts"] == 0
        assert now[key]["answered_at"] == then[key]["answered_at"]
        assert (now[key]["status"], now[key]["url"], now[key]["key"]) == (
            then[key]["status"], then[key]["url"], then[key]["key"])


def test_a_cached_answer_says_cache(fault_server: FaultServer):
    fault_server.default = Reply(delay_ms=20)
    _, out = run(http(fault_server, cache=Cache(100, 60.0), capacity=1, mode=Mode.ORDERED), rows("a", "a", "a"))
    assert [r["how"]["source"] for r in out.rows] == ["call", "cache", "cache"]
    assert [r["how"]["attempts"] for r in out.rows] == [1, 0, 0]
    assert fault_server.total == 1


def _replaying(monkeypatch, directory, **extra: Any) -> None:
    monkeypatch.setenv(recording.REPLAY_ENV, recording.setting_json(directory, **extra))


def test_a_replay_says_replay_and_keeps_the_recorded_time(fault_server: FaultServer, tmp_path, monkeypatch):
    config = http(fault_server)
    monkeypatch.setenv(recording.RECORD_ENV, recording.setting_json(tmp_path))
    _, recorded = run(config, rows("a", "b"))
    monkeypatch.delenv(recording.RECORD_ENV)
    recording.consolidate(tmp_path)
    assert SECRET not in "".join(p.read_text() for p in tmp_path.glob("*.yaml"))
    _replaying(monkeypatch, tmp_path)
    _, replayed = run(config, rows("a", "b"))
    assert fault_server.total == 2                        # the replay called nothing
    then, now = by_id(recorded), by_id(replayed)
    assert {h["source"] for h in now.values()} == {"replay"}
    assert now["a"]["answered_at"] == then["a"]["answered_at"] and now["a"]["status"] == 200
    _replaying(monkeypatch, tmp_path, source="test")      # what `dslc test` sets
    _, tested = run(config, rows("a"))
    assert by_id(tested)["a"]["source"] == "test"


LABELS = keyword_labeller({"category": [("invoice", "billing"), ("", "other")]})


def test_a_model_answer_names_the_model_its_fingerprint_and_the_prompt_hash(tmp_path):
    with serve_in_thread(OpenAIService(models=("gpt-test",), labeller=LABELS)) as running:
        call = ModelCall("gpt-test", running.base_url, "Subject: {subject}", "You label tickets.")
        config = Enrich(name="labelled", line=4, call=call,
                        returns=(Column("category", "STRING"),), key_columns=("id",), timeout_s=10.0,
                        provenance="how", store=Store(str(tmp_path / "answers.db"), run="r1"))
        _, first = run(config, [{"id": "t1", "subject": "invoice wrong"}])
        _, second = run(dataclasses.replace(config, store=Store(config.store.location, run="r2")),
                        [{"id": "t1", "subject": "invoice wrong"}])
        calls = running.stats["chat_calls"]
    how = first.rows[0]["how"]
    assert first.rows[0]["category"] == "billing" and calls == 1
    assert (how["source"], how["model"], how["system_fingerprint"], how["tier"]) == (
        "call", "gpt-test", "fp_dslc_test", "standard")
    assert how["prompt_sha256"] == hashlib.sha256("Subject: invoice wrong".encode()).hexdigest()
    stored = second.rows[0]["how"]
    assert stored["source"] == "store"
    assert {k: stored[k] for k in ("model", "system_fingerprint", "prompt_sha256", "answered_at")} == \
        {k: how[k] for k in ("model", "system_fingerprint", "prompt_sha256", "answered_at")}


def test_a_miss_made_null_still_has_its_provenance(fault_server: FaultServer):
    fault_server.script("gone", Reply(status=404))
    _, out = run(http(fault_server), rows("gone"))
    row = out.rows[0]
    assert row["value"] is None and row["how"]["source"] == "call" and row["how"]["attempts"] == 1


def test_a_model_that_changed_since_the_answers_were_stored_is_said_once(tmp_path):
    """The second run's model answers differently (another snapshot behind the operator): its
    metrics say so once, however many fresh answers came; the same model again says nothing."""
    from dslc.runtime.metrics import merge_all, model_change_warnings

    location = str(tmp_path / "answers.db")
    with serve_in_thread(OpenAIService(models=("gpt-test", "gpt-next"), labeller=LABELS)) as running:
        def labelled(model: str, run_id: str, subjects: list[str]) -> dict:
            config = Enrich(name="labelled", line=4, call=ModelCall(model, running.base_url, "Subject: {subject}"),
                            returns=(Column("category", "STRING"),), key_columns=("id",), timeout_s=10.0,
                            store=Store(location, run=run_id))
            op, _ = run(config, [{"id": s, "subject": s} for s in subjects])
            return op.metrics()

        first = labelled("gpt-test", "r1", ["a", "b"])
        same = labelled("gpt-test", "r2", ["c", "d"])
        changed = labelled("gpt-next", "r3", ["e", "f", "g"])
    assert "model_change" not in first and "model_change" not in same
    assert changed["model_change"] == "gpt-test (fp_dslc_test) -> gpt-next (fp_dslc_test)"
    warnings = model_change_warnings({"labelled": merge_all([changed, changed])["labelled"]})
    assert warnings == ["operator 'labelled': the model answering it changed since its answers were stored: "
                        "gpt-test (fp_dslc_test) -> gpt-next (fp_dslc_test)"]


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
def test_the_struct_a_joined_answer_gets_is_the_one_the_operator_makes(tmp_path, request, backend):
    """A warm rerun's joined rows pass the operator by (runtime/spark/stored_join.py): the driver
    makes their struct from what the store gives for the join (stored_provenance.py), which is
    the operator's own struct for the same stored answer (model, fingerprint, prompt hash, time).
    Redis gives the notes too (its answers read by MGET), so its PROVENANCE rows join as SQLite's."""
    location = str(tmp_path / "answers.db") if backend == "sqlite" else request.getfixturevalue("redis_server").url(0)
    tickets = [{"id": "t1", "subject": "invoice wrong"}, {"id": "t2", "subject": "hello"}]
    with serve_in_thread(OpenAIService(models=("gpt-test",), labeller=LABELS)) as running:
        call = ModelCall("gpt-test", running.base_url, "Subject: {subject}", "You label tickets.")
        config = Enrich(name="labelled", line=4, call=call, returns=(Column("category", "STRING"),),
                        key_columns=("id",), timeout_s=10.0, provenance="how",
                        store=Store(location, run="r1"))
        run(config, tickets)
        _, second = run(dataclasses.replace(config, store=Store(config.store.location, run="r2")), tickets)

    async def stored():
        store = make_store(config.store.location)
        await store.open()
        try:
            return await store.joinable_noted(config.name, variant_of(build_call(config)), None)
        finally:
            await store.close()

    noted = Noted(config)
    made = noted.array(noted.entries(asyncio.run(stored()))).to_pylist()
    by_operator = {row["how"]["key"]: row["how"] for row in second.rows}
    assert len(made) == 2 and {how["key"] for how in made} == set(by_operator)
    for how in made:
        assert how["source"] == "store" and how["model"] == "gpt-test" and how["latency_ms"] is None
        assert {k: v for k, v in how.items() if k != "latency_ms"} == \
            {k: v for k, v in by_operator[how["key"]].items() if k != "latency_ms"}


@pytest.mark.parametrize("template, clean", [
    ("http://h:1/fixed/{id}", True),
    ("https://api.example.com/v1/{id}?fields={f}&lang=en", True),
    ("http://{host}/x/{id}", True),
    ("http://h/k/${API_KEY}/c/{id}", True),          # a secret in the path: noted by name
    ("http://h/x?api_key=${API_KEY}&id={id}", False),
    ("http://user:pw@h/x/{id}", False),
    ("http://h/x?{name}={id}", False),               # a value could name a credential parameter
    ("http://h/x?sig={id}", False),
])
def test_a_url_noted_without_masking_is_what_masking_would_have_noted(template, clean):
    """PROVENANCE notes each call's URL masked; a template whose URLs have nothing to mask is
    checked once (`masks_nothing`) instead of every answer: then masking changes no filled URL."""
    from dslc.runtime.calls.url import fill_url, placeholders
    from dslc.runtime.secrets import mask_url, masks_nothing, scrub

    assert masks_nothing(template) is clean
    values = ["k1", "a@b", "x&api_key=1", "../..", "http://u:p@e/?token=2", "é ü", "%40", "?#"]
    for value in values:
        url = fill_url(template, {name: value for name in placeholders(template)})
        if clean:
            assert scrub(mask_url(url)) == url


def test_a_joined_answers_time_is_rounded_as_the_operators_datetime_is():
    """The driver makes the joined answers' `answered_at` Arrow-native; it is the microsecond
    `datetime.fromtimestamp` gives (half to even), which the operator's struct holds."""
    import random

    import pyarrow as pa

    from dslc.runtime.spark.stored_provenance import _timestamps

    rng = random.Random(46)
    seconds = [1.7e9 + rng.random() * 1e7 for _ in range(20_000)] + \
        [1700000000.0000005, 1700000000.0000015, 1700000000.9999995, 0.5e-6, 1.5e-6, 1764300000.1234565, -1.5e-6]
    made = _timestamps(pa.array(seconds, pa.float64())).to_pylist()
    assert made == [dt.datetime.fromtimestamp(s, dt.timezone.utc) for s in seconds]


def test_a_stored_note_that_does_not_fit_the_struct_is_left_to_the_operator():
    """An answer whose note Arrow cannot read as the struct's types (a status as text) is not
    joined (the operator makes its row); the others keep their notes."""
    from dslc.runtime.spark.stored_provenance import Noted

    config = Enrich(name="e", line=2, call=HttpCall("http://h/c/{id}"), returns=(Column("value", "STRING"),),
                    key_columns=("id",), provenance="how")
    stored = [('{"id":"a"}', '{"value":"x"}', "ka", '{"status":"200","url":"http://h/c/a"}', 1.7e9),
              ('{"id":"b"}', '{"value":"y"}', "kb", '{"status":201,"url":"http://h/c/b","answered_at":1.8e9}', 1.7e9),
              ('{"id":"c"}', '{"value":"z"}', "kc", None, 1.75e9)]
    noted = Noted(config)
    entries = noted.entries(stored)
    made = noted.array(entries).to_pylist()
    assert [args for args, _, _ in entries] == ['{"id":"b"}', '{"id":"c"}']
    assert [(m["status"], m["url"], m["answered_at"].timestamp(), m["source"]) for m in made] == [
        (201, "http://h/c/b", 1.8e9, "store"), (None, None, 1.75e9, "store")]
    assert made[1]["key"] == hashlib.sha256(b"kc").hexdigest() and made[0]["line"] == 2
