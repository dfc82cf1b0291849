"""User functions for the async operator tests, scripted by the row: why each element behaves as it does.

A row carries `id`, `delay_ms` and `outcome`; `outcome` may be a comma list, one item per
attempt (`"error,error,ok"`): ok | list | miss | empty | error | hang. State is module-level so
tests can check concurrency, attempts and cancellations.
"""
from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from typing import Any

lock = threading.Lock()
state: dict[str, Any] = {}


def reset() -> None:
    """Forget all recorded state."""
    with lock:
        state.clear()
        state.update(running=0, max_running=0, attempts=Counter(), cancelled=0, started=[],
                     opened=0, closed=0, timeouts=[], threads=set(), tasks=set())


reset()


def _enter() -> None:
    with lock:
        state["running"] += 1
        state["max_running"] = max(state["max_running"], state["running"])
        state["threads"].add(threading.get_ident())


def _leave() -> None:
    with lock:
        state["running"] -= 1


def _answer(row: dict[str, Any], attempt: int) -> Any:
    outcomes = str(row.get("outcome", "ok")).split(",")
    outcome = outcomes[min(attempt, len(outcomes) - 1)]
    if outcome == "ok":
        return {"value": f"v{row['id']}", "extra": "ignored"}
    if outcome == "list":
        return [{"value": f"a{row['id']}"}, {"value": f"b{row['id']}"}]
    if outcome == "miss":
        return None
    if outcome == "empty":
        return []
    if outcome == "partial":
        return {}
    if outcome == "bad":
        return 42
    raise ValueError(f"scripted error for {row['id']}")


async def scripted(row: dict[str, Any]) -> Any:
    """Async function: sleep delay_ms, then answer per the row's outcome for this attempt (at
    once, without awaiting anything, when delay_ms is 0: the operator's path for calls that
    answer at once is then exercised as well as its path for calls that wait)."""
    with lock:
        attempt = state["attempts"][row["id"]]
        state["attempts"][row["id"]] += 1
        state["started"].append((row["id"], time.monotonic()))
    _enter()
    try:
        outcomes = str(row.get("outcome", "ok")).split(",")
        if outcomes[min(attempt, len(outcomes) - 1)] == "hang":
            await asyncio.sleep(3600)
        delay_ms = float(row.get("delay_ms", 0))
        if delay_ms:
            await asyncio.sleep(delay_ms / 1000.0)
        return _answer(row, attempt)
    except asyncio.CancelledError:
        with lock:
            state["cancelled"] += 1
        raise
    finally:
        _leave()


async def at_once_or_later(row: dict[str, Any]) -> Any:
    """Async function that answers without awaiting anything when delay_ms is 0 (a lookup in
    memory), else after sleeping; records the asyncio task each call ran in."""
    with lock:
        state["tasks"].add(id(asyncio.current_task()))
    if row.get("delay_ms"):
        _enter()
        try:
            await asyncio.sleep(float(row["delay_ms"]) / 1000.0)
        finally:
            _leave()
    return _answer(row, 0)


def blocking(row: dict[str, Any]) -> Any:
    """Plain function: runs in the operator's thread pool."""
    with lock:
        attempt = state["attempts"][row["id"]]
        state["attempts"][row["id"]] += 1
    _enter()
    try:
        time.sleep(float(row.get("delay_ms", 0)) / 1000.0)
        return _answer(row, attempt)
    finally:
        _leave()


class Lookup:
    """A class: one instance per worker, open/close lifecycle, and its own timeout answer."""

    def open(self) -> None:
        with lock:
            state["opened"] += 1

    def close(self) -> None:
        with lock:
            state["closed"] += 1

    async def __call__(self, row: dict[str, Any]) -> Any:
        return await scripted(row)

    def timeout(self, row: dict[str, Any]) -> Any:
        with lock:
            state["timeouts"].append(row["id"])
        if row.get("timeout_answer") == "miss":
            return None
        if row.get("timeout_answer") == "error":
            raise RuntimeError("timeout handler failed")
        return {"value": "from-timeout"}


class BadOpen:
    """A class whose open() fails."""

    def open(self) -> None:
        raise RuntimeError("cannot open")

    async def __call__(self, row: dict[str, Any]) -> Any:  # pragma: no cover - never reached
        return None


async def mutating(row: dict[str, Any]) -> Any:
    """Async function that answers at once after scribbling on the row it was given."""
    row["id"] = -1
    row["scribbled"] = True
    return {"value": "v7"}
