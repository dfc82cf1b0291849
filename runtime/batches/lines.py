"""A provider batch's lines: the requests going in (one JSONL line per request key:
`{"custom_id", "method": "POST", "url", "body"}`, the body the online call would send), cut
into batches at the provider's limits, and the lines coming back from its output and error
files, each made the answer (or the error) an online request would have been.

Output line: `{"id", "custom_id", "response": {"status_code", "request_id", "body"}, "error"}`;
an error file's line has a status that is not 200, or `"response": null` and an `error` (an
expired line: `batch_expired`). Lines come in any order: they are matched by custom_id.
"""
from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from dslc.runtime.calls.base import CallError

MAX_LINES = 50_000                   # the provider's limits on one batch
MAX_BYTES = 200 * 1024 * 1024
_SAFE_BYTES = MAX_BYTES - 1024 * 1024   # room for the multipart envelope

#: JSON as json.dumps(..., ensure_ascii=False, separators=(",", ":")) writes it, one encoder for every line
compact = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


@dataclass
class Request:
    """One request key to send: its line and what its cost is estimated from."""

    custom_id: str
    key: str
    args: str | None            # the request columns as JSON (for the stored answer's join)
    line: bytes                 # the JSONL line, newline included
    prompt_tokens: int


def request_line(custom_id: str, url: str, body: dict[str, Any]) -> bytes:
    """One input line (`url`: the endpoint's path, `/v1/chat/completions`)."""
    return (compact({"custom_id": custom_id, "method": "POST", "url": url, "body": body}) + "\n").encode("utf-8")


def split(requests: list[Request], max_lines: int = MAX_LINES, max_bytes: int = _SAFE_BYTES) -> list[list[Request]]:
    """Requests cut into batches of at most `max_lines` lines and `max_bytes` bytes, in order."""
    out: list[list[Request]] = []
    current: list[Request] = []
    size = 0
    for request in requests:
        if current and (len(current) >= max_lines or size + len(request.line) > max_bytes):
            out.append(current)
            current, size = [], 0
        current.append(request)
        size += len(request.line)
    if current:
        out.append(current)
    return out


@dataclass
class Outcome:
    """What came back for one line: the answer's body (status 200) or why there is none."""

    custom_id: str
    body: dict[str, Any] | None
    error: str | None


def outcomes(content: bytes) -> Iterator[Outcome]:
    """The lines of an output or error file."""
    for raw in content.splitlines():
        if not raw.strip():
            continue
        try:
            item = json.loads(raw)
        except ValueError:
            continue          # a file cut short: its lines are missing, and so failed
        if not isinstance(item, dict) or not isinstance(item.get("custom_id"), str):
            continue
        yield _outcome(item)


def _outcome(item: dict[str, Any]) -> Outcome:
    response, error = item.get("response"), item.get("error")
    custom_id = item["custom_id"]
    if isinstance(response, dict) and response.get("status_code") == 200 and isinstance(response.get("body"), dict):
        return Outcome(custom_id, response["body"], None)
    if isinstance(response, dict):
        body = response.get("body") if isinstance(response.get("body"), dict) else {}
        detail = body.get("error") if isinstance(body.get("error"), dict) else {}
        message = detail.get("message") or json.dumps(body)[:200]
        return Outcome(custom_id, None, f"the batch answered HTTP {response.get('status_code')}: {message}")
    if isinstance(error, dict):
        return Outcome(custom_id, None, f"the batch answered {error.get('code')}: {error.get('message')}")
    return Outcome(custom_id, None, "the batch's line has neither a response nor an error")


def judged(call: Any, body: dict[str, Any]) -> tuple[Any, str | None, str | None]:
    """An output line's body as the online call judges an answer: (the result, None, None), or
    (None, why it is an error, what the model said)."""
    try:
        return call.answer(body), None, None
    except CallError as exc:
        return None, str(exc), exc.raw
