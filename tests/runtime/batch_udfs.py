"""Batch functions for the BATCH tests: each records the batches it was given.

A row's `outcome` decides its item: ok | miss | list | bad (a wrong type) | slow (the whole call
sleeps 1 s). A row with `outcome` "boom" fails the whole call (once per id, then ok, when
`fail_once` is set). `short` answers one item too few.
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
    with lock:
        state.clear()
        state.update(batches=[], running=0, max_running=0, failed=Counter(), max_tasks=0)


reset()


def _item(row: dict[str, Any]) -> Any:
    outcome = row.get("outcome", "ok")
    if outcome == "miss":
        return None
    if outcome == "list":
        return [{"value": f"a{row['id']}"}, {"value": f"b{row['id']}"}]
    if outcome == "bad":
        return 42
    return {"value": f"v{row['id']}"}


def _answer(rows: list[dict[str, Any]]) -> list[Any]:
    with lock:
        state["batches"].append([r["id"] for r in rows])
        for r in rows:
            if r.get("outcome") == "boom" and state["failed"][r["id"]] < r.get("fail_times", 99):
                state["failed"][r["id"]] += 1
                raise RuntimeError(f"batch failed because of {r['id']}")
    answer = [_item(r) for r in rows]
    if any(r.get("outcome") == "short" for r in rows):
        answer = answer[:-1]
    return answer


async def score(rows: list[dict[str, Any]]) -> list[Any]:
    """Async batch function: 10 ms per call (1 s if a row is 'slow')."""
    with lock:
        state["running"] += 1
        state["max_running"] = max(state["max_running"], state["running"])
        state["max_tasks"] = max(state["max_tasks"], len(asyncio.all_tasks()))   # on the loop, while it calls
    try:
        await asyncio.sleep(1.0 if any(r.get("outcome") == "slow" for r in rows) else 0.01)
        return _answer(rows)
    finally:
        with lock:
            state["running"] -= 1


def score_sync(rows: list[dict[str, Any]]) -> list[Any]:
    """Plain batch function (runs in the operator's thread pool)."""
    time.sleep(0.01)
    return _answer(rows)
