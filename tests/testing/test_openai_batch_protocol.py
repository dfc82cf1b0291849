"""The local service's Batch API and flex tier, driven by the official `openai` SDK: files uploaded
and downloaded, batches created, listed, retrieved and cancelled, their output and error files in
the API's line formats, and `service_tier: "flex"` with its "resource unavailable" 429."""
from __future__ import annotations

import io
import json
import time

import pytest

from dslc.testing.openai_api.batches import BATCH_ERROR, BATCH_EXPIRE, BATCH_EXPIRE_ONCE, EXPIRED_MESSAGE
from dslc.testing.openai_service import OpenAIService, embedding_of, keyword_labeller, serve_in_thread

openai = pytest.importorskip("openai")   # the test extra installs it

LABELS = keyword_labeller({"category": [("invoice", "billing"), ("", "other")], "urgency": [("down", 5), ("", 2)]})
SCHEMA = {"type": "object", "additionalProperties": False, "required": ["category", "urgency"],
          "properties": {"category": {"type": "string"}, "urgency": {"type": "integer"}}}
FORMAT = {"type": "json_schema", "json_schema": {"name": "t", "strict": True, "schema": SCHEMA}}


def _client(running):
    return openai.OpenAI(base_url=running.base_url, api_key="sk-test", max_retries=0)


def _line(custom_id: str, prompt: str) -> dict:
    return {"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions",
            "body": {"model": "gpt-test", "response_format": FORMAT, "messages": [{"role": "user", "content": prompt}]}}


def _jsonl(lines: list[dict]) -> io.BytesIO:
    data = io.BytesIO("".join(json.dumps(line) + "\n" for line in lines).encode())
    data.name = "requests.jsonl"
    return data


def _wait(client, batch_id: str, seen: list[str]):
    for _ in range(200):
        batch = client.batches.retrieve(batch_id)
        if not seen or seen[-1] != batch.status:
            seen.append(batch.status)
        if batch.status in ("completed", "failed", "expired", "cancelled"):
            return batch
        time.sleep(0.02)
    raise AssertionError(f"batch {batch_id} did not end: {seen}")


def _lines(client, file_id: str) -> list[dict]:
    return [json.loads(line) for line in client.files.content(file_id).text.splitlines()]


@pytest.fixture
def running():
    with serve_in_thread(OpenAIService(models=("gpt-test", "emb"), labeller=LABELS, batch_delay_s=0.5)) as service:
        yield service


def test_a_batch_runs_from_upload_to_its_output_file_and_answers_as_online(running):
    client = _client(running)
    prompts = [f"ticket {i}: " + ("my invoice" if i % 3 == 0 else "the site is down") for i in range(40)]
    uploaded = client.files.create(file=_jsonl([_line(f"k{i}", p) for i, p in enumerate(prompts)]), purpose="batch")
    assert (uploaded.object, uploaded.purpose, uploaded.filename) == ("file", "batch", "requests.jsonl")
    assert uploaded.bytes > 0 and uploaded.expires_at is not None
    assert client.files.retrieve(uploaded.id).id == uploaded.id
    batch = client.batches.create(input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h",
                                  metadata={"run": "r1"})
    assert batch.status == "validating" and batch.metadata == {"run": "r1"}
    seen: list[str] = []
    done = _wait(client, batch.id, seen)
    lifecycle = ["validating", "in_progress", "finalizing", "completed"]
    assert seen[-1] == "completed" and seen == [s for s in lifecycle if s in seen]    # in the lifecycle's order
    assert (done.request_counts.total, done.request_counts.completed, done.request_counts.failed) == (40, 40, 0)
    assert done.error_file_id is None and done.completed_at >= done.in_progress_at
    out = _lines(client, done.output_file_id)
    assert [line["custom_id"] for line in out] != [f"k{i}" for i in range(40)]      # shuffled
    assert sorted(line["custom_id"] for line in out) == sorted(f"k{i}" for i in range(40))
    online = client.chat.completions.create(model="gpt-test", response_format=FORMAT,
                                            messages=[{"role": "user", "content": prompts[3]}])
    by_id = {line["custom_id"]: line for line in out}
    response = by_id["k3"]["response"]
    assert by_id["k3"]["error"] is None and by_id["k3"]["id"].startswith("batch_req_")
    assert response["status_code"] == 200 and response["request_id"]
    assert response["body"]["choices"][0]["message"]["content"] == online.choices[0].message.content
    assert response["body"]["usage"] == online.usage.model_dump(exclude_none=True)
    assert done.usage.input_tokens == sum(line["response"]["body"]["usage"]["prompt_tokens"] for line in out)
    stats = running.stats
    assert stats["chat_calls"] == 1 and stats["batch_lines"] == 40          # batch lines are not online calls
    assert stats["batch_custom_ids"] == [f"k{i}" for i in range(40)]
    assert [b.id for b in client.batches.list()] == [batch.id]
    assert client.files.delete(uploaded.id).deleted
    with pytest.raises(openai.NotFoundError):
        client.files.retrieve(uploaded.id)


