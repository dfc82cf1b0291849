"""A local OpenAI-compatible service for tests, examples and benchmarks: the real protocol of
`POST /v1/chat/completions` and `POST /v1/embeddings`, answered deterministically and offline.

A model pipeline must be testable without a model, and a client tested against it must meet what
the real API does. The service checks requests as the API does and refuses what it refuses, with
its status, message, `param` and `code`: unknown parameters, out-of-range numbers (`temperature`
above 2, `n` below 1), bad messages (a `tool` message answering no `tool_calls`), schemas strict
mode does not take. It accepts what the API accepts: content as a list of parts, tool calls and
results, `anyOf`/`$ref`/`$defs` in strict schemas, token-id arrays as embedding input, `n`
choices, `stream` (server-sent chunks, usage last with `stream_options.include_usage`). It answers

- chat completions with JSON content that fits the requested schema, made from the prompt by a
  `labeller` (default: keyword rules per property, `keyword_labeller`), with `usage` and
  `finish_reason`; a `tool_choice` that names a function (or `required`) is answered with a call
  whose arguments the labeller makes from the function's parameters. Trigger words in the prompt
  force the faults a real model produces: `[[refuse]]` a refusal, `[[length]]` truncated content
  (`finish_reason` `length`), `[[badjson]]` content that is not JSON, `[[wrongtype]]` JSON that
  does not fit the schema;
- embeddings as a pseudo-random unit vector per input (the same text, the same vector; token ids
  are embedded as the text `tokens_text(ids)`), each with its `index` (in reverse order with
  `shuffle=True`, so a client must match by index), as floats or base64 as the SDK asks.

`max_concurrent` gives the server that many slots, as a model server (vLLM) has: a request that
finds them all busy is answered 429 at once. Limits, as OpenAI enforces them: `rpm` requests and
`tpm` tokens per minute (`openai_api/limits.py`). A request costs its prompt tokens plus its
completion tokens (a token is 4 characters, rounded up). `GET /_stats` gives the counts (calls,
rejections, tokens answered), `POST /_reset` zeroes them.

The Batch API too: `/v1/files` (upload, retrieve, list, content, delete) and `/v1/batches` (create,
retrieve, cancel, list), a batch running from validating to completed over `batch_delay_s` with
output and error files and trigger words for errored and expired lines (`openai_api/batches.py`).
`service_tier: "flex"` is answered as flex is: `flex_unavailable` of the requests get a 429
"resource unavailable".

Each endpoint family is a module of `dslc.testing.openai_api` (`chat`, `embeddings`, `files`,
`batches`); this module holds the service's state and what every endpoint shares (keys, models, limits, counts).

Run it with `python -m dslc.testing.openai_service --port 8765 [--rpm N] [--tpm N]`, or in a
thread of a test with `serve_in_thread(OpenAIService(...))`.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import math
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

from aiohttp import web

from .app_thread import AppInThread
from .openai_api import batches, chat, embeddings, files
from .openai_api.answers import (  # noqa: F401 - the names tests and examples import from here
    BAD_JSON,
    EMBEDDING_DIMENSIONS,
    LENGTH,
    REFUSAL_TEXT,
    REFUSE,
    WRONG_TYPE,
    Labeller,
    count_tokens,
    embedding_of,
    keyword_labeller,
    tokens_text,
    value_of_type,
)
from .openai_api.errors import ApiError, invalid
from .openai_api.limits import Bucket, limit_headers, too_many
from .openai_api.schemas import strict_schema_problem  # noqa: F401

Handler = Callable[["OpenAIService", web.Request], Awaitable[web.StreamResponse]]


class OpenAIService:
    """The service's state and its aiohttp application (`app()`)."""

    def __init__(self, *, models: tuple[str, ...] | None = None, labeller: Labeller | None = None,
                 rpm: float | None = None, tpm: float | None = None, burst_s: float = 60.0,
                 latency_s: float = 0.0, embedding_latency_s: float = 0.0, embedding_per_input_s: float = 0.0,
                 dimensions: int = EMBEDDING_DIMENSIONS, shuffle: bool = False,
                 api_key: str | None = None, max_concurrent: int | None = None,
                 batch_delay_s: float = 1.0, download_delay_s: float = 0.0, upload_delay_s: float = 0.0,
                 flex_unavailable: float = 0.0, flex_slowdown: float = 1.0) -> None:
        self.models = models
        self.labeller = labeller or keyword_labeller()
        self.requests = Bucket(rpm, burst_s) if rpm else None
        self.tokens = Bucket(tpm, burst_s) if tpm else None
        self.latency_s = latency_s
        self.embedding_latency_s = embedding_latency_s
        self.embedding_per_input_s = embedding_per_input_s
        self.dimensions = dimensions
        self.shuffle = shuffle
        self.api_key = api_key
        self.max_concurrent = max_concurrent      # a model server's slots: 429 at once above them
        self.running = 0
        # the Batch API: how long a batch takes from validating to completed, how long a file's
        # download pauses halfway, how long an upload's answer comes after the file is kept (a
        # client stopped in between: the provider has a file whose id it never learnt); its
        # files, batches and the `-once` faults already made
        self.batch_delay_s = batch_delay_s
        self.download_delay_s = download_delay_s
        self.upload_delay_s = upload_delay_s
        self.files: dict[str, files.StoredFile] = {}
        self.batches: dict[str, batches.Batch] = {}
        self.faulted: set[tuple[str, str]] = set()
        # service_tier "flex": this share of requests answered 429 "resource unavailable" (every
        # 1/share-th one), and answers `flex_slowdown` times slower
        self.flex_unavailable = flex_unavailable
        self.flex_slowdown = flex_slowdown
        self.reset()

    def reset(self) -> None:
        """Zero the counts (the buckets keep their level)."""
        self.stats: dict[str, Any] = {
            "chat_calls": 0, "embedding_calls": 0, "embedding_inputs": 0, "rejected": 0, "bad_requests": 0,
            "prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0, "prompts": [],
            "schemas": [],                          # the structured-output schema of every chat request
            "embedded": [],                         # every input embedded, in order
            "first_at": None, "last_at": None,     # wall clock of the first and last answered request
            "max_in_flight": 0,
            # service tiers: the tier of every answered chat completion, and flex's 429s
            "tiers": [], "flex_requests": 0, "flex_unavailable": 0,
            # the Batch API: uploads, batches, every custom_id of a batch that ran, lines answered
            # (prompt or input text each) and their tokens, apart from the online counts above
            "files_uploaded": 0, "uploaded_bytes": 0, "downloads": 0, "batches_created": 0,
            "batch_custom_ids": [], "batch_lines": 0, "batch_prompts": [],
            "batch_prompt_tokens": 0, "batch_completion_tokens": 0,
        }

    def app(self) -> web.Application:
        app = web.Application(client_max_size=files.BATCH_FILE_LIMIT + 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self.endpoint(chat.handle))
        app.router.add_post("/v1/embeddings", self.endpoint(embeddings.handle))
        app.router.add_routes(files.routes(self) + batches.routes(self))
        app.router.add_get("/v1/models", self.list_models)
        app.router.add_get("/_stats", self.get_stats)
        app.router.add_post("/_reset", self.post_reset)
        return app

    def endpoint(self, handler: Handler) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        """An endpoint family's handler, its refusals (ApiError) answered as the API answers them."""
        async def endpoint(request: web.Request) -> web.StreamResponse:
            try:
                return await handler(self, request)
            except ApiError as refused:
                return self.refuse(refused)
        return endpoint

    # ----------------------------------------------------------------- what every endpoint shares

    def refuse(self, error: ApiError) -> web.Response:
        self.stats["bad_requests"] += 1
        return web.json_response(error.body(), status=error.status)

    def authorize(self, request: web.Request) -> None:
        """The request's key checked (when the service has one); the API's 401 otherwise."""
        if self.api_key is not None and request.headers.get("Authorization") != f"Bearer {self.api_key}":
            raise ApiError("Incorrect API key provided.", code="invalid_api_key", status=401)

    async def read_body(self, request: web.Request) -> dict[str, Any]:
        """The request's key checked, its JSON body and model; the API's error otherwise."""
        self.authorize(request)
        try:
            body = await request.json()
        except ValueError:
            raise invalid("We could not parse the JSON body of your request.") from None
        if not isinstance(body, dict):
            raise invalid("The request body must be a JSON object.")
        self.check_model(body)
        return body

    def check_model(self, body: dict[str, Any]) -> None:
        """The body names a model the service has; the API's error otherwise."""
        model = body.get("model")
        if not isinstance(model, str) or not model:
            raise invalid("you must provide a model parameter", "model")
        if self.models is not None and model not in self.models:
            raise ApiError(f"The model `{model}` does not exist.", "model", "model_not_found", status=404)

    def limit_headers(self) -> dict[str, str]:
        return limit_headers(self.requests, self.tokens)

    async def serve(self, tokens: int, seconds: float) -> web.Response | None:
        """A slot of the server and `tokens` from the limits held for `seconds` (the answer's
        latency), or the 429 that refused them."""
        denied = self._busy()
        if denied is None:
            denied = self._admit(tokens)
            if denied is not None:
                self.running -= 1
        if denied is not None:
            return denied
        try:
            if seconds:
                await asyncio.sleep(seconds)
        finally:
            self.running -= 1
        return None

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
            headers = self.limit_headers()
            headers["Retry-After"] = str(math.ceil(wait))
            headers["retry-after-ms"] = str(math.ceil(wait * 1000))
            which = "tokens" if self.tokens is not None and self.tokens.wait_for(tokens) > 0 else "requests"
            return too_many(f"Rate limit reached for {which}. Please try again in {wait * 1000:.0f}ms.", which, headers)
        if self.requests is not None:
            self.requests.level -= 1
        if self.tokens is not None:
            self.tokens.level -= tokens
        return None

    def _busy(self) -> web.Response | None:
        """Take one of the server's slots, or a 429 when all are busy (as vLLM's queue limit)."""
        if self.max_concurrent is not None and self.running >= self.max_concurrent:
            self.stats["rejected"] += 1
            return too_many("The server is busy.", "server_busy", {"Retry-After": "0", "retry-after-ms": "10"})
        self.running += 1
        self.stats["max_in_flight"] = max(self.stats["max_in_flight"], self.running)
        return None

    def _stamp(self) -> None:
        now = time.time()
        if self.stats["first_at"] is None:
            self.stats["first_at"] = now
        self.stats["last_at"] = now

    def record_chat(self, text: str, usage: dict[str, int], tier: str = "default",
                    schema: dict[str, Any] | None = None) -> int:
        """Count an answered chat completion (its text, its tier and the schema its answer was asked
        to fit); its number."""
        self._stamp()
        self.stats["chat_calls"] += 1
        self.stats["prompts"].append(text)
        self.stats["tiers"].append(tier)
        self.stats["schemas"].append(schema)
        for k, v in usage.items():
            self.stats[k] += v
        return self.stats["chat_calls"]

    def record_batch_line(self, text: str, usage: dict[str, int]) -> int:
        """Count a batch's line answered (apart from the online requests); its number."""
        self.stats["batch_lines"] += 1
        self.stats["batch_prompts"].append(text)
        self.stats["batch_prompt_tokens"] += usage["prompt_tokens"]
        self.stats["batch_completion_tokens"] += usage["completion_tokens"]
        return self.stats["batch_lines"]

    def flex_refusal(self) -> web.Response | None:
        """A flex request finds no capacity every 1/`flex_unavailable`-th time: the 429 the API
        answers then ("resource unavailable", nothing charged)."""
        self.stats["flex_requests"] += 1
        share = self.flex_unavailable
        if share <= 0 or self.stats["flex_requests"] % max(1, round(1 / share)):
            return None
        self.stats["flex_unavailable"] += 1
        self.stats["rejected"] += 1
        body = {"error": {"message": "Resource unavailable: flex processing has no capacity for this request now; "
                                     "try again later.", "type": "invalid_request_error", "param": None,
                          "code": chat.RESOURCE_UNAVAILABLE}}
        return web.json_response(body, status=429, headers={"retry-after-ms": "50"})

    def record_embeddings(self, texts: list[str], tokens: int) -> None:
        self._stamp()
        self.stats["embedding_calls"] += 1
        self.stats["embedding_inputs"] += len(texts)
        self.stats["embedded"].extend(texts)
        self.stats["prompt_tokens"] += tokens
        self.stats["total_tokens"] += tokens

    def budget(self, seconds: float) -> float | None:
        """Tokens the limit admits over `seconds` from a full bucket (None: no TPM)."""
        return None if self.tokens is None else self.tokens.capacity + self.tokens.rate * seconds

    def complete(self, prompt: str, schema: dict[str, Any] | None) -> tuple[str | None, str | None, str]:
        """Content, refusal and finish_reason for a prompt (free text without a schema)."""
        if REFUSE in prompt:
            return None, REFUSAL_TEXT, "stop"
        if BAD_JSON in prompt:
            return "Sure! Here is the answer: category=billing", None, "stop"
        value = self.labeller(prompt, schema or {"type": "object", "properties": {}})
        if WRONG_TYPE in prompt:
            value = {k: ([v] if not isinstance(v, list) else "not a list") for k, v in value.items()}
        # free text (no response_format) that the labeller has nothing to say about: a sentence
        content = json.dumps(value) if value or schema is not None else f"You said: {prompt[:200]}"
        if LENGTH in prompt:
            return content[: max(1, len(content) // 2)], None, "length"
        return content, None, "stop"

    # ----------------------------------------------------------------- the rest

    async def list_models(self, request: web.Request) -> web.Response:
        names = self.models or ("local-model",)
        return web.json_response({"object": "list", "data": [
            {"id": name, "object": "model", "created": 0, "owned_by": "dslc"} for name in names]})

    async def get_stats(self, request: web.Request) -> web.Response:
        return web.json_response({k: v for k, v in self.stats.items()
                                  if k not in ("prompts", "embedded", "schemas", "tiers", "batch_custom_ids",
                                               "batch_prompts")})

    async def post_reset(self, request: web.Request) -> web.Response:
        self.reset()
        return web.json_response({"ok": True})


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
    parser.add_argument("--batch-delay-s", type=float, default=1.0, help="a batch's time from validating to completed")
    parser.add_argument("--flex-unavailable", type=float, default=0.0,
                        help="share of service_tier flex requests answered 429 (resource unavailable)")
    args = parser.parse_args(argv)
    service = OpenAIService(labeller=labeller, rpm=args.rpm, tpm=args.tpm, burst_s=args.burst_s,
                            latency_s=args.latency_ms / 1000, embedding_latency_s=args.embedding_latency_ms / 1000,
                            embedding_per_input_s=args.embedding_per_input_ms / 1000,
                            max_concurrent=args.max_concurrent, batch_delay_s=args.batch_delay_s,
                            flex_unavailable=args.flex_unavailable)
    web.run_app(service.app(), host="127.0.0.1", port=args.port, access_log=None, print=None)


if __name__ == "__main__":
    main()
