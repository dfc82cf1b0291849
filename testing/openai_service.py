"""A local OpenAI-compatible service for tests, examples and benchmarks: the real protocol of
`POST /v1/chat/completions` and `POST /v1/embeddings`, answered deterministically and offline.

A model pipeline must be testable without a model: this service validates requests as the
OpenAI API does (model, messages, `response_format` of type `json_schema` with a strict schema,
embedding inputs) and answers

- chat completions with JSON content that fits the requested schema, made from the prompt by a
  `labeller` (default: keyword rules per property, `keyword_labeller`), with `usage` and
  `finish_reason`. Trigger words in the prompt force the faults a real model produces:
  `[[refuse]]` a refusal, `[[length]]` truncated content (`finish_reason` `length`),
  `[[badjson]]` content that is not JSON, `[[wrongtype]]` JSON that does not fit the schema;
- embeddings as a pseudo-random unit vector per input text (the same text, the same vector),
  each with its `index` (in reverse order with `shuffle=True`, so a client must match by index),
  as floats or base64 as the SDK asks.

`max_concurrent` gives the server that many slots, as a model server (vLLM) has: a request that
finds them all busy is answered 429 at once. Limits, as OpenAI enforces them: `rpm` requests and `tpm` tokens per minute, each a bucket that
refills continuously and holds `burst_s` seconds of its limit (60: a whole minute); a request the
buckets cannot pay is answered 429 with `Retry-After`, `retry-after-ms` and the
`x-ratelimit-*` headers, which every answer carries. A request costs its prompt tokens plus its
completion tokens (a token is 4 characters, rounded up). `GET /_stats` gives the counts
(calls, rejections, tokens answered), `POST /_reset` zeroes them.

Run it with `python -m dslc.testing.openai_service --port 8765 [--rpm N] [--tpm N]`, or in a
thread of a test with `serve_in_thread(OpenAIService(...))`.
"""
from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import json
import math
import re
import struct
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from aiohttp import web

from .app_thread import AppInThread

REFUSE, LENGTH, BAD_JSON, WRONG_TYPE = "[[refuse]]", "[[length]]", "[[badjson]]", "[[wrongtype]]"
REFUSAL_TEXT = "I'm sorry, I cannot help with that request."
EMBEDDING_DIMENSIONS = 8
_SCHEMA_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_ROLES = ("system", "developer", "user", "assistant")

Labeller = Callable[[str, dict[str, Any]], dict[str, Any]]


def count_tokens(text: str) -> int:
    """The service's token count of a text: 4 characters a token, rounded up (at least 1)."""
    return max(1, math.ceil(len(text) / 4))


# --------------------------------------------------------------------------- answers


def keyword_labeller(rules: dict[str, list[tuple[str, Any]]] | None = None) -> Labeller:
    """A labeller that fills each schema property from `rules[property]`: the value of the first
    (keyword, value) whose keyword the prompt contains (case-insensitive), else the last rule's
    value; a property without rules gets a value of its type made from the prompt's hash."""
    rules = rules or {}

    def label(prompt: str, schema: dict[str, Any]) -> dict[str, Any]:
        lowered = prompt.lower()
        out = {}
        for name, prop in schema.get("properties", {}).items():
            chosen = rules.get(name)
            if chosen:
                out[name] = next((value for word, value in chosen if word and word.lower() in lowered), chosen[-1][1])
            else:
                out[name] = value_of_type(prop, f"{name}:{prompt}")
        return out

    return label


def value_of_type(schema: dict[str, Any], seed: str) -> Any:
    """A deterministic value that fits a JSON schema, derived from `seed`."""
    digest = int.from_bytes(hashlib.blake2b(seed.encode(), digest_size=8).digest(), "big")
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next(k for k in kind if k != "null")
    if "enum" in schema:
        return schema["enum"][digest % len(schema["enum"])]
    if kind == "string":
        return f"s{digest % 1000}"
    if kind == "integer":
        return digest % 5 + 1
    if kind == "number":
        return round((digest % 1000) / 100, 2)
    if kind == "boolean":
        return bool(digest % 2)
    if kind == "array":
        return [value_of_type(schema.get("items", {}), f"{seed}/{i}") for i in range(digest % 3 + 1)]
    if kind == "object":
        return {k: value_of_type(v, f"{seed}/{k}") for k, v in schema.get("properties", {}).items()}
    return None


