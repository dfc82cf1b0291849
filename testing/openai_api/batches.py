"""`/v1/batches`: the Batch API. A batch reads a JSONL file uploaded with purpose `batch` (one
request a line: `custom_id`, `method`, `url`, `body`), goes `validating` → `in_progress` →
`finalizing` → `completed` over `batch_delay_s`, and writes an output file (one line per answered
request: `{"id", "custom_id", "response": {"status_code", "request_id", "body"}, "error"}`, in
shuffled order, as the API promises no order) and an error file (requests answered with an
error status, and requests that expired: `"response": null, "error": {"code": "batch_expired"}`).
`request_counts` grows while it runs; cancel, retrieve and list answer as the API does.

Each line is answered by the endpoint family's own code (chat.answer, embeddings.answer), so a
batch line and an online request get the same answer. Trigger words in a line's prompt or input
force a batch's faults: `[[batch-error]]` a 500 for that line, `[[batch-expire]]` the line left
undone when the completion window ends (the batch ends `expired`); with `-once`
(`[[batch-error-once]]`, `[[batch-expire-once]]`) only the first time a custom_id is seen, so a
resent line is answered.
"""
from __future__ import annotations

import asyncio
import json
import random
import secrets
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aiohttp import web

from . import chat, embeddings
from .errors import ApiError, invalid
from .files import add_file, file_of, new_id

if TYPE_CHECKING:
    from dslc.testing.openai_service import OpenAIService

ENDPOINTS = ("/v1/chat/completions", "/v1/embeddings")
KNOWN_ENDPOINTS = ENDPOINTS + ("/v1/responses", "/v1/completions", "/v1/moderations", "/v1/images/generations",
                               "/v1/images/edits", "/v1/videos")
CREATE_PARAMETERS = frozenset({"input_file_id", "endpoint", "completion_window", "metadata", "output_expires_after"})
MAX_LINES = 50_000
BATCH_ERROR, BATCH_ERROR_ONCE = "[[batch-error]]", "[[batch-error-once]]"
BATCH_EXPIRE, BATCH_EXPIRE_ONCE = "[[batch-expire]]", "[[batch-expire-once]]"
EXPIRED_MESSAGE = "This request could not be executed before the completion window expired."
_STEPS = 10          # request_counts grow in this many steps over the batch's delay
_TERMINAL = ("completed", "failed", "expired", "cancelled")


@dataclass
class Batch:
    """One batch and where it is."""

    id: str
    endpoint: str
    input_file_id: str
    completion_window: str
    metadata: dict[str, str] | None
    created_at: int
    status: str = "validating"
    times: dict[str, int | None] = field(default_factory=dict)
    output_file_id: str | None = None
    error_file_id: str | None = None
    errors: dict[str, Any] | None = None
    counts: dict[str, int] = field(default_factory=lambda: {"total": 0, "completed": 0, "failed": 0})
    usage: dict[str, int] = field(default_factory=lambda: {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0})
    model: str | None = None
    cancelling: bool = False
    task: asyncio.Task | None = None

    def object(self) -> dict[str, Any]:
        stamps = {name: self.times.get(name) for name in (
            "in_progress_at", "finalizing_at", "completed_at", "failed_at", "expired_at", "cancelling_at",
            "cancelled_at")}
        usage = {**self.usage, "input_tokens_details": {"cached_tokens": 0},
                 "output_tokens_details": {"reasoning_tokens": 0}}
        return {"id": self.id, "object": "batch", "endpoint": self.endpoint, "errors": self.errors,
                "input_file_id": self.input_file_id, "completion_window": self.completion_window,
                "status": self.status, "output_file_id": self.output_file_id, "error_file_id": self.error_file_id,
                "created_at": self.created_at, "expires_at": self.created_at + 24 * 3600, **stamps,
                "request_counts": dict(self.counts), "metadata": self.metadata, "model": self.model, "usage": usage}


