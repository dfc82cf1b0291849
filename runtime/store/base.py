"""What an answer store is: one small interface every backend implements, and how a location
names its backend.

A store keeps, per operator, answers by request key (a result or a miss, with the time it came),
short leases that let one task call a key while the others wait for its answer, counters (a
BUDGET's spending in one run) and rate slots (one RATE for the whole job). Every method is a
coroutine run on the worker's event loop and takes many keys at once, so a backend makes one
round trip for all the keys a loop step asks about.
"""
from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .ledger import BatchRecord, LineRecord

#: The layout of the store's data this dslc writes; a store of another layout is migrated or refused.
#: 2: an answer may carry what Spark joins it by (wrappers/joinable.py).
SCHEMA_VERSION = 2


class StoreError(RuntimeError):
    """The answer store cannot be used (unreachable, damaged, another version); the message says
    which location and what to do."""


@dataclass(frozen=True, slots=True)
class Stored:
    """One stored answer: the call's value (a result, a list of them, or None for a miss) and
    when it came (seconds since the epoch)."""

    value: Any
    at: float


@dataclass(frozen=True, slots=True)
class Join:
    """What Spark joins a stored answer by: the request's variant, its columns' values (`args`)
    and the RETURNS columns it makes (`output`), both JSON."""

    variant: str
    args: str
    output: str


@dataclass(frozen=True, slots=True)
class OperatorStats:
    """What the store holds for one operator."""

    operator: str
    answers: int
    misses: int
    oldest: float | None
    newest: float | None


class AnswerStore:
    """The interface of a backend (coroutines on the worker loop unless said otherwise)."""

    location: str
    version: int = SCHEMA_VERSION

    async def open(self, check: bool = False) -> None:
        """Connect and check the store's schema version (migrating or refusing it); `check` also
        verifies the data (the driver does it once before any call). Raises StoreError."""
        raise NotImplementedError

    async def intact(self) -> bool:
        """Whether the store still holds what it held when opened (a Redis server restarted
        without its data does not): asked after the store was lost and came back."""
        return True

    async def get_many(self, operator: str, keys: list[str], ttl_s: float | None,
                       unreadable: bool = False) -> dict[str, Stored]:
        """The answers stored for `keys` that are younger than `ttl_s` (None: any age); with
        `unreadable`, one that cannot be read (cut, edited) as Stored(UNREADABLE, its time, or
        -1 when its time cannot be read either), else it is left out."""
        raise NotImplementedError

    async def held(self, operator: str, now: float) -> list[str]:
        """The owners of the leases of `operator` that have not lapsed at `now`."""
        raise NotImplementedError

    async def forget(self, operator: str, stale: list[tuple[str, float]]) -> None:
        """Delete the answer of each (key, at) if it is still the one stored at `at` (-1: still
        unreadable): an answer that no longer fits, so that its key may be leased and called."""
        raise NotImplementedError

    async def put_many(self, operator: str, items: list[tuple[str, Any]], ttl_s: float | None,
                       joins: Mapping[str, Join] | None = None) -> None:
        """Store answers (key, value) as of now, and release the leases on those keys; `joins`
        holds, by key, what Spark can join an answer by (wrappers/joinable.py)."""
        raise NotImplementedError

    async def joinable(self, operator: str, variant: str, ttl_s: float | None) -> list[tuple[str, str]]:
        """(args, output) of the answers younger than `ttl_s` stored with `variant` (the driver,
        before a run: runtime/spark/stored_join.py); a backend that keeps none gives []."""
        return []

    async def joinable_noted(self, operator: str, variant: str,
                             ttl_s: float | None) -> list[tuple[str, str, str, str | None, float]] | None:
        """`joinable`'s answers with what a PROVENANCE struct needs of each: (args, output, key,
        note, at), the note as the JSON its answer was stored with (None: it has none); None when
        this backend cannot give them (its rows are then looked up one by one)."""
        return None

    async def lease(self, operator: str, keys: list[str], owner: str, seconds: float,
                    ttl_s: float | None = None) -> set[str]:
        """Take for `seconds` the lease of each key that is free (or lapsed) and has no answer
        younger than `ttl_s` (checked in the same atomic step: an answer written since the
        caller looked is not paid again); the keys `owner` now holds."""
        raise NotImplementedError

    async def renew(self, operator: str, keys: list[str], owner: str, seconds: float) -> None:
        """Extend the leases `owner` holds on `keys` by `seconds` from now."""
        raise NotImplementedError

    async def release(self, operator: str, keys: list[str], owner: str) -> None:
        """Give up the leases `owner` holds on `keys` (its call failed: another may try)."""
        raise NotImplementedError

    async def spend(self, counter: str, amount: int) -> int:
        """Add `amount` to a counter, atomically for every task; the total after it."""
        raise NotImplementedError

    async def reserve(self, name: str, per_second: float, count: int = 1) -> float:
        """Take `count` consecutive slots of a rate of `per_second` shared by the whole job; the
        seconds until the first one (the others follow every 1/per_second)."""
        raise NotImplementedError

    async def stats(self, operator: str | None = None) -> list[OperatorStats]:
        """What the store holds, per operator (all of them when None)."""
        raise NotImplementedError

    async def clear(self, operator: str | None = None) -> int:
        """Forget the answers of one operator (or all, with leases, counters and rates); how many went."""
        raise NotImplementedError

    # TIER BATCH's provider batches and their lines (store/ledger.py); the driver's, not the tasks'

    async def batches(self, operator: str | None = None) -> list[BatchRecord]:
        """The batch records of one operator (of all when None), oldest first."""
        raise NotImplementedError

    async def put_batch(self, record: BatchRecord) -> None:
        """Write (or rewrite) a batch record."""
        raise NotImplementedError

    async def drop_batch(self, operator: str, batch: str) -> None:
        """Forget a batch record."""
        raise NotImplementedError

    async def put_lines(self, operator: str, lines: list[LineRecord]) -> None:
        """Write (or rewrite) lines, by custom_id."""
        raise NotImplementedError

    async def lines(self, operator: str, custom_ids: list[str]) -> dict[str, LineRecord]:
        """The lines kept for these custom_ids."""
        raise NotImplementedError

    async def lines_of(self, operator: str, batch: str) -> dict[str, LineRecord]:
        """The lines of one batch record, by custom_id."""
        raise NotImplementedError

    async def drop_lines(self, operator: str, custom_ids: list[str]) -> None:
        """Forget lines (their answers are stored)."""
        raise NotImplementedError

    async def close(self) -> None:
        """Release the connection."""


