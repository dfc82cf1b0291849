"""ENRICH WITH MODEL / WITH EMBEDDING against the local OpenAI-compatible service (the real
protocol, validated by the service): structured output parsed into RETURNS, refusals and
truncation as element errors keeping the model's content, tokens counted equal to the
service's, 429s honoured, and BATCH embeddings matched by index."""
from __future__ import annotations

import json
import time
from typing import Any

import pytest
from runtime_support import run_operator as run

from dslc.runtime.config import (
    Batch,
    Column,
    EmbeddingCall,
    Enrich,
    Mode,
    ModelCall,
    Outcome,
    Rate,
    Retry,
)
from dslc.runtime.core.refusals import CredentialsRefused
from dslc.runtime.limits.rate_headers import reset_seconds
from dslc.runtime.limits.tokens import TokenLimiter
from dslc.testing.openai_service import (
    BAD_JSON,
    LENGTH,
    REFUSAL_TEXT,
    REFUSE,
    WRONG_TYPE,
    OpenAIService,
    embedding_of,
    keyword_labeller,
    serve_in_thread,
)

_names = iter(range(10**9))
LABELS = keyword_labeller({"category": [("invoice", "billing"), ("password", "account"), ("", "other")],
                           "urgency": [("down", 5), ("", 2)]})


def model(base_url: str, **kw: Any) -> Enrich:
    kw.setdefault("name", f"labelled{next(_names)}")
    kw.setdefault("line", 3)
    kw.setdefault("returns", (Column("category", "STRING"), Column("urgency", "INT")))
    kw.setdefault("key_columns", ("id",))
    kw.setdefault("timeout_s", 10.0)
    call = ModelCall("gpt-test", base_url, "Subject: {subject}", "You label {kind} tickets.")
    return Enrich(call=call, **kw)


def embedding(base_url: str, **kw: Any) -> Enrich:
    kw.setdefault("name", f"vectors{next(_names)}")
    kw.setdefault("line", 9)
    kw.setdefault("returns", (Column("embedding", "ARRAY<FLOAT>"),))
    kw.setdefault("key_columns", ("id",))
    kw.setdefault("timeout_s", 10.0)
    return Enrich(call=EmbeddingCall("emb-test", base_url, "{title}"), **kw)


def tickets(*subjects: str) -> list[dict[str, Any]]:
    return [{"id": f"t{i}", "kind": "support", "subject": s} for i, s in enumerate(subjects)]


def test_structured_output_becomes_columns_and_tokens_match_the_service():
    with serve_in_thread(OpenAIService(models=("gpt-test",), labeller=LABELS)) as running:
        op, out = run(model(running.base_url), tickets("invoice wrong", "site down", "hello"))
        stats = running.stats
        prompts = running.service.stats["prompts"]
    by_id = {r["id"]: (r["category"], r["urgency"]) for r in out.rows}
    assert by_id == {"t0": ("billing", 2), "t1": ("other", 5), "t2": ("other", 2)}
    assert "You label support tickets.\nSubject: site down" in prompts      # SYSTEM and PROMPT filled
    m = op.metrics()
    assert m["calls"] == stats["chat_calls"] == 3
    assert (m["prompt_tokens"], m["completion_tokens"], m["total_tokens"]) == (
        stats["prompt_tokens"], stats["completion_tokens"], stats["total_tokens"])
    assert m["total_tokens"] > 0 and stats["bad_requests"] == 0           # the service accepted every request


@pytest.mark.parametrize("trigger, message", [
    (REFUSE, "the model refused"),
    (LENGTH, "finish_reason length"),
    (BAD_JSON, "not JSON"),
    (WRONG_TYPE, "does not fit RETURNS"),
])
def test_bad_answers_are_element_errors_whose_dead_letter_keeps_the_content(trigger: str, message: str):
    with serve_in_thread(OpenAIService(labeller=LABELS)) as running:
        op, out = run(model(running.base_url, on_error=Outcome.DEAD_LETTER),
                      tickets("invoice wrong", f"{trigger} please"))
        stats = running.stats
    assert [r["id"] for r in out.rows] == ["t0"]
    [letter] = out.dead_letters
    assert letter["kind"] == "error" and message in letter["error"] and letter["key"] == {"id": "t1"}
    assert letter["answer"]                                                # what the model said
    if trigger == REFUSE:
        assert letter["answer"] == REFUSAL_TEXT
    m = op.metrics()
    assert m["errors"] == 1 and m["calls"] == 2
    assert m["total_tokens"] == stats["total_tokens"]                      # the failed answer was paid too