def routes(service: "OpenAIService") -> list[web.RouteDef]:
    endpoint = service.endpoint
    return [web.post("/v1/batches", endpoint(create)), web.get("/v1/batches", endpoint(list_batches)),
            web.get("/v1/batches/{id}", endpoint(retrieve)), web.post("/v1/batches/{id}/cancel", endpoint(cancel))]


def _batch(service: "OpenAIService", batch_id: str) -> Batch:
    found = service.batches.get(batch_id)
    if found is None:
        raise ApiError(f"No batch found with id '{batch_id}'.", "batch_id", status=404)
    return found


async def create(service: "OpenAIService", request: web.Request) -> web.Response:
    service.authorize(request)
    try:
        body = await request.json()
    except ValueError:
        raise invalid("We could not parse the JSON body of your request.") from None
    if not isinstance(body, dict):
        raise invalid("The request body must be a JSON object.")
    for name in body:
        if name not in CREATE_PARAMETERS:
            raise invalid(f"Unrecognized request argument supplied: {name}")
    for name in ("input_file_id", "endpoint", "completion_window"):
        if not isinstance(body.get(name), str):
            raise invalid(f"Missing required parameter: '{name}'.", name, "missing_required_parameter")
    if body["completion_window"] != "24h":
        raise invalid(f"Invalid value: '{body['completion_window']}'. Supported values are: '24h'.",
                      "completion_window", "invalid_value")
    if body["endpoint"] not in KNOWN_ENDPOINTS:
        raise invalid(f"Invalid value: '{body['endpoint']}'. Supported values are: " + ", ".join(
            f"'{e}'" for e in KNOWN_ENDPOINTS) + ".", "endpoint", "invalid_value")
    if body["endpoint"] not in ENDPOINTS:
        raise invalid(f"This service answers batches of {' and '.join(ENDPOINTS)} only.", "endpoint")
    metadata = body.get("metadata")
    if metadata is not None and (not isinstance(metadata, dict) or len(metadata) > 16):
        raise invalid("Invalid 'metadata': expected an object of at most 16 keys.", "metadata")
    source = file_of(service, body["input_file_id"])
    if source.purpose != "batch":
        raise invalid(f"The file {source.id} was not uploaded with purpose 'batch'.", "input_file_id")
    batch = Batch(new_id("batch_"), body["endpoint"], source.id, "24h", metadata, int(time.time()))
    service.batches[batch.id] = batch
    service.stats["batches_created"] += 1
    batch.task = asyncio.ensure_future(_run(service, batch, source.data))
    return web.json_response(batch.object())


async def retrieve(service: "OpenAIService", request: web.Request) -> web.Response:
    service.authorize(request)
    return web.json_response(_batch(service, request.match_info["id"]).object())


async def cancel(service: "OpenAIService", request: web.Request) -> web.Response:
    service.authorize(request)
    batch = _batch(service, request.match_info["id"])
    if batch.status in _TERMINAL or batch.status == "finalizing":
        raise ApiError(f"Cannot cancel a batch with status '{batch.status}'.", status=409)
    if batch.status != "cancelling":
        batch.cancelling = True
        batch.status = "cancelling"
        batch.times["cancelling_at"] = int(time.time())
    return web.json_response(batch.object())


async def list_batches(service: "OpenAIService", request: web.Request) -> web.Response:
    """Newest first, `limit` (1 to 100, default 20) after the batch `after`."""
    service.authorize(request)
    try:
        limit = int(request.query.get("limit", "20"))
    except ValueError:
        raise invalid("Invalid 'limit': expected an integer.", "limit") from None
    if not 1 <= limit <= 100:
        raise invalid("Invalid 'limit': expected a value from 1 to 100.", "limit", "invalid_value")
    found = list(reversed(list(service.batches.values())))
    after = request.query.get("after")
    if after is not None:
        ids = [b.id for b in found]
        found = found[ids.index(after) + 1:] if after in ids else []
    page = found[:limit]
    return web.json_response({"object": "list", "data": [b.object() for b in page],
                              "first_id": page[0].id if page else None, "last_id": page[-1].id if page else None,
                              "has_more": len(found) > len(page)})