def embedding_of(text: str, dimensions: int = EMBEDDING_DIMENSIONS) -> list[float]:
    """The unit vector the service answers for a text (same text, same vector), float32 values."""
    raw = hashlib.shake_128(text.encode()).digest(4 * dimensions)
    values = [(b - 127.5) / 127.5 for b in raw[::4]]
    norm = math.sqrt(sum(v * v for v in values)) or 1.0
    return [struct.unpack("<f", struct.pack("<f", v / norm))[0] for v in values]


# --------------------------------------------------------------------------- rate limits


class _Bucket:
    """A limit per minute that refills continuously and holds `burst_s` seconds of it."""

    def __init__(self, per_minute: float, burst_s: float) -> None:
        self.per_minute = per_minute
        self.rate = per_minute / 60.0
        self.capacity = max(1.0, self.rate * burst_s)
        self.level = self.capacity
        self.stamp = time.monotonic()

    def refill(self) -> None:
        now = time.monotonic()
        self.level = min(self.capacity, self.level + (now - self.stamp) * self.rate)
        self.stamp = now

    def wait_for(self, amount: float) -> float:
        """Seconds until `amount` can be paid (0: now); an amount above the capacity waits for a full bucket."""
        missing = min(amount, self.capacity) - self.level
        return 0.0 if missing <= 0 else missing / self.rate

    def reset_s(self) -> float:
        """Seconds until the bucket is full again."""
        return (self.capacity - self.level) / self.rate


def _duration(seconds: float) -> str:
    """A reset time as OpenAI writes it: `20ms`, `1.5s`, `6m0s`."""
    if seconds < 1:
        return f"{max(0, math.ceil(seconds * 1000))}ms"
    if seconds < 60:
        return f"{seconds:.3f}".rstrip("0").rstrip(".") + "s"
    minutes, rest = divmod(seconds, 60)
    return f"{int(minutes)}m{rest:.0f}s"


# --------------------------------------------------------------------------- the service