def test_errored_and_expired_lines_go_to_the_error_file_and_once_faults_pass_when_resent(running):
    client = _client(running)
    lines = [_line("ok", "invoice"), _line("bad", f"{BATCH_ERROR} x"), _line("late", f"{BATCH_EXPIRE_ONCE} y"),
             _line("never", f"{BATCH_EXPIRE} z")]
    uploaded = client.files.create(file=_jsonl(lines), purpose="batch")
    done = _wait(client, client.batches.create(input_file_id=uploaded.id, endpoint="/v1/chat/completions",
                                               completion_window="24h").id, [])
    assert done.status == "expired" and done.expired_at is not None
    assert (done.request_counts.completed, done.request_counts.failed) == (1, 3)
    assert [line["custom_id"] for line in _lines(client, done.output_file_id)] == ["ok"]
    errors = {line["custom_id"]: line for line in _lines(client, done.error_file_id)}
    assert errors["bad"]["response"]["status_code"] == 500 and errors["bad"]["error"] is None
    assert errors["bad"]["response"]["body"]["error"]["type"] == "server_error"
    for late in ("late", "never"):
        assert errors[late]["response"] is None
        assert errors[late]["error"] == {"code": "batch_expired", "message": EXPIRED_MESSAGE}
    again = client.files.create(file=_jsonl(lines[2:]), purpose="batch")
    second = _wait(client, client.batches.create(input_file_id=again.id, endpoint="/v1/chat/completions",
                                                 completion_window="24h").id, [])
    assert [line["custom_id"] for line in _lines(client, second.output_file_id)] == ["late"]     # once: passes now
    assert [line["custom_id"] for line in _lines(client, second.error_file_id)] == ["never"]


def test_a_batch_is_cancelled_and_an_invalid_file_fails_it(running):
    client = _client(running)
    uploaded = client.files.create(file=_jsonl([_line(f"k{i}", "x") for i in range(10)]), purpose="batch")
    batch = client.batches.create(input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h")
    assert client.batches.cancel(batch.id).status == "cancelling"
    assert _wait(client, batch.id, []).status == "cancelled"
    with pytest.raises(openai.ConflictError):
        client.batches.cancel(batch.id)
    twice = client.files.create(file=_jsonl([_line("same", "a"), _line("same", "b")]), purpose="batch")
    failed = _wait(client, client.batches.create(input_file_id=twice.id, endpoint="/v1/chat/completions",
                                                 completion_window="24h").id, [])
    assert failed.status == "failed" and failed.errors.data[0].code == "duplicate_custom_id"
    assert failed.errors.data[0].line == 2
    with pytest.raises(openai.BadRequestError) as refused:
        client.batches.create(input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="1h")
    assert refused.value.body["param"] == "completion_window"
    with pytest.raises(openai.NotFoundError):
        client.batches.retrieve("batch_missing")
    page = client.batches.list(limit=1)
    assert len(page.data) == 1 and page.has_more and page.data[0].id == failed.id   # newest first
    assert [b.id for b in client.batches.list(limit=1, after=failed.id)] == [batch.id]


def test_an_embeddings_batch_answers_each_input_with_its_vector(running):
    client = _client(running)
    lines = [{"custom_id": f"e{i}", "method": "POST", "url": "/v1/embeddings",
              "body": {"model": "emb", "input": f"text {i}", "encoding_format": "float"}} for i in range(5)]
    uploaded = client.files.create(file=_jsonl(lines), purpose="batch")
    done = _wait(client, client.batches.create(input_file_id=uploaded.id, endpoint="/v1/embeddings",
                                               completion_window="24h").id, [])
    out = {line["custom_id"]: line["response"]["body"] for line in _lines(client, done.output_file_id)}
    assert out["e2"]["data"][0]["embedding"] == embedding_of("text 2")
    assert running.stats["embedding_calls"] == 0 and running.stats["batch_lines"] == 5


def test_flex_requests_say_their_tier_and_a_share_of_them_get_resource_unavailable():
    with serve_in_thread(OpenAIService(models=("gpt-test",), flex_unavailable=0.25)) as running:
        client = _client(running)
        answered, refused = [], 0
        for i in range(8):
            try:
                answered.append(client.chat.completions.create(
                    model="gpt-test", service_tier="flex", messages=[{"role": "user", "content": f"x{i}"}]))
            except openai.RateLimitError as exc:
                refused += 1
                assert exc.body["code"] == "resource_unavailable"
        assert refused == 2 and all(a.service_tier == "flex" for a in answered)
        assert client.chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": "y"}]
                                              ).service_tier == "default"
        with pytest.raises(openai.BadRequestError) as bad:
            client.chat.completions.create(model="gpt-test", service_tier="cheap",
                                           messages=[{"role": "user", "content": "z"}])
        assert bad.value.body["param"] == "service_tier"
        stats = running.stats
        assert (stats["flex_requests"], stats["flex_unavailable"]) == (8, 2)