# --------------------------------------------------------------------------- running a batch


def _validate(batch: Batch, data: bytes) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The input file's requests, and the problems that fail the batch (none: it runs)."""
    lines = data.decode("utf-8", "replace").splitlines()
    requests: list[dict[str, Any]] = []
    problems: list[dict[str, Any]] = []
    seen: set[str] = set()
    models: set[Any] = set()
    if not lines:
        return [], [{"code": "empty_file", "message": "The input file is empty.", "param": None, "line": None}]
    if len(lines) > MAX_LINES:
        return [], [{"code": "too_many_requests", "message": f"The input file has {len(lines)} requests; a batch "
                     f"takes at most {MAX_LINES}.", "param": None, "line": None}]
    for number, line in enumerate(lines, 1):
        try:
            item = json.loads(line)
        except ValueError:
            problems.append({"code": "invalid_json_line", "message": "This line is not parseable as valid JSON.",
                             "param": None, "line": number})
            continue
        problem = _line_problem(item, batch.endpoint, seen)
        if problem is not None:
            problems.append({**problem, "line": number})
            continue
        seen.add(item["custom_id"])
        models.add(item["body"].get("model"))
        requests.append(item)
    if len(models) > 1 and not problems:
        problems.append({"code": "mismatched_model", "message": "The requests of a batch must all use one model.",
                         "param": "body.model", "line": None})
    batch.model = next(iter(models), None)
    return requests, problems


def _line_problem(item: Any, endpoint: str, seen: set[str]) -> dict[str, Any] | None:
    if not isinstance(item, dict) or not isinstance(item.get("custom_id"), str) or not item["custom_id"]:
        return {"code": "missing_required_parameter", "message": "Missing required parameter: 'custom_id'.",
                "param": "custom_id"}
    if item["custom_id"] in seen:
        return {"code": "duplicate_custom_id", "message": f"The custom_id '{item['custom_id']}' is used more than "
                "once; each request of a batch needs its own.", "param": "custom_id"}
    if item.get("method") != "POST":
        return {"code": "invalid_method", "message": "The 'method' of a batch request must be 'POST'.", "param": "method"}
    if item.get("url") != endpoint:
        return {"code": "mismatched_endpoint", "message": f"The 'url' of this request ({item.get('url')}) is not the "
                f"batch's endpoint {endpoint}.", "param": "url"}
    if not isinstance(item.get("body"), dict):
        return {"code": "missing_required_parameter", "message": "Missing required parameter: 'body'.", "param": "body"}
    return None


