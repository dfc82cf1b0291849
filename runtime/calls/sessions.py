"""The aiohttp sessions of the calls that speak HTTP (HTTP, MODEL, EMBEDDING), and reading a
bounded answer body: one place for both, so every such kind keeps its connections (and trusts
HTTPS answers) the same way.

Sessions are kept per worker process and operator, reused by every task the worker runs, and
closed only when an operator fails (they may be broken then) or the process exits. All coroutines
here run on the worker's event loop.
"""
from __future__ import annotations

import asyncio
import os
import ssl

import aiohttp

from dslc.runtime.config import EmbeddingCall, HttpCall, ModelCall

from .base import answer_error

MAX_BODY_BYTES = 10 * 1024 * 1024


_sessions: dict[tuple[int, int, str, int, int], aiohttp.ClientSession] = {}


def tls_context(call: HttpCall | ModelCall | EmbeddingCall) -> ssl.SSLContext | bool:
    """How HTTPS answers are trusted: the system's CA store (True: aiohttp's default context),
    the CA of OPTIONS (ca_file = ...) that the driver read (`ca_data`; on the driver itself, the
    file), or nothing (verify = 'false')."""
    if not call.verify:
        return False
    if call.ca_data:
        return ssl.create_default_context(cadata=call.ca_data)
    if call.ca_file:
        return ssl.create_default_context(cafile=call.ca_file)
    return True


def session_for(name: str, limit: int, call: HttpCall | ModelCall | EmbeddingCall | None = None) -> aiohttp.ClientSession:
    """The worker's session for one operator and CAPACITY on the running loop (created on first
    use): its connector keeps up to CAPACITY keep-alive connections, so a call in a full window
    reuses one instead of connecting. Another CAPACITY (a later job in the same worker) gets its
    own session; none is dropped unclosed while a task may still use it."""
    loop = asyncio.get_running_loop()
    trust = (call.verify, call.ca_data) if call is not None else (True, None)
    key = (os.getpid(), id(loop), name, limit, hash(trust))
    session = _sessions.get(key)
    if session is None or session.closed:
        tls = tls_context(call) if call is not None else True
        connector = aiohttp.TCPConnector(limit=limit, limit_per_host=limit, ttl_dns_cache=300, ssl=tls)
        session = aiohttp.ClientSession(
            connector=connector,
            timeout=aiohttp.ClientTimeout(total=None),  # the operator's TIMEOUT bounds each element
            auto_decompress=True,
            # no cookies: an element's call must not carry what the answer to another row set
            # (and filtering a jar on every request costs CPU for nothing)
            cookie_jar=aiohttp.DummyCookieJar(),
        )
        _sessions[key] = session
    return session


async def close_session(name: str) -> None:
    """Close the sessions of one operator on the running loop (after it failed)."""
    loop = asyncio.get_running_loop()
    for key in [k for k in _sessions if k[:3] == (os.getpid(), id(loop), name)]:
        session = _sessions.pop(key)
        if not session.closed:
            await session.close()


async def close_all_sessions() -> None:
    """Close every session of the running loop (process exit)."""
    loop = asyncio.get_running_loop()
    for key in [k for k in _sessions if k[1] == id(loop)]:
        session = _sessions.pop(key)
        if not session.closed:
            await session.close()


async def read_body(response: aiohttp.ClientResponse) -> bytes:
    """The whole body of an answer, at most MAX_BODY_BYTES (more is an `answer` CallError: not retried)."""
    length = response.content_length
    if length is not None:      # the usual case: one read of a body of known size
        if length > MAX_BODY_BYTES:
            raise answer_error(f"response body of {length} bytes exceeds {MAX_BODY_BYTES}")
        return await response.read()
    body = await response.content.read(MAX_BODY_BYTES + 1)
    while len(body) <= MAX_BODY_BYTES:
        more = await response.content.read(MAX_BODY_BYTES + 1 - len(body))
        if not more:
            break
        body += more
    if len(body) > MAX_BODY_BYTES:
        raise answer_error(f"response body exceeds {MAX_BODY_BYTES} bytes")
    return body