def test_a_null_placeholder_is_the_elements_error_and_sends_nothing():
    with serve_in_thread(OpenAIService()) as running:
        op, out = run(model(running.base_url, on_error=Outcome.NULL, retry=Retry(2)),
                      [{"id": "t0", "kind": "support", "subject": None}])
        assert running.stats["chat_calls"] == 0
    # never sent: no call (#48 item 6), and not retried
    assert out.rows[0]["category"] is None and op.metrics()["calls"] == 0 and op.metrics()["retries"] == 0


def test_429s_are_retried_after_retry_after_and_adaptive_backs_off():
    service = OpenAIService(labeller=LABELS, rpm=600, burst_s=0.5)   # 10 a second, 5 saved up
    with serve_in_thread(service) as running:
        started = time.monotonic()
        op, out = run(model(running.base_url, capacity=8, adaptive=True, mode=Mode.UNORDERED,
                            retry=Retry(20, 0.01)), tickets(*[f"subject {i}" for i in range(15)]))
        elapsed = time.monotonic() - started
        stats = running.stats
    assert sorted(r["id"] for r in out.rows) == sorted(f"t{i}" for i in range(15))
    assert all(r["category"] == "other" for r in out.rows)
    m = op.metrics()
    assert stats["rejected"] >= 1 and m["throttled"] == stats["rejected"]
    assert m["calls"] == stats["chat_calls"] + stats["rejected"]
    assert m["total_tokens"] == stats["total_tokens"]
    assert elapsed >= 0.9          # 15 requests at 10 a second after 5 saved up: the limit was honoured


def test_rate_per_minute_and_tokens_per_minute_keep_under_the_service_limits():
    # the service allows 6000 tokens a minute (100 a second, 100 saved up); each request costs ~27
    service = OpenAIService(labeller=LABELS, tpm=6000, burst_s=1.0)
    with serve_in_thread(service) as running:
        config = model(running.base_url, capacity=8, mode=Mode.UNORDERED, retry=Retry(10, 0.05),
                       rate=Rate(600, per="MINUTE", tokens_per_minute=6000))
        started = time.monotonic()
        op, out = run(config, tickets(*[f"s{i}" for i in range(12)]))
        elapsed = time.monotonic() - started
        stats = running.stats
    assert len(out.rows) == 12
    assert stats["rejected"] <= 1                                    # the task kept to the budget itself
    assert elapsed >= (stats["total_tokens"] - 100) / 100 * 0.8      # no faster than the token budget allows
    assert op.metrics()["total_tokens"] == stats["total_tokens"]


def test_embeddings_one_by_one_and_batched_matched_by_index():
    rows = [{"id": f"d{i}", "title": f"document {i}"} for i in range(10)]
    with serve_in_thread(OpenAIService(shuffle=True)) as running:
        op, out = run(embedding(running.base_url, batch=Batch(4), capacity=8), rows)
        batched = running.stats
        running.reset()
        op1, out1 = run(embedding(running.base_url), rows)
        single = running.stats
    for result in (out.rows, out1.rows):
        assert {r["id"]: r["embedding"] for r in result} == {r["id"]: embedding_of(r["title"]) for r in rows}
    assert batched["embedding_inputs"] == 10 and batched["embedding_calls"] == op.metrics()["calls"] <= 4
    assert single["embedding_calls"] == 10 == op1.metrics()["calls"]
    assert op.metrics()["total_tokens"] == batched["total_tokens"] == single["total_tokens"] == op1.metrics()["total_tokens"]


def test_a_batch_item_without_input_fails_alone():
    rows = [{"id": "d0", "title": "a"}, {"id": "d1", "title": None}, {"id": "d2", "title": "c"}]
    with serve_in_thread(OpenAIService()) as running:
        op, out = run(embedding(running.base_url, batch=Batch(3), on_error=Outcome.DEAD_LETTER), rows)
        assert running.stats["embedding_inputs"] == 2
    assert [r["id"] for r in out.rows] == ["d0", "d2"]
    assert [d["key"] for d in out.dead_letters] == [{"id": "d1"}]


