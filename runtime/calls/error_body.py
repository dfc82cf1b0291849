"""What an error answer's body says, fit for an error message: secrets masked first, in every
encoding, over the whole body (a cut made before masking could leave part of a secret that no
longer matches), then shortened.
"""
from __future__ import annotations

import aiohttp

from dslc.runtime.secrets import Secrets, scrub

#: How much of an error body is read (all of a gateway's usual error object).
READ_BYTES = 64 * 1024
#: How long the text shown is at most (characters), the body's start.
SHOWN_CHARS = 200


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
    """The body, secrets masked, at most SHOWN_CHARS long."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    text = scrub(text, secrets).strip()          # before anything is cut
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS - 1] + "\u2026"
