"""Embedding answers that cannot be a row's vector (#48 item 22): a vector holding NaN, and
vectors of two sizes in one operator's answers, are the element's error (ON ERROR decides), not a
row with NaN in it or a column of vectors that cannot be compared.

The OpenAI-compatible test service never answers such vectors, so a small service speaking the
same /v1/embeddings protocol answers them here: the fault cannot be produced otherwise."""
from __future__ import annotations

import json
from typing import Any

import pytest
from aiohttp import web
from runtime_support import run_operator as run
from runtime_support import serving

from dslc.runtime.config import Batch, Column, EmbeddingCall, Enrich, Outcome


def _vector(text: str) -> list[Any]:
    """`nan ...`: a vector holding NaN; `short ...`: two dimensions; any other text: three."""
    if text.startswith("nan"):
        return [0.1, float("nan"), 0.3]
    return [0.6, 0.8] if text.startswith("short") else [0.6, 0.0, 0.8]


async def _embeddings(request: web.Request) -> web.Response:
    given = (await request.json())["input"]
    texts = [given] if isinstance(given, str) else given
    body = {"object": "list", "model": "emb-test",
            "data": [{"object": "embedding", "index": i, "embedding": _vector(t)} for i, t in enumerate(texts)],
            "usage": {"prompt_tokens": len(texts), "total_tokens": len(texts)}}
    return web.Response(text=json.dumps(body), content_type="application/json")   # NaN as JSON's NaN


@pytest.fixture
def service():
    with serving("/v1/embeddings", _embeddings) as base_url:
        yield base_url


def _config(base_url: str, **kw: Any) -> Enrich:
    return Enrich(name="vectors", line=9, returns=(Column("embedding", "ARRAY<FLOAT>"),), key_columns=("id",),
                  timeout_s=10.0, capacity=1, on_error=Outcome.DEAD_LETTER,
                  call=EmbeddingCall("emb-test", base_url, "{title}"), **kw)


@pytest.mark.parametrize("batch", [None, Batch(2)], ids=["one by one", "BATCH 2"])
def test_a_vector_holding_nan_is_the_elements_error(service, batch) -> None:
    rows = [{"id": "a", "title": "fine"}, {"id": "b", "title": "nan here"}]
    op, out = run(_config(service, batch=batch), rows)
    assert [r["id"] for r in out.rows] == ["a"]             # in a BATCH too: the other input keeps its vector
    letters = {d["key"]["id"]: d["error"] for d in out.dead_letters}
    assert "NaN" in letters["b"]
    assert all(value == value for r in out.rows for value in r["embedding"])      # no NaN reached a row


def test_vectors_of_two_sizes_in_one_operator_name_both_sizes(service) -> None:
    rows = [{"id": "a", "title": "fine"}, {"id": "b", "title": "short one"}, {"id": "c", "title": "fine again"}]
    op, out = run(_config(service), rows)
    assert sorted(r["id"] for r in out.rows) == ["a", "c"]
    [letter] = out.dead_letters
    assert letter["key"] == {"id": "b"} and "2 dimensions" in letter["error"] and "have 3" in letter["error"]