def is_redis(location: str) -> bool:
    """True for a `redis://` (or `rediss://`) location."""
    return location.startswith(("redis://", "rediss://"))


# ------------------------------------------------------------------ values


def _tagged(value: Any) -> Any:
    """JSON for the values json cannot write, tagged so `decode` gives them back."""
    if isinstance(value, dt.datetime):
        return {"$dslc": "datetime", "v": value.isoformat()}
    if isinstance(value, dt.date):
        return {"$dslc": "date", "v": value.isoformat()}
    if isinstance(value, decimal.Decimal):
        return {"$dslc": "decimal", "v": str(value)}
    if isinstance(value, (bytes, bytearray)):
        return {"$dslc": "bytes", "v": base64.b64encode(value).decode("ascii")}
    if isinstance(value, tuple):
        return list(value)
    raise TypeError(f"cannot store a {type(value).__name__} in the answer store")


_UNTAG = {
    "datetime": dt.datetime.fromisoformat,
    "date": dt.date.fromisoformat,
    "decimal": decimal.Decimal,
    "bytes": base64.b64decode,
}


def _untag(obj: dict) -> Any:
    kind = obj.get("$dslc")
    if kind in _UNTAG and len(obj) == 2:
        return _UNTAG[kind](obj["v"])
    return obj


def encode(value: Any) -> str:
    """An answer as stored text."""
    return json.dumps(value, default=_tagged, separators=(",", ":"))


def decode(text: str | bytes) -> Any:
    """An answer from stored text."""
    return json.loads(text, object_hook=_untag)


#: The value of a stored answer that cannot be read (`get_many(..., unreadable=True)`).
UNREADABLE = object()


def readable(text: str | bytes, at: float, unreadable: bool) -> Stored | None:
    """The stored answer of `text`; one that cannot be read (cut or edited) is None, or
    Stored(UNREADABLE, at) when asked for: its key is called again and the answer written
    anew, instead of the job stopping."""
    try:
        return Stored(decode(text), at)
    except (ValueError, TypeError, KeyError):
        return Stored(UNREADABLE, at) if unreadable else None
