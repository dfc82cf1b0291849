"""Plain (sync) user functions for the timeout tests: rows marked `stuck` block until released,
as a call into a library that cannot be interrupted would."""
from __future__ import annotations

import threading
from typing import Any

lock = threading.Lock()
release = threading.Event()
state: dict[str, Any] = {}


def reset() -> None:
    release.clear()
    with lock:
        state.clear()
        state.update(called=[], running=0, max_running=0)


reset()


def lookup(row: dict[str, Any]) -> Any:
    with lock:
        state["called"].append(row["id"])
        state["running"] += 1
        state["max_running"] = max(state["max_running"], state["running"])
    try:
        if row.get("stuck"):
            release.wait(30)
        return {"value": f"v{row['id']}"}
    finally:
        with lock:
            state["running"] -= 1
