"""What every kind of ENRICH call is: `EnrichCall`, the one small interface the operator and the
element resolver talk to, and what the kinds share (the error an answer raises, the RETURNS check,
JSON bodies, a batch answer's shape).

A kind (calls/python.py, calls/http.py, ...) turns its WITH clause into `row -> result` and, for
BATCH, `call_batch(rows) -> [result per row]`; calls/factory.py picks the kind for a config and
the wrappers (runtime/wrappers/) compose around it without the kind knowing.
"""
from __future__ import annotations

import base64
import datetime as dt
import decimal
import functools
import json
from collections.abc import Callable, Coroutine, Hashable, Mapping
from typing import Any

from dslc.runtime.config import Enrich
from dslc.runtime.core.operator import Row
from dslc.runtime.schema import results as result_types

from .errors import ANSWER, REQUEST, TRANSIENT, status_class

NOT_KNOWN = object()   # `known_answer`: the row's answer is not known without a call


class CallError(RuntimeError):
    """A call failed in a way the ON ERROR policy decides (bad status, bad body, null key...).
    An HTTP status that is not an answer carries `status`; 429 and 503 say the service is
    overloaded (`overload`) and may say when to come back (`retry_after_s`, from Retry-After).
    `raw` keeps what the service answered when that answer was the problem (a model's content
    that does not parse or fit, a refusal): its dead letter carries it. `error_class` (calls/
    errors.py) says whether RETRY may call again: given by the call (`answer` for an answer that
    does not fit), else read from the status."""

    #: the message with the request as written (`{col}` placeholders), not this element's: what
    #: errors of many elements have in common, counted together in the run's summary
    general: str | None = None

    def __init__(self, message: str, status: int | None = None, retry_after_s: float | None = None,
                 raw: str | None = None, error_class: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after_s = retry_after_s
        self.raw = raw
        self._class = error_class

    @property
    def error_class(self) -> str:
        """The class of this error (calls/errors.py)."""
        if self._class is not None:
            return self._class
        return status_class(self.status) if self.status is not None else TRANSIENT

    @property
    def overload(self) -> bool:
        """True for 429 Too Many Requests and 503 Service Unavailable."""
        return self.status in (429, 503)


class UnsendableRequest(CallError):
    """The element itself cannot make a request (a null placeholder, a dot segment): retrying cannot help."""

    def __init__(self, message: str) -> None:
        super().__init__(message, error_class=REQUEST)


def answer_error(message: str, raw: str | None = None) -> CallError:
    """The error of an answer that does not fit RETURNS (a type, the shape, not JSON, a model's
    refusal): the same request would get it again, so RETRY does not call again."""
    return CallError(message, raw=raw, error_class=ANSWER)


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
            raise answer_error(f"answer {problem}")
        return result
    items = result if isinstance(result, list) else (result,)
    for item in items:
        if isinstance(item, dict):        # the operator reports shapes it cannot use
            problem = check(item)
            if problem:
                raise answer_error(f"answer {problem}")
    return result


def hashable_key(key: tuple) -> Hashable | None:
    """The key itself when it can key the cache; None (not cached) for unhashable values."""
    try:
        hash(key)
    except TypeError:
        return None
    return key


def key_text(call: Any, key: Hashable) -> str | None:
    """The answer store's key of a call's CACHE key (`EnrichCall.request_key`'s text), None when
    it is not JSON: one writer, so that a kind making its key another way (a provider batch's
    lines, calls/model.py) makes the same bytes."""
    try:
        return KEY_JSON.encode([type(call).__name__, key])
    except (TypeError, ValueError):
        return None


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


#: `json.dumps(..., default=_json_value, separators=(",", ":"))` made once: request keys are made
#: per row (a CACHE, a STORE, PROVENANCE's key), and json.dumps with options builds an encoder a call
KEY_JSON = json.JSONEncoder(default=_json_value, separators=(",", ":"))


def to_json(value: Any) -> bytes:
    """The request body of a POST (the same bytes as `json.dumps` with those options)."""
    return KEY_JSON.encode(value).encode()


def check_batch_answer(answer: Any, rows: int) -> list[Any]:
    """A batch call's answer: a list with one item per row, else CallError (the call failed)."""
    if not isinstance(answer, list):
        raise CallError(f"batch answer is a {type(answer).__name__}, expected a list of {rows} items")
    if len(answer) != rows:
        raise CallError(f"batch answer has {len(answer)} items for {rows} rows")
    return answer


class BadItem:
    """A batch answer's item that cannot be its row's result (ANSWER / PATH found the wrong
    shape): `batch_item` makes it that row's error only, not the whole batch's."""

    __slots__ = ("message",)

    def __init__(self, message: str) -> None:
        self.message = message

    def __repr__(self) -> str:
        return f"BadItem({self.message!r})"


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

    metrics: Any = None   # the operator's OperatorMetrics, for what only the call sees (tokens)

    # What a wrapper adds, asked by the operator and the resolver without knowing which wrapper
    # is there (calls/factory.py composes them). A plain kind does none of it.
    #: the call counts its own calls (BATCH: one per batch; STORE: none for a stored answer)
    counts_own_calls = False
    #: elements join a call together (BATCH): each must reach the call in the loop round it came
    gathers = False
    #: the RATE the call spends itself (BATCH: a token per batch), else None (one per element)
    rate_bucket: Any = None
    #: optional, `async (rows) -> None`: look a chunk's rows up at once (STORE)
    prefetch: Any = None
    #: optional, `(row) -> answer | NOT_KNOWN`: an answer known without calling (STORE's lookup)
    known_answer: Any = None
    #: optional, `async (row) -> bool`: whether the row's answer is had without a call (RATE admits
    #: only the elements that will call)
    lookup: Any = None
    #: optional, `(row, settle) -> ticket`: hand a row to a call that gathers (BATCH) without awaiting
    #: it; `settle(value, error)` is called once, on the loop, with its answer or the call's error,
    #: and `leave(ticket, settle)` gives its place up. A wrapper that must see each answer (STORE)
    #: does not pass it on, so the operator then awaits `call(row)` per element
    join: Any = None

    def end_of_input(self) -> None:
        """No more rows will come (on the loop): send what waits for company (BATCH)."""

    def bind_metrics(self, metrics: Any) -> None:
        """The operator's metrics, where a call counts what its answers report (MODEL tokens)."""
        self.metrics = metrics

    def open(self) -> None:
        """Prepare in the chain thread (user `open()`)."""

    def close(self) -> None:
        """Release in the chain thread (user `close()`)."""

    def cache_key(self, row: Row) -> Hashable | None:
        """The key the CACHE uses for this row, or None when the row cannot be cached."""
        raise NotImplementedError

    def request_columns(self) -> tuple[str, ...] | None:
        """The columns `request_key` reads from a row, when it reads no others (None: it may read
        any column, or this kind does not say). With them, Spark can find a row's stored answer
        by a join on these columns (runtime/spark/stored_join.py) instead of asking the store."""
        return None

    def request_key(self, row: Row) -> str | None:
        """What this row's request carries, as text the answer store keys it by across processes
        and runs (None: the row cannot be keyed, its call is never stored). By default the kind
        and the CACHE key; a kind whose request is more than its row's values says so."""
        key = self.cache_key(row)
        return None if key is None else key_text(self, key)

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

    def batch_item(self, answer: Any) -> Any:
        """One row's item of a `call_batch` answer as that row's result (CallError: its error):
        its RETURNS types checked; a `BadItem` (a kind could not make it a result) is the error."""
        if type(answer) is BadItem:
            raise answer_error(answer.message)
        return check_result_types(answer, self.result_check)

    async def aclose_clients(self) -> None:
        """Close the clients this operator created (after a failure); on the loop."""

