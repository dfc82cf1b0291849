"""The local OpenAI-compatible service speaks the real protocol: the official `openai` SDK drives
it (chat completions with a strict json_schema, embeddings as floats and as base64), so the
stand-in cannot drift from the API the runtime's MODEL and EMBEDDING calls are written against."""
from __future__ import annotations

import asyncio
import json

import aiohttp
import pytest

from dslc.testing.openai_service import (
    REFUSAL_TEXT,
    REFUSE,
    OpenAIService,
    embedding_of,
    keyword_labeller,
    serve_in_thread,
)

openai = pytest.importorskip("openai")   # the test extra installs it

SCHEMA = {"type": "object", "additionalProperties": False, "required": ["category", "urgency"],
          "properties": {"category": {"type": "string"}, "urgency": {"type": "integer"}}}


def _client(base_url: str):
    return openai.OpenAI(base_url=base_url, api_key="sk-test", max_retries=0)


def test_the_sdk_gets_structured_output_with_usage():
    labeller = keyword_labeller({"category": [("invoice", "billing"), ("", "other")],
                                 "urgency": [("down", 5), ("", 2)]})
    with serve_in_thread(OpenAIService(models=("gpt-test",), labeller=labeller)) as running:
        answer = _client(running.base_url).chat.completions.create(
            model="gpt-test",
            messages=[{"role": "system", "content": "You label tickets."},
                      {"role": "user", "content": "My invoice is wrong"}],
            response_format={"type": "json_schema",
                             "json_schema": {"name": "labels", "strict": True, "schema": SCHEMA}})
        choice = answer.choices[0]
        assert choice.finish_reason == "stop" and choice.message.refusal is None
        assert json.loads(choice.message.content) == {"category": "billing", "urgency": 2}
        assert answer.usage.total_tokens == answer.usage.prompt_tokens + answer.usage.completion_tokens > 0
        stats = running.stats
        assert stats["chat_calls"] == 1 and stats["total_tokens"] == answer.usage.total_tokens

        refused = _client(running.base_url).chat.completions.create(
            model="gpt-test", messages=[{"role": "user", "content": f"{REFUSE} anything"}])
        assert refused.choices[0].message.refusal == REFUSAL_TEXT and refused.choices[0].message.content is None


def test_the_sdk_is_refused_what_the_api_refuses():
    with serve_in_thread(OpenAIService(models=("gpt-test",))) as running:
        client = _client(running.base_url)
        with pytest.raises(openai.NotFoundError):
            client.chat.completions.create(model="other", messages=[{"role": "user", "content": "x"}])
        loose = {"type": "object", "properties": {"a": {"type": "string"}}}   # strict needs required + additionalProperties
        with pytest.raises(openai.BadRequestError, match="additionalProperties"):
            client.chat.completions.create(
                model="gpt-test", messages=[{"role": "user", "content": "x"}],
                response_format={"type": "json_schema", "json_schema": {"name": "a", "strict": True, "schema": loose}})
        assert running.stats["chat_calls"] == 0 and running.stats["bad_requests"] == 2


def test_the_sdk_gets_embeddings_by_index_as_floats_and_base64():
    with serve_in_thread(OpenAIService(shuffle=True)) as running:
        client = _client(running.base_url)
        texts = ["first text", "second text", "third"]
        as_floats = client.embeddings.create(model="emb", input=texts, encoding_format="float")
        by_index = {d.index: d.embedding for d in as_floats.data}
        assert [d.index for d in as_floats.data] == [2, 1, 0]       # shuffled: only the index says which
        assert [by_index[i] for i in range(3)] == [embedding_of(t) for t in texts]
        as_base64 = client.embeddings.create(model="emb", input="first text")   # the SDK asks for base64
        assert as_base64.data[0].embedding == pytest.approx(embedding_of("first text"))
        assert as_floats.usage.total_tokens == running.stats["total_tokens"] - as_base64.usage.total_tokens
        assert running.stats["embedding_inputs"] == 4


def test_limits_answer_429_with_retry_after_and_remaining_headers():
    async def burst(base_url: str) -> list[tuple[int, dict]]:
        async with aiohttp.ClientSession() as session:
            out = []
            for _ in range(4):
                async with session.post(f"{base_url}/chat/completions",
                                        json={"model": "m", "messages": [{"role": "user", "content": "hello"}]}) as r:
                    out.append((r.status, dict(r.headers)))
            return out

    with serve_in_thread(OpenAIService(rpm=120, burst_s=1.0)) as running:   # 2 requests a second, 2 saved up
        answers = asyncio.run(burst(running.base_url))
    statuses = [status for status, _ in answers]
    assert statuses[:2] == [200, 200] and 429 in statuses[2:]
    rejected = next(headers for status, headers in answers if status == 429)
    assert float(rejected["retry-after-ms"]) > 0 and rejected["Retry-After"].isdigit()
    assert answers[0][1]["x-ratelimit-remaining-requests"] == "1"
    assert rejected["x-ratelimit-limit-requests"] == "120"
