"""Waiting in a test for something another thread or process does (imported by name: tests/ is on
sys.path through tests/conftest.py).

A fixed short sleep before an assertion races on a busy 2-core machine (the thread it waits for
may not have run yet); a deadline costs nothing when the condition comes true at once and only
bounds a test that fails.
"""
from __future__ import annotations

import time
from collections.abc import Callable


def until(condition: Callable[[], object], what: str | None = None, *,
          seconds: float = 30.0, step: float = 0.005) -> bool:
    """Poll `condition()` every `step` seconds until it holds or `seconds` pass.

    Without `what`, return whether it held, so a test reads `assert until(lambda: ...)`. With
    `what` (what never happened), fail with it instead, so the failure says what was waited for.
    """
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() >= deadline:
            held = bool(condition())
            if not held and what is not None:
                raise AssertionError(f"{what} (waited {seconds:g} s)")
            return held
        time.sleep(step)
    return True
