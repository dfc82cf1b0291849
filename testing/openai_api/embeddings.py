"""`POST /v1/embeddings`: input as a string, an array of strings, an array of token ids or an
array of such arrays (the API takes all four), each answered with its vector and `index`
(reversed with `shuffle`, so a client must match by index), as floats or base64."""
from __future__ import annotations

import base64
import struct
from typing import TYPE_CHECKING, Any

from aiohttp import web

from .answers import count_tokens, embedding_of, tokens_text
from .errors import invalid
from .params import EMBEDDING_PARAMETERS, check_known

if TYPE_CHECKING:
    from dslc.testing.openai_service import OpenAIService

MAX_INPUTS = 2048
MAX_TOKEN_ID = 200_019        # the largest id of the API's tokenizers (o200k_base)
_INVALID_INPUT = "'$.input' is invalid. Please check the API reference: https://platform.openai.com/docs/api-reference."


def inputs_of(value: Any) -> list[str | list[int]]:
    """The inputs of a request, each a text or a list of token ids, or the API's 400."""
    if isinstance(value, str):
        items: list[Any] = [value]
    elif isinstance(value, list) and value and all(isinstance(t, int) and not isinstance(t, bool) for t in value):
        items = [value]                          # one input given as token ids
    elif isinstance(value, list):
        items = value
    else:
        raise invalid(_INVALID_INPUT, "input")
    if not items or len(items) > MAX_INPUTS:
        raise invalid(f"Invalid 'input': expected an array of 1 to {MAX_INPUTS} items, got {len(items)}.", "input")
    for item in items:
        text = isinstance(item, str) and item
        ids = isinstance(item, list) and item and all(
            isinstance(t, int) and not isinstance(t, bool) and 0 <= t <= MAX_TOKEN_ID for t in item)
        if not (text or ids):
            raise invalid(_INVALID_INPUT, "input")
    return items


def answer(service: "OpenAIService", body: dict[str, Any]) -> tuple[dict[str, Any], list[str], int]:
    """The embeddings a checked request gets, its input texts and tokens: what the online endpoint
    sends and what a batch's output line carries (openai_api/batches.py)."""
    check_known(body, EMBEDDING_PARAMETERS)
    inputs = inputs_of(body.get("input"))
    encoding = body.get("encoding_format") or "float"
    if encoding not in ("float", "base64"):
        raise invalid(f"Invalid value: '{encoding}'. Supported values are: 'float' and 'base64'.",
                      "encoding_format", "invalid_value")
    dimensions = body.get("dimensions") or service.dimensions
    if not isinstance(dimensions, int) or isinstance(dimensions, bool) or dimensions < 1:
        raise invalid("Invalid 'dimensions': expected a positive integer.", "dimensions", "invalid_value")
    texts = [item if isinstance(item, str) else tokens_text(item) for item in inputs]
    tokens = sum(count_tokens(item) if isinstance(item, str) else len(item) for item in inputs)
    data = []
    for index, text in enumerate(texts):
        vector = embedding_of(text, dimensions)
        value: Any = vector if encoding == "float" else base64.b64encode(
            struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")
        data.append({"object": "embedding", "index": index, "embedding": value})
    if service.shuffle:
        data.reverse()
    return ({"object": "list", "data": data, "model": body["model"],
             "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}, texts, tokens)


async def handle(service: "OpenAIService", request: web.Request) -> web.Response:
    body = await service.read_body(request)
    embedded, texts, tokens = answer(service, body)
    denied = await service.serve(tokens, service.embedding_latency_s + service.embedding_per_input_s * len(texts))
    if denied is not None:
        return denied
    service.record_embeddings(texts, tokens)
    return web.json_response(embedded, headers=service.limit_headers())
