"""Micro-benchmark (no Spark): the ENRICH operator alone against a hand-written asyncio loop.

Not a compiled pipeline: this drives `dslc.runtime.core.async_operator.EnrichOperator` directly, in
this process, to show the runtime's own cost per element apart from Spark. Both sides make the
same calls at the same concurrency: an async Python function that answers at once (pure
overhead), and GET /instant/{id} on the bench service (overhead plus the aiohttp client).
The hand-written side is `asyncio.gather` over all rows behind a semaphore, on one thread.
"""
from __future__ import annotations

import asyncio
import time
from typing import Any

import aiohttp

from dslc.runtime.config import Column, Enrich, HttpCall, Mode, PythonCall
from dslc.runtime.core.async_operator import EnrichOperator
from dslc.runtime.core.loop_chain import LoopDriver

from .common import CountingOutput
from .report import Table, ratio

CAPACITY = 100


async def answer(row: dict[str, Any]) -> dict[str, Any]:
    """The in-process call: answers at once."""
    return {"value": row["id"]}


def _operator_rate(call: Any, mode: Mode, rows: int) -> float:
    """Rows/s through one EnrichOperator's whole lifecycle."""
    config = Enrich(name=f"micro_{mode.value.lower()}", line=1, call=call, returns=(Column("value", "STRING"),),
                    key_columns=("id",), mode=mode, capacity=CAPACITY, timeout_s=30.0)
    operator, out = EnrichOperator(config), CountingOutput()
    driver = LoopDriver([operator])   # as in a chain: the rows go in on the worker loop
    operator.open(out)
    started = time.perf_counter()
    try:
        driver.call(driver.chunk({"id": f"k{i}"} for i in range(rows)))
        driver.call(driver.finish())
        operator.close()
    finally:
        operator.dispose()
    seconds = time.perf_counter() - started
    assert out.rows == rows, (out.rows, rows)
    return rows / seconds


def _gather_rate(url: str | None, rows: int) -> float:
    """Rows/s of asyncio.gather over all rows behind a semaphore of CAPACITY, on one thread."""
    async def main() -> None:
        semaphore = asyncio.Semaphore(CAPACITY)
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=CAPACITY)) as session:
            async def one(i: int) -> Any:
                async with semaphore:
                    if url is None:
                        return await answer({"id": f"k{i}"})
                    async with session.get(url.replace("{id}", f"k{i}")) as response:
                        return await response.json()
            await asyncio.gather(*(one(i) for i in range(rows)))

    started = time.perf_counter()
    asyncio.run(main())
    return rows / (time.perf_counter() - started)


def run(service: Any, rows: int) -> Table:
    """The micro-benchmark table: operator rows/s, hand-written rows/s and their ratio."""
    python_call = PythonCall(f"{__name__}:answer")
    http_call = HttpCall(service.url("instant"))
    table = Table(["micro-benchmark, no Spark", "rows", "EnrichOperator rows/s", "gather + semaphore rows/s",
                   "operator vs hand-written"])
    for label, call, url, n in (("async Python function, answers at once", python_call, None, rows * 10),
                                ("HTTP GET /instant (aiohttp)", http_call, service.url("instant"), rows)):
        _operator_rate(call, Mode.UNORDERED, min(n, 2000))    # warm up: imports, sessions
        gather = _gather_rate(url, n)
        for mode in (Mode.UNORDERED, Mode.ORDERED):
            rate = _operator_rate(call, mode, n)
            table.add(f"{label}, {mode.value}", n, f"{rate:.0f}", f"{gather:.0f}", ratio(rate, gather))
    return table
