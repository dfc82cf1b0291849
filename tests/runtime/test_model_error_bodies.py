"""What a MODEL call's error answer shows (#48 items 4, 17 and 21): the service's error message
(a long gateway body read whole, not its first bytes of braces), with the secrets masked in the
whole body before the text is shortened, as an HTTP call's error body is (calls/error_body.py).

The OpenAI-compatible test service answers errors short, so a small service speaking the same
/v1/chat/completions protocol answers the long and echoing bodies here."""
from __future__ import annotations

import json

import pytest
from aiohttp import web
from runtime_support import run_operator as run
from runtime_support import serving

from dslc.runtime.config import Column, EmbeddingCall, Enrich, ModelCall, Outcome
from dslc.runtime.secrets import Secrets

KEY = "Zq9-gateway-key-0042/never-shown"
TRACE = ["litellm.proxy.auth.user_api_key_auth"] * 120      # a gateway's traceback: a body of ~5 KB


async def _refuse(request: web.Request) -> web.Response:
    subject = (await request.json())["messages"][-1]["content"].split(": ", 1)[1]
    if subject == "long":
        body = {"error": {"message": f"Authentication Error, invalid proxy server token passed. Received API "
                                     f"Key = {KEY}", "type": "auth_error", "param": "None", "code": "400"},
                "trace": TRACE}
        return web.json_response(body, status=400)
    if subject == "ok200":
        return web.json_response(UPSTREAM_FAILED)    # status 200, an error object for a body
    return web.Response(status=400, text="k" * 197 + KEY + " was rejected")    # cut inside the key


UPSTREAM_FAILED = {"error": {"message": f"litellm.APIConnectionError: upstream refused key {KEY}",
                             "type": "api_connection_error", "param": None, "code": None}}


@pytest.fixture
def service():
    with serving("/v1/chat/completions", _refuse) as base_url:
        yield base_url


def _keyed(base_url: str) -> Enrich:
    call = ModelCall("gpt-test", base_url, "Subject: {subject}", headers=(("Authorization", "Bearer ${KEY}"),))
    return Enrich(name="labelled", line=4, returns=(Column("category", "STRING"),), key_columns=("id",),
                  timeout_s=10.0, capacity=1, call=call, on_error=Outcome.DEAD_LETTER, secrets=Secrets({"KEY": KEY}))


def test_a_long_gateway_error_body_shows_its_message_with_the_key_masked(service) -> None:
    op, out = run(_keyed(service), [{"id": "a", "subject": "long"}])
    [letter] = out.dead_letters
    assert letter["error"].endswith("/chat/completions: Authentication Error, invalid proxy server token passed. "
                                    "Received API Key = ${KEY} [400]"), letter["error"]
    assert KEY[:4] not in json.dumps([letter, op.metrics()])


def test_a_key_an_error_body_echoes_where_the_text_is_cut_is_masked_before_the_cut(service) -> None:
    """The key starts 197 characters in: cut at 200 before masking, its first three characters
    were left, too few to be known as the key's start."""
    op, out = run(_keyed(service), [{"id": "b", "subject": "cut"}])
    [letter] = out.dead_letters
    assert "k" * 197 + "${KEY} was rejected" in letter["error"]
    assert KEY[:3] not in json.dumps([letter, op.metrics()])


def test_a_200_whose_body_is_an_error_object_says_the_services_message(service) -> None:
    """#48 item 21: not "the answer has no choices"; the key it echoes masked."""
    op, out = run(_keyed(service), [{"id": "c", "subject": "ok200"}])
    [letter] = out.dead_letters
    assert letter["error"].endswith("/chat/completions is an error: litellm.APIConnectionError: upstream refused "
                                    "key ${KEY} [api_connection_error]"), letter["error"]
    assert letter["error_class"] == "answer" and KEY[:4] not in json.dumps([letter, op.metrics()])


def test_an_embeddings_200_whose_body_is_an_error_object_says_the_services_message() -> None:
    async def embeddings(request: web.Request) -> web.Response:
        return web.json_response(UPSTREAM_FAILED)

    with serving("/v1/embeddings", embeddings) as base_url:
        config = Enrich(name="vectors", line=9, returns=(Column("embedding", "ARRAY<FLOAT>"),), key_columns=("id",),
                        timeout_s=10.0, call=EmbeddingCall("emb-test", base_url, "{title}"),
                        on_error=Outcome.DEAD_LETTER, secrets=Secrets({"KEY": KEY}))
        op, out = run(config, [{"id": "d", "title": "a title"}])
    [letter] = out.dead_letters
    assert "/embeddings is an error: litellm.APIConnectionError: upstream refused key ${KEY}" in letter["error"]
