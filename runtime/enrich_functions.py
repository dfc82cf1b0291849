"""ENRICH call adapters: turn `WITH PYTHON` / `WITH HTTP GET|POST` into one async `row -> result`,
and, for BATCH, `call_batch(rows) -> [result per row]` (see batching.py).

Clients are kept per worker process and operator (an aiohttp session, a thread pool), reused by
every task the worker runs, and closed only when an operator fails (they may be broken then) or
the process exits. All coroutines here run on the worker's event loop.
"""
from __future__ import annotations

import asyncio
import atexit
import base64
import datetime as dt
import decimal
import email.utils
import functools
import inspect
import json
import os
import re
import threading
import urllib.parse
from collections.abc import Callable, Coroutine, Hashable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import aiohttp
import yarl

from . import result_types, user_code
from .config import Enrich, HttpCall, PythonCall
from .operator import Row
from .url_template import PLACEHOLDER, placeholders  # noqa: F401  (placeholders re-exported)

MAX_BODY_BYTES = 10 * 1024 * 1024


class CallError(RuntimeError):
    """A call failed in a way the ON ERROR policy decides (bad status, bad body, null key...).
    An HTTP status that is not an answer carries `status`; 429 and 503 say the service is
    overloaded (`overload`) and may say when to come back (`retry_after_s`, from Retry-After)."""

    def __init__(self, message: str, status: int | None = None, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after_s = retry_after_s

    @property
    def overload(self) -> bool:
        """True for 429 Too Many Requests and 503 Service Unavailable."""
        return self.status in (429, 503)


def retry_after_s(value: str | None) -> float | None:
    """Seconds a Retry-After header asks to wait: delta-seconds or an HTTP date (None if absent or bad)."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone.utc)
    return max(0.0, (when - dt.datetime.now(dt.timezone.utc)).total_seconds())


class UnsendableRequest(CallError):
    """The element itself cannot make a request (a null placeholder, a dot segment): retrying cannot help."""


def fill_url(template: str, row: Row) -> str:
    """The URL with every placeholder replaced by its fully percent-encoded row value.

    Encoding keeps a value inside its piece of the URL ('/', '?', '#', '@', ':' are escaped), but
    a whole path segment of '.' or '..' needs no escape and would move the request elsewhere once
    a server or proxy normalises the path ('/users/../admin' is '/admin'); an empty segment is
    merged away by many. Such a value is an error of the element (ON ERROR decides), never a call.
    """
    literals, columns = _template(template)
    if not columns:
        return template
    parts = [literals[0]]
    suspect = False         # only values '', '.' or '..' can make such a segment
    for column, literal in zip(columns, literals[1:]):
        if column not in row:
            raise UnsendableRequest(f"placeholder column {column} is not in the row")
        v = row[column]
        if v is None:
            raise UnsendableRequest(f"placeholder column {column} is null")
        encoded = urllib.parse.quote(str(v), safe="")
        suspect = suspect or encoded in _DOT_VALUES
        parts.append(encoded)
        parts.append(literal)
    url = "".join(parts)
    if suspect:
        _check_path_segments(template, url)
    return url


_DOT_VALUES = frozenset(("", ".", ".."))


@functools.lru_cache(maxsize=256)
def _template(template: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """A URL template split once into its literal pieces and the placeholder columns between them."""
    pieces = PLACEHOLDER.split(template)
    return tuple(pieces[0::2]), tuple(pieces[1::2])


def _path_segments(url: str) -> list[str]:
    rest = url.split("://", 1)[-1]
    rest = re.split(r"[?#]", rest, maxsplit=1)[0]
    return rest.split("/")[1:]          # [0] is the authority


def _check_path_segments(template: str, url: str) -> None:
    """Values cannot contain '/', '?' or '#' once encoded, so the template's segments and the
    URL's correspond one to one; refuse a segment that a placeholder turned into '.', '..' or ''."""
    for before, after in zip(_path_segments(template), _path_segments(url)):
        if before == after or not PLACEHOLDER.search(before):
            continue
        if after in (".", ".."):
            raise UnsendableRequest(f"placeholder value makes the path segment {after!r}, a dot segment "
                            f"that would change the path")
        if after == "":
            raise UnsendableRequest("placeholder value makes an empty path segment")


def check_result_types(result: Any, check: Callable[[Mapping[str, Any]], str | None] | None) -> Any:
    """Raise CallError when an answer field does not fit its RETURNS type (a JSON string for a
    DOUBLE, an object for an INT...), so the element's ON ERROR policy decides instead of the
    whole task failing when the chain builds its Arrow batch. `check` is the call's
    `result_check` (None: no column has a checked type). Returns `result` unchanged."""
    if check is None:
        return result
    if type(result) is dict:              # the usual answer: one object
        problem = check(result)
        if problem:
            raise CallError(f"answer {problem}")
        return result
    items = result if isinstance(result, list) else (result,)
    for item in items:
        if isinstance(item, dict):        # the operator reports shapes it cannot use
            problem = check(item)
            if problem:
                raise CallError(f"answer {problem}")
    return result


def _hashable(key: tuple) -> Hashable | None:
    """The key itself when it can key the cache; None (not cached) for unhashable values."""
    try:
        hash(key)
    except TypeError:
        return None
    return key


def _json_value(value: Any) -> Any:
    """JSON for the Spark values json cannot write: timestamps and dates as ISO 8601, decimals
    as numbers, binary as base64."""
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode("ascii")
    raise TypeError(f"cannot send a {type(value).__name__} as JSON")


def to_json(value: Any) -> bytes:
    """The request body of a POST."""
    return json.dumps(value, default=_json_value, separators=(",", ":")).encode()


def check_batch_answer(answer: Any, rows: int) -> list[Any]:
    """A batch call's answer: a list with one item per row, else CallError (the call failed)."""
    if not isinstance(answer, list):
        raise CallError(f"batch answer is a {type(answer).__name__}, expected a list of {rows} items")
    if len(answer) != rows:
        raise CallError(f"batch answer has {len(answer)} items for {rows} rows")
    return answer


class EnrichCall:
    """Common shape of a call adapter."""

    timeout_handler: Any = None  # a user `timeout(row)` method, if any
    config: Enrich
    # whether calls often answer without waiting (from memory): then the operator steps the
    # first attempt itself (`ElementResolver.start`); a call that always waits gains nothing by it
    answers_at_once = False

    @functools.cached_property
    def result_check(self) -> Callable[[Mapping[str, Any]], str | None] | None:
        """The RETURNS type check of this call's answers (`result_types.checker`), made once."""
        return result_types.checker(self.config.returns)

    def open(self) -> None:
        """Prepare in the chain thread (user `open()`)."""

    def close(self) -> None:
        """Release in the chain thread (user `close()`)."""

    def cache_key(self, row: Row) -> Hashable | None:
        """The key the CACHE uses for this row, or None when the row cannot be cached."""
        raise NotImplementedError

    async def __call__(self, row: Row) -> Any:
        raise NotImplementedError

    def start(self, row: Row) -> Coroutine[Any, Any, Any]:
        """The call for one row, not yet run: a coroutine whose value `finish` makes the answer.
        By default the whole call; an adapter that can hand out a cheaper coroutine (an async
        user function's own) does, and keeps for `finish` what comes after it."""
        return self(row)

    def finish(self, value: Any) -> Any:
        """The answer of a call that `start` began, from the value its coroutine returned."""
        return value

    async def call_batch(self, rows: list[Row]) -> list[Any]:
        """One call for many rows (BATCH): an answer per row, unchecked."""
        raise NotImplementedError

    async def aclose_clients(self) -> None:
        """Close the clients this operator created (after a failure); on the loop."""


# --------------------------------------------------------------------------- python


_pools: dict[tuple[int, str], ThreadPoolExecutor] = {}
_pools_lock = threading.Lock()


def _pool(name: str, size: int) -> ThreadPoolExecutor:
    key = (os.getpid(), name)
    with _pools_lock:
        pool = _pools.get(key)
        if pool is None or pool._max_workers < size:  # noqa: SLF001 - stdlib attribute
            pool = _pools[key] = ThreadPoolExecutor(max_workers=size, thread_name_prefix=f"dslc-enrich-{name}")
        return pool


def sync_threads(capacity: int) -> int:
    """Threads for a plain-def ENRICH function: CAPACITY for the calls in flight, and as many
    again for calls that outlived their TIMEOUT. A thread cannot be interrupted: such a call runs
    on, its answer discarded, but the operator has freed its slot, so the next element needs a
    thread of its own. Beyond CAPACITY stuck calls, new calls wait for a thread (bounded threads
    rather than one leaked per hung call)."""
    return 2 * capacity


def _drop_pool(name: str) -> None:
    with _pools_lock:
        pool = _pools.pop((os.getpid(), name), None)
    if pool is not None:
        pool.shutdown(wait=False, cancel_futures=True)


class PythonEnrichCall(EnrichCall):
    """A user function or class instance; async ones are awaited, plain ones use a thread pool."""

    def __init__(self, config: Enrich) -> None:
        assert isinstance(config.call, PythonCall)
        self.config = config
        self.target: Any = None
        self._fn: Any = None
        self._is_async = False
        self._opened = False

    def open(self) -> None:
        self.target = user_code.resolve(self.config.call)
        fn = self.target if inspect.isfunction(self.target) or inspect.ismethod(self.target) else None
        if fn is None:
            fn = getattr(self.target, "__call__", None)  # noqa: B004 - instance of a class
            if fn is None:
                raise user_code.UserCodeError(f"'{self.config.call.ref}' is not callable")
            hook = getattr(self.target, "timeout", None)
            self.timeout_handler = hook if callable(hook) else None
        self._fn = fn
        self._is_async = self.answers_at_once = inspect.iscoroutinefunction(fn)
        user_code.lifecycle(self.target, "open")
        self._opened = True

    def close(self) -> None:
        if self._opened:
            self._opened = False
            user_code.lifecycle(self.target, "close")

    def cache_key(self, row: Row) -> Hashable | None:
        return _hashable(tuple(row.items()))

    def start(self, row: Row) -> Coroutine[Any, Any, Any]:
        """An async function's own coroutine, on a copy of the row (one frame, not two)."""
        return self._fn(dict(row)) if self._is_async else self(row)

    def finish(self, value: Any) -> Any:
        return check_result_types(value, self.result_check) if self._is_async else value

    async def __call__(self, row: Row) -> Any:
        arg = dict(row)  # the user may mutate it; the operator keeps the original
        if self._is_async:
            return check_result_types(await self._fn(arg), self.result_check)
        loop = asyncio.get_running_loop()
        result = await loop.run_in_executor(_pool(self.config.name, sync_threads(self.config.capacity)),
                                            self._fn, arg)
        if inspect.isawaitable(result):
            result = await result
        return check_result_types(result, self.result_check)

    async def call_batch(self, rows: list[Row]) -> list[Any]:
        """BATCH: the function takes the list of rows and returns a list of as many answers."""
        arg = [dict(row) for row in rows]
        if self._is_async:
            answer = await self._fn(arg)
        else:
            loop = asyncio.get_running_loop()
            answer = await loop.run_in_executor(_pool(self.config.name, sync_threads(self.config.capacity)),
                                                self._fn, arg)
            if inspect.isawaitable(answer):
                answer = await answer
        return check_batch_answer(answer, len(rows))

    async def aclose_clients(self) -> None:
        _drop_pool(self.config.name)


# --------------------------------------------------------------------------- http


_sessions: dict[tuple[int, int, str, int], aiohttp.ClientSession] = {}


def _session(name: str, limit: int) -> aiohttp.ClientSession:
    """The worker's session for one operator and CAPACITY on the running loop (created on first
    use): its connector keeps up to CAPACITY keep-alive connections, so a call in a full window
    reuses one instead of connecting. Another CAPACITY (a later job in the same worker) gets its
    own session; none is dropped unclosed while a task may still use it."""
    loop = asyncio.get_running_loop()
    key = (os.getpid(), id(loop), name, limit)
    session = _sessions.get(key)
    if session is None or session.closed:
        connector = aiohttp.TCPConnector(limit=limit, limit_per_host=limit, ttl_dns_cache=300)
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


async def _close_session(name: str) -> None:
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


class HttpEnrichCall(EnrichCall):
    """HTTP GET or POST; a JSON object/array body is the result, 404 and JSON null a miss,
    anything else an error. POST sends a JSON object of the BODY columns (BATCH: an array)."""

    def __init__(self, config: Enrich) -> None:
        assert isinstance(config.call, HttpCall)
        self.config = config
        self.url = config.call.url
        self.post = config.call.method == "POST"
        self.body = config.call.body
        self.columns = placeholders(self.url)
        self._session: aiohttp.ClientSession | None = None   # the worker's, looked up once

    def cache_key(self, row: Row) -> Hashable | None:
        if self.post:   # what the request carries: placeholders and body
            return _hashable((tuple(row.get(c) for c in self.columns), tuple(self._body(row).items())))
        return _hashable(tuple(row.get(c) for c in self.columns))

    def _body(self, row: Row) -> dict[str, Any]:
        return dict(row) if self.body is None else {c: row.get(c) for c in self.body}

    def _client(self) -> aiohttp.ClientSession:
        session = self._session
        if session is None or session.closed:
            session = self._session = _session(self.config.name, self.config.capacity)
        return session

    async def __call__(self, row: Row) -> Any:
        url = fill_url(self.url, row)
        data = to_json(self._body(row)) if self.post else None
        status, body = await self._request(url, data)
        if status == 404:
            return None
        value = _parse(body)
        if value is None:
            return None         # JSON null: no result, a miss (as None from a Python function)
        if not isinstance(value, (dict, list)):
            raise CallError(f"response body is JSON {type(value).__name__}, expected an object or array")
        return check_result_types(value, self.result_check)

    async def call_batch(self, rows: list[Row]) -> list[Any]:
        """BATCH: POST a JSON array of the rows' bodies; the answer is an array of as many items."""
        status, body = await self._request(self.url, to_json([self._body(row) for row in rows]))
        if status == 404:
            raise CallError(f"HTTP 404 from {_redact(self.url)}: a batch endpoint must answer every batch")
        return check_batch_answer(_parse(body), len(rows))

    async def _request(self, url: str, data: bytes | None) -> tuple[int, bytes]:
        """Status and body of one request (a 2xx or 404); other statuses raise CallError."""
        session = self._client()
        # encoded=True: send exactly the bytes built above, no re-quoting or normalisation
        target = yarl.URL(url, encoded=True)
        request = (session.post(target, data=data, headers=_JSON_HEADERS, allow_redirects=True) if data is not None
                   else session.get(target, allow_redirects=True))
        async with request as response:
            if response.status == 404:
                await response.release()
                return 404, b""
            if not 200 <= response.status < 300:
                text = (await response.content.read(200)).decode("utf-8", "replace")
                raise CallError(f"HTTP {response.status} from {_redact(url)}: {text}", response.status,
                                      retry_after_s(response.headers.get("Retry-After")))
            length = response.content_length
            if length is not None:      # the usual case: one read of a body of known size
                if length > MAX_BODY_BYTES:
                    raise CallError(f"response body of {length} bytes exceeds {MAX_BODY_BYTES}")
                return response.status, await response.read()
            body = await response.content.read(MAX_BODY_BYTES + 1)
            while len(body) <= MAX_BODY_BYTES:
                more = await response.content.read(MAX_BODY_BYTES + 1 - len(body))
                if not more:
                    break
                body += more
            if len(body) > MAX_BODY_BYTES:
                raise CallError(f"response body exceeds {MAX_BODY_BYTES} bytes")
            return response.status, body

    async def aclose_clients(self) -> None:
        self._session = None
        await _close_session(self.config.name)


_JSON_HEADERS = {"Content-Type": "application/json"}


def _parse(body: bytes) -> Any:
    try:
        return json.loads(body)
    except ValueError as exc:
        raise CallError(f"response body is not JSON: {exc}") from None


def _redact(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path, "", ""))


def build_call(config: Enrich) -> EnrichCall:
    """The adapter for an ENRICH's WITH clause (wrapped when the job records or replays calls)."""
    from .recording import wrap   # record/replay: see runtime/recording.py

    if isinstance(config.call, HttpCall):
        return wrap(HttpEnrichCall(config), config)
    if isinstance(config.call, PythonCall):
        return wrap(PythonEnrichCall(config), config)
    raise TypeError(f"unsupported ENRICH call {config.call!r}")


def _close_at_exit() -> None:
    """Close pools at process exit (sessions are closed by the worker loop's own hook)."""
    with _pools_lock:
        pools = list(_pools.values())
        _pools.clear()
    for pool in pools:
        pool.shutdown(wait=False, cancel_futures=True)


atexit.register(_close_at_exit)