async def _run(service: "OpenAIService", batch: Batch, data: bytes) -> None:
    """Validate, answer the lines over the batch's delay, then write its files."""
    await _wait(batch, service.batch_delay_s * 0.1)
    checked, problems = _validate(batch, data)
    if batch.cancelling:
        return await _end(service, batch, [], [], "cancelled")
    if problems:
        batch.status, batch.errors = "failed", {"object": "list", "data": problems}
        batch.times["failed_at"] = int(time.time())
        return None
    service.stats["batch_custom_ids"].extend(item["custom_id"] for item in checked)
    batch.status, batch.counts["total"] = "in_progress", len(checked)
    batch.times["in_progress_at"] = int(time.time())
    outputs: list[dict[str, Any]] = []
    errors: list[dict[str, Any]] = []
    expired: list[dict[str, Any]] = []
    step = max(1, -(-len(checked) // _STEPS))
    for start in range(0, len(checked), step):
        await _wait(batch, service.batch_delay_s * 0.8 / _STEPS)
        if batch.cancelling:
            return await _end(service, batch, outputs, errors, "cancelled")
        for item in checked[start:start + step]:
            _answer_line(service, batch, item, outputs, errors, expired)
    batch.status = "finalizing"
    batch.times["finalizing_at"] = int(time.time())
    await asyncio.sleep(service.batch_delay_s * 0.1)
    errors += [{"id": new_id("batch_req_"), "custom_id": item["custom_id"], "response": None,
                "error": {"code": "batch_expired", "message": EXPIRED_MESSAGE}} for item in expired]
    batch.counts["failed"] += len(expired)
    await _end(service, batch, outputs, errors, "expired" if expired else "completed")


async def _wait(batch: Batch, seconds: float) -> None:
    """Sleep `seconds`, or until the batch is being cancelled."""
    until = time.monotonic() + seconds
    while not batch.cancelling and time.monotonic() < until:
        await asyncio.sleep(min(0.05, max(0.0, until - time.monotonic())))


def _answer_line(service: "OpenAIService", batch: Batch, item: dict[str, Any], outputs: list, errors: list,
                 expired: list) -> None:
    """One request of the batch, answered (an output line), failed (an error line) or left undone."""
    body, custom_id = item["body"], item["custom_id"]
    text = json.dumps(body)
    if _fault(service, custom_id, text, BATCH_EXPIRE, BATCH_EXPIRE_ONCE):
        expired.append(item)
        return
    request_id = secrets.token_hex(16)
    status, answer = 200, None
    if _fault(service, custom_id, text, BATCH_ERROR, BATCH_ERROR_ONCE):
        status, answer = 500, {"error": {"message": "The server had an error while processing your request.",
                                         "type": "server_error", "param": None, "code": None}}
    else:
        try:
            answer = _line_answer(service, batch.endpoint, body)
        except ApiError as refused:
            status, answer = refused.status, refused.body()
    line = {"id": new_id("batch_req_"), "custom_id": custom_id,
            "response": {"status_code": status, "request_id": request_id, "body": answer}, "error": None}
    if status == 200:
        outputs.append(line)
        batch.counts["completed"] += 1
        usage = answer.get("usage") or {}
        batch.usage["input_tokens"] += usage.get("prompt_tokens", 0)
        batch.usage["output_tokens"] += usage.get("completion_tokens", 0)
        batch.usage["total_tokens"] += usage.get("total_tokens", 0)
    else:
        errors.append(line)
        batch.counts["failed"] += 1


def _fault(service: "OpenAIService", custom_id: str, text: str, always: str, once: str) -> bool:
    if always in text:
        return True
    if once in text and (once, custom_id) not in service.faulted:
        service.faulted.add((once, custom_id))
        return True
    return False


def _line_answer(service: "OpenAIService", endpoint: str, body: dict[str, Any]) -> dict[str, Any]:
    """The body an online request of `endpoint` would have been answered with."""
    service.check_model(body)
    if endpoint == "/v1/embeddings":
        answer, texts, tokens = embeddings.answer(service, body)
        service.record_batch_line(texts[0] if len(texts) == 1 else "\n".join(texts),
                                  {"prompt_tokens": tokens, "completion_tokens": 0, "total_tokens": tokens})
        return {**answer}
    request = chat.parse(body)
    answer, usage = chat.answer(service, request, "default")
    number = service.record_batch_line(request.text, usage)
    return {"id": f"chatcmpl-batch-{number}", **answer}


async def _end(service: "OpenAIService", batch: Batch, outputs: list, errors: list, status: str) -> None:
    """Write the batch's output file (lines shuffled) and error file; the batch ends in `status`."""
    random.Random(batch.id).shuffle(outputs)
    if outputs:
        batch.output_file_id = add_file(service, f"batch_{batch.id}_output.jsonl", "batch_output",
                                        "".join(json.dumps(line) + "\n" for line in outputs).encode()).id
    if errors:
        batch.error_file_id = add_file(service, f"batch_{batch.id}_error.jsonl", "batch_output",
                                       "".join(json.dumps(line) + "\n" for line in errors).encode()).id
    if status == "cancelled":
        await asyncio.sleep(service.batch_delay_s * 0.05)
    batch.status = status
    batch.times[f"{status}_at"] = int(time.time())