class OpenAIService:
    """The service's state and its aiohttp application (`app()`)."""

    def __init__(self, *, models: tuple[str, ...] | None = None, labeller: Labeller | None = None,
                 rpm: float | None = None, tpm: float | None = None, burst_s: float = 60.0,
                 latency_s: float = 0.0, embedding_latency_s: float = 0.0, embedding_per_input_s: float = 0.0,
                 dimensions: int = EMBEDDING_DIMENSIONS, shuffle: bool = False,
                 api_key: str | None = None, max_concurrent: int | None = None) -> None:
        self.models = models
        self.labeller = labeller or keyword_labeller()
        self.requests = _Bucket(rpm, burst_s) if rpm else None
        self.tokens = _Bucket(tpm, burst_s) if tpm else None
        self.latency_s = latency_s
        self.embedding_latency_s = embedding_latency_s
        self.embedding_per_input_s = embedding_per_input_s
        self.dimensions = dimensions
        self.shuffle = shuffle
        self.api_key = api_key
        self.max_concurrent = max_concurrent      # a model server's slots: 429 at once above them
        self.running = 0
        self.reset()

    def reset(self) -> None:
        """Zero the counts (the buckets keep their level)."""
        self.stats: dict[str, Any] = {
            "chat_calls": 0, "embedding_calls": 0, "embedding_inputs": 0, "rejected": 0, "bad_requests": 0,
            "prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0, "prompts": [],
            "embedded": [],                         # every input embedded, in order
            "first_at": None, "last_at": None,     # wall clock of the first and last answered request
            "max_in_flight": 0,
        }

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self.chat)
        app.router.add_post("/v1/embeddings", self.embeddings)
        app.router.add_get("/v1/models", self.list_models)
        app.router.add_get("/_stats", self.get_stats)
        app.router.add_post("/_reset", self.post_reset)
        return app

    # ----------------------------------------------------------------- protocol

    def _invalid(self, message: str, param: str | None = None, status: int = 400) -> web.Response:
        self.stats["bad_requests"] += 1
        body = {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": None}}
        return web.json_response(body, status=status)

    def _auth(self, request: web.Request) -> web.Response | None:
        if self.api_key is None:
            return None
        if request.headers.get("Authorization") != f"Bearer {self.api_key}":
            self.stats["bad_requests"] += 1
            body = {"error": {"message": "Incorrect API key provided.", "type": "invalid_request_error",
                              "param": None, "code": "invalid_api_key"}}
            return web.json_response(body, status=401)
        return None

    async def _body(self, request: web.Request) -> dict[str, Any] | web.Response:
        try:
            body = await request.json()
        except ValueError:
            return self._invalid("We could not parse the JSON body of your request.")
        if not isinstance(body, dict):
            return self._invalid("The request body must be a JSON object.")
        model = body.get("model")
        if not isinstance(model, str) or not model:
            return self._invalid("you must provide a model parameter", "model")
        if self.models is not None and model not in self.models:
            self.stats["bad_requests"] += 1
            return web.json_response({"error": {"message": f"The model `{model}` does not exist.",
                                                "type": "invalid_request_error", "param": "model",
                                                "code": "model_not_found"}}, status=404)
        return body

    def _limit_headers(self) -> dict[str, str]:
        headers = {}
        for kind, bucket in (("requests", self.requests), ("tokens", self.tokens)):
            if bucket is not None:
                bucket.refill()
                headers[f"x-ratelimit-limit-{kind}"] = str(int(bucket.per_minute))
                headers[f"x-ratelimit-remaining-{kind}"] = str(max(0, int(bucket.level)))
                headers[f"x-ratelimit-reset-{kind}"] = _duration(bucket.reset_s())
        return headers

    def _admit(self, tokens: int) -> web.Response | None:
        """Pay one request and `tokens` tokens, or a 429 saying when to come back."""
        waits = []
        for bucket, amount in ((self.requests, 1), (self.tokens, tokens)):
            if bucket is not None:
                bucket.refill()
                waits.append(bucket.wait_for(amount))
        wait = max(waits, default=0.0)
        if wait > 0:
            self.stats["rejected"] += 1
            headers = self._limit_headers()
            headers["Retry-After"] = str(math.ceil(wait))
            headers["retry-after-ms"] = str(math.ceil(wait * 1000))
            which = "tokens" if self.tokens is not None and self.tokens.wait_for(tokens) > 0 else "requests"
            return _too_many(f"Rate limit reached for {which}. Please try again in {wait * 1000:.0f}ms.", which, headers)
        if self.requests is not None:
            self.requests.level -= 1
        if self.tokens is not None:
            self.tokens.level -= tokens
        return None

    def _slot_and_admit(self, tokens: int) -> web.Response | None:
        """A slot of the server, then the limits; a 429 for either (holding nothing then)."""
        denied = self._busy()
        if denied is None:
            denied = self._admit(tokens)
            if denied is not None:
                self.running -= 1
        return denied

    def _busy(self) -> web.Response | None:
        """Take one of the server's slots, or a 429 when all are busy (as vLLM's queue limit)."""
        if self.max_concurrent is not None and self.running >= self.max_concurrent:
            self.stats["rejected"] += 1
            return _too_many("The server is busy.", "server_busy", {"Retry-After": "0", "retry-after-ms": "10"})
        self.running += 1
        self.stats["max_in_flight"] = max(self.stats["max_in_flight"], self.running)
        return None

    # ----------------------------------------------------------------- chat completions

    async def chat(self, request: web.Request) -> web.Response:
        denied = self._auth(request)
        if denied is not None:
            return denied
        body = await self._body(request)
        if isinstance(body, web.Response):
            return body
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return self._invalid("'messages' must be a non-empty array", "messages")
        for i, message in enumerate(messages):
            if not isinstance(message, dict) or message.get("role") not in _ROLES:
                return self._invalid(f"Invalid value for 'messages[{i}].role'", f"messages[{i}].role")
            if not isinstance(message.get("content"), str):
                return self._invalid(f"'messages[{i}].content' must be a string", f"messages[{i}].content")
        schema = None
        response_format = body.get("response_format")
        if response_format is not None:
            schema_or_error = _json_schema_of(response_format)
            if isinstance(schema_or_error, str):
                return self._invalid(schema_or_error, "response_format")
            schema = schema_or_error
        prompt = "\n".join(m["content"] for m in messages if m["role"] in ("user", "developer"))
        text = "\n".join(m["content"] for m in messages)
        prompt_tokens = sum(count_tokens(m["content"]) + 4 for m in messages)
        content, refusal, finish = self._complete(prompt, schema)
        completion_tokens = count_tokens(content if content is not None else refusal or "")
        max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
        if isinstance(max_tokens, int) and completion_tokens > max_tokens and content is not None:
            content, completion_tokens, finish = content[:max_tokens * 4], max_tokens, "length"
        denied = self._slot_and_admit(prompt_tokens + completion_tokens)
        if denied is not None:
            return denied
        try:
            if self.latency_s:
                await asyncio.sleep(self.latency_s)
        finally:
            self.running -= 1
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                 "total_tokens": prompt_tokens + completion_tokens}
        stats = self.stats
        self._stamp()
        stats["chat_calls"] += 1
        stats["prompts"].append(text)
        for k, v in usage.items():
            stats[k] += v
        answer = {
            "id": f"chatcmpl-{stats['chat_calls']}", "object": "chat.completion", "created": int(time.time()),
            "model": body["model"],
            "choices": [{"index": 0, "finish_reason": finish, "logprobs": None,
                         "message": {"role": "assistant", "content": content, "refusal": refusal}}],
            "usage": usage,
        }
        return web.json_response(answer, headers=self._limit_headers())

    def _stamp(self) -> None:
        now = time.time()
        if self.stats["first_at"] is None:
            self.stats["first_at"] = now
        self.stats["last_at"] = now

    def budget(self, seconds: float) -> float | None:
        """Tokens the limit admits over `seconds` from a full bucket (None: no TPM)."""
        return None if self.tokens is None else self.tokens.capacity + self.tokens.rate * seconds

    def _complete(self, prompt: str, schema: dict[str, Any] | None) -> tuple[str | None, str | None, str]:
        """Content, refusal and finish_reason for a prompt."""
        if REFUSE in prompt:
            return None, REFUSAL_TEXT, "stop"
        if BAD_JSON in prompt:
            return "Sure! Here is the answer: category=billing", None, "stop"
        target = schema or {"type": "object", "properties": {}}
        value = self.labeller(prompt, target)
        if WRONG_TYPE in prompt:
            value = {k: ([v] if not isinstance(v, list) else "not a list") for k, v in value.items()}
        content = json.dumps(value)
        if LENGTH in prompt:
            return content[: max(1, len(content) // 2)], None, "length"
        return content, None, "stop"

    # ----------------------------------------------------------------- embeddings

    async def embeddings(self, request: web.Request) -> web.Response:
        denied = self._auth(request)
        if denied is not None:
            return denied
        body = await self._body(request)
        if isinstance(body, web.Response):
            return body
        inputs = body.get("input")
        if isinstance(inputs, str):
            inputs = [inputs]
        if not isinstance(inputs, list) or not inputs or not all(isinstance(i, str) and i for i in inputs):
            return self._invalid("'input' must be a non-empty string or a non-empty array of non-empty strings",
                                 "input")
        if len(inputs) > 2048:
            return self._invalid("'input' holds more than 2048 items", "input")
        encoding = body.get("encoding_format", "float")
        if encoding not in ("float", "base64"):
            return self._invalid("'encoding_format' must be 'float' or 'base64'", "encoding_format")
        dimensions = body.get("dimensions", self.dimensions)
        if not isinstance(dimensions, int) or dimensions < 1:
            return self._invalid("'dimensions' must be a positive integer", "dimensions")
        tokens = sum(count_tokens(text) for text in inputs)
        denied = self._slot_and_admit(tokens)
        if denied is not None:
            return denied
        try:
            delay = self.embedding_latency_s + self.embedding_per_input_s * len(inputs)
            if delay:
                await asyncio.sleep(delay)
        finally:
            self.running -= 1
        stats = self.stats
        self._stamp()
        stats["embedding_calls"] += 1
        stats["embedding_inputs"] += len(inputs)
        stats["embedded"].extend(inputs)
        stats["prompt_tokens"] += tokens
        stats["total_tokens"] += tokens
        data = []
        for index, text in enumerate(inputs):
            vector = embedding_of(text, dimensions)
            value: Any = vector if encoding == "float" else base64.b64encode(
                struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")
            data.append({"object": "embedding", "index": index, "embedding": value})
        if self.shuffle:
            data.reverse()
        answer = {"object": "list", "data": data, "model": body["model"],
                  "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}
        return web.json_response(answer, headers=self._limit_headers())

    # ----------------------------------------------------------------- the rest

    async def list_models(self, request: web.Request) -> web.Response:
        names = self.models or ("local-model",)
        return web.json_response({"object": "list", "data": [
            {"id": name, "object": "model", "created": 0, "owned_by": "dslc"} for name in names]})

    async def get_stats(self, request: web.Request) -> web.Response:
        return web.json_response({k: v for k, v in self.stats.items() if k not in ("prompts", "embedded")})

    async def post_reset(self, request: web.Request) -> web.Response:
        self.reset()
        return web.json_response({"ok": True})


def _json_schema_of(response_format: Any) -> dict[str, Any] | str:
    """The schema a `response_format` asks for, or the message of a 400."""
    if not isinstance(response_format, dict):
        return "'response_format' must be an object"
    kind = response_format.get("type")
    if kind == "text":
        return {"type": "object", "properties": {}}
    if kind == "json_object":
        return {"type": "object", "properties": {}}
    if kind != "json_schema":
        return f"Invalid value for 'response_format.type': {kind!r}"
    spec = response_format.get("json_schema")
    if not isinstance(spec, dict):
        return "'response_format.json_schema' must be an object"
    name = spec.get("name")
    if not isinstance(name, str) or not _SCHEMA_NAME.match(name):
        return "'response_format.json_schema.name' must match ^[a-zA-Z0-9_-]{1,64}$"
    schema = spec.get("schema")
    if not isinstance(schema, dict):
        return "'response_format.json_schema.schema' must be an object"
    if spec.get("strict"):
        problem = strict_schema_problem(schema, "schema")
        if problem:
            return f"Invalid schema for response_format '{name}': {problem}"
    return schema


_TYPES = ("string", "number", "integer", "boolean", "object", "array", "null")


def strict_schema_problem(schema: Any, where: str) -> str | None:
    """Why a schema is not valid for structured outputs in strict mode (None: it is): objects
    list every property in `required` and set `additionalProperties` to false."""
    if not isinstance(schema, dict):
        return f"{where} must be an object"
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else [kind]
    if "enum" in schema and kind is None:
        return None
    if not kinds or any(k not in _TYPES for k in kinds):
        return f"{where} has type {kind!r}"
    if where == "schema" and kinds != ["object"]:
        return "the root of the schema must be an object"
    if "object" in kinds:
        properties = schema.get("properties")
        if not isinstance(properties, dict):
            return f"{where} is an object without 'properties'"
        if schema.get("additionalProperties") is not False:
            return f"'additionalProperties' is required to be supplied and to be false in {where}"
        if sorted(schema.get("required") or []) != sorted(properties):
            return f"'required' is required to be supplied and to be an array including every key in {where}.properties"
        for key, prop in properties.items():
            problem = strict_schema_problem(prop, f"{where}.properties.{key}")
            if problem:
                return problem
    if "array" in kinds:
        return strict_schema_problem(schema.get("items"), f"{where}.items")
    return None


def _too_many(message: str, kind: str, headers: dict[str, str]) -> web.Response:
    """A 429 with OpenAI's error body (`rate_limit_exceeded`)."""
    body = {"error": {"message": message, "type": kind, "param": None, "code": "rate_limit_exceeded"}}
    return web.json_response(body, status=429, headers=headers)


# --------------------------------------------------------------------------- running it


class RunningService(AppInThread):
    """A service served on 127.0.0.1 in a daemon thread: `base_url` ends in `/v1`."""

    def __init__(self, service: OpenAIService, port: int = 0) -> None:
        self.service = service
        super().__init__(service.app(), port, name="openai-service")
        self.base_url = f"http://127.0.0.1:{self.port}/v1"

    @property
    def stats(self) -> dict[str, Any]:
        """The counts so far (read on the service's loop)."""
        return asyncio.run_coroutine_threadsafe(_copy(self.service.stats), self.loop).result(10)

    def reset(self) -> None:
        asyncio.run_coroutine_threadsafe(_call(self.service.reset), self.loop).result(10)



async def _copy(stats: dict[str, Any]) -> dict[str, Any]:
    return {k: (list(v) if isinstance(v, list) else v) for k, v in stats.items()}


async def _call(function: Callable[[], None]) -> None:
    function()


@contextmanager
def serve_in_thread(service: OpenAIService, port: int = 0) -> Iterator[RunningService]:
    """Serve `service` while the block runs."""
    running = RunningService(service, port)
    try:
        yield running
    finally:
        running.stop()


def main(argv: list[str] | None = None, labeller: Labeller | None = None) -> None:
    """Serve until interrupted (an example's or a benchmark's service process)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--rpm", type=float)
    parser.add_argument("--tpm", type=float)
    parser.add_argument("--burst-s", type=float, default=60.0)
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--embedding-latency-ms", type=float, default=0.0)
    parser.add_argument("--embedding-per-input-ms", type=float, default=0.0)
    parser.add_argument("--max-concurrent", type=int)
    args = parser.parse_args(argv)
    service = OpenAIService(labeller=labeller, rpm=args.rpm, tpm=args.tpm, burst_s=args.burst_s,
                            latency_s=args.latency_ms / 1000, embedding_latency_s=args.embedding_latency_ms / 1000,
                            embedding_per_input_s=args.embedding_per_input_ms / 1000,
                            max_concurrent=args.max_concurrent)
    web.run_app(service.app(), host="127.0.0.1", port=args.port, access_log=None, print=None)


if __name__ == "__main__":
    main()
