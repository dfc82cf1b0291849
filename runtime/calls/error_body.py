"""What an error answer's body says, fit for an error message: secrets masked first, in every
encoding, over the whole body (a cut made before masking could leave part of a secret that no
longer matches), then the error's message picked out of a JSON body, then shortened.

A gateway's error body is often a long JSON object (OpenAI, LiteLLM, FastAPI, RFC 7807 problem
details, GraphQL) whose first few hundred bytes are braces and field names; its `message` is
what a user needs to read.
"""
from __future__ import annotations

import json
from typing import Any

import aiohttp

from dslc.runtime.secrets import Secrets, scrub

#: How much of an error body is read (all of a gateway's usual error object).
READ_BYTES = 64 * 1024
#: How long the text shown is at most (characters), the message or the body's start.
SHOWN_CHARS = 300
#: Where an error body's message is found, in order (a dict at `error` is looked into).
_MESSAGE_FIELDS = ("message", "error_description", "detail", "title", "error", "msg", "description")
_CODE_FIELDS = ("code", "type", "status")


async def read(response: aiohttp.ClientResponse) -> bytes:
    """The start of an error answer's body, at most READ_BYTES."""
    body = b""
    while len(body) < READ_BYTES:
        more = await response.content.read(READ_BYTES - len(body))
        if not more:
            break
        body += more
    return body


def shown(body: bytes | str, secrets: Secrets | None = None) -> str:
    """The body's error message (else the body), secrets masked, at most SHOWN_CHARS long."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    text = scrub(text, secrets)            # before anything is cut
    message = message_of(text)
    if message is not None:
        text = scrub(message, secrets)      # JSON escapes undone: the value may read plainly now
    text = text.strip()
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS - 1] + "\u2026"


def message_of(text: str) -> str | None:
    """The message of a JSON error body (with its code or type in brackets), or None."""
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return _message(value, depth=0)


def _message(value: Any, depth: int) -> str | None:
    if isinstance(value, list) and value and depth < 3:      # GraphQL `errors`, FastAPI `detail`
        found = [m for m in (_message(item, depth + 1) for item in value[:3]) if m]
        return "; ".join(found) or None
    if isinstance(value, str) and depth > 0:
        return value or None
    if not isinstance(value, dict) or depth >= 3:
        return None
    for field in _MESSAGE_FIELDS + ("errors",):
        inner = value.get(field)
        if isinstance(inner, str) and inner.strip():
            code = next((value[c] for c in _CODE_FIELDS if isinstance(value.get(c), str) and value[c]), None)
            return f"{inner.strip()} [{code}]" if code and code != inner else inner.strip()
        if isinstance(inner, (dict, list)):
            found = _message(inner, depth + 1)
            if found:
                return found
    return None
