"""The worker's event loop: uvloop when importable, asyncio's loop otherwise or when switched off."""
from __future__ import annotations

import asyncio
import sys

import pytest

from dslc.runtime.core import worker_loop as W


def _kind(factory) -> str:
    loop = factory()
    try:
        return type(loop).__module__.split(".")[0]
    finally:
        loop.close()


@pytest.mark.skipif(sys.platform == "win32", reason="uvloop is a dependency on Linux and macOS only")
def test_uvloop_is_the_workers_loop_when_installed(monkeypatch) -> None:
    monkeypatch.delenv(W.EVENT_LOOP_ENV, raising=False)
    assert _kind(W.loop_factory()) == "uvloop"


def test_asyncio_loop_when_uvloop_cannot_be_imported(monkeypatch) -> None:
    monkeypatch.delenv(W.EVENT_LOOP_ENV, raising=False)
    monkeypatch.setitem(sys.modules, "uvloop", None)     # `import uvloop` raises ImportError
    factory = W.loop_factory()
    assert factory is asyncio.new_event_loop
    assert _kind(factory) == "asyncio"


def test_environment_switches_uvloop_off(monkeypatch) -> None:
    monkeypatch.setenv(W.EVENT_LOOP_ENV, "asyncio")
    assert W.loop_factory() is asyncio.new_event_loop


def test_the_running_worker_loop_runs_calls() -> None:
    loop = W.worker_loop()
    assert asyncio.run_coroutine_threadsafe(asyncio.sleep(0, result=42), loop).result(timeout=5) == 42