def test_token_limiter_honours_what_the_service_says():
    limiter = TokenLimiter(per_second=100.0)
    assert reset_seconds("20ms") == pytest.approx(0.02) and reset_seconds("6m0s") == 360.0
    assert reset_seconds("1.5s") == 1.5
    limiter.observe({"x-ratelimit-remaining-tokens": "30"})
    assert limiter.level <= 30
    limiter.observe({"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "2s"})
    assert limiter.not_before - time.monotonic() > 1.5
    before = limiter.level
    limiter.settle(estimate=50, prompt_tokens=40, completion_tokens=30)  # 20 more than estimated
    assert limiter.level == pytest.approx(before - 20, abs=1.0)


def test_the_request_carries_a_strict_schema_the_service_validates():
    with serve_in_thread(OpenAIService()) as running:
        config = model(running.base_url, returns=(
            Column("tags", "ARRAY<STRING>"), Column("score", "DOUBLE"), Column("ok", "BOOLEAN"),
            Column("who", "STRUCT<name: STRING, age: BIGINT>")))
        op, out = run(config, tickets("anything"))
        assert running.stats["bad_requests"] == 0 and running.stats["chat_calls"] == 1
    row = out.rows[0]
    assert isinstance(row["tags"], list) and isinstance(row["score"], float) and isinstance(row["ok"], bool)
    assert set(row["who"]) == {"name", "age"}
    json.dumps(row)


def test_headers_carry_a_secret_that_no_error_shows():
    from dslc.runtime.secrets import Secrets

    def keyed(base_url: str, key: str) -> Enrich:
        config = model(base_url, on_error=Outcome.DEAD_LETTER)
        call = ModelCall("gpt-test", base_url, "Subject: {subject}",
                         headers=(("Authorization", "Bearer ${OPENAI_API_KEY}"),))
        return Enrich(**{**{f: getattr(config, f) for f in ("name", "line", "returns", "key_columns", "timeout_s",
                                                              "on_error")},
                         "call": call, "secrets": Secrets({"OPENAI_API_KEY": key})})

    with serve_in_thread(OpenAIService(api_key="sk-right-one")) as running:
        op, out = run(keyed(running.base_url, "sk-right-one"), tickets("hello"))
        assert len(out.rows) == 1 and running.stats["chat_calls"] == 1
        with pytest.raises(CredentialsRefused) as stop:     # every call refused: the run stops
            run(keyed(running.base_url, "sk-wrong-one"), tickets("hello"))
    assert "1 call was refused and none was answered (CallError: HTTP 401" in str(stop.value)
    assert "header 'Authorization: Bearer ${OPENAI_API_KEY}'" in str(stop.value)
    assert "sk-wrong-one" not in str(stop.value)


def test_record_then_replay_keyed_by_the_filled_prompt(tmp_path, monkeypatch):
    from dslc.runtime.wrappers import recording

    rows = tickets("invoice wrong", f"{REFUSE} x")
    with serve_in_thread(OpenAIService(labeller=LABELS)) as running:
        monkeypatch.setenv(recording.RECORD_ENV, recording.setting_json(tmp_path))
        config = model(running.base_url, on_error=Outcome.DEAD_LETTER)
        run(config, rows)
        monkeypatch.delenv(recording.RECORD_ENV)
        recording.consolidate(tmp_path)
        assert running.stats["chat_calls"] == 2
        calls = recording.entries(tmp_path)
        assert sorted(c["key"]["prompt"] for c in calls) == ["Subject: [[refuse]] x", "Subject: invoice wrong"]
        assert {c.get("raw") for c in calls} == {None, REFUSAL_TEXT}
        monkeypatch.setenv(recording.REPLAY_ENV, recording.setting_json(tmp_path))
        recording.forget(str(tmp_path))
        _, out = run(config, rows)
        assert running.stats["chat_calls"] == 2                   # replayed: the service was not called
    assert [(r["id"], r["category"]) for r in out.rows] == [("t0", "billing")]
    assert out.dead_letters[0]["answer"] == REFUSAL_TEXT
