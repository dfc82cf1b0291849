"""The machine's ceiling for section 8: a bare aiohttp client, outside Spark, against the bench service.

No Spark, no Arrow, no files: `processes` processes (spawned and warmed up before the clock
starts) each GET `/{distribution}/k<i>` for their share of the ids with `concurrency` requests
in flight (a semaphore over `asyncio.gather`, one session with a connector of that limit), on
uvloop when `uvloop` is true, else on asyncio's loop. The rate is rows / (last finish - first
start), on the system-wide monotonic clock.
"""
from __future__ import annotations

import asyncio
import multiprocessing as mp
import time
from typing import Any


async def _fetch(url: str, ids: range, concurrency: int) -> int:
    import aiohttp

    semaphore = asyncio.Semaphore(concurrency)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as session:
        async def one(i: int) -> Any:
            async with semaphore:
                async with session.get(url.replace("{id}", f"k{i}")) as response:
                    return (await response.json())["value"]

        answers = await asyncio.gather(*(one(i) for i in ids))
    return len(answers)


def _run(url: str, ids: range, concurrency: int, uvloop: bool) -> int:
    if uvloop:
        import uvloop as uv

        return uv.run(_fetch(url, ids, concurrency))
    return asyncio.run(_fetch(url, ids, concurrency))


def _child(pipe: Any, url: str, ids: range, concurrency: int, uvloop: bool) -> None:
    _run(url, range(0, 20), concurrency, uvloop)       # warm up: imports, first connections
    pipe.send("ready")
    pipe.recv()                                         # go
    started = time.monotonic()
    done = _run(url, ids, concurrency, uvloop)
    pipe.send((started, time.monotonic(), done))


def rate(url: str, rows: int, processes: int, concurrency: int, uvloop: bool = True) -> float:
    """Rows per second of `processes` bare clients with `concurrency` requests in flight each."""
    ctx = mp.get_context("spawn")
    share = -(-rows // processes)
    children = []
    for p in range(processes):
        parent, child = ctx.Pipe()
        ids = range(p * share, min(rows, (p + 1) * share))
        process = ctx.Process(target=_child, args=(child, url, ids, concurrency, uvloop), daemon=True)
        process.start()
        children.append((process, parent))
    try:
        for _, pipe in children:
            if not pipe.poll(120) or pipe.recv() != "ready":
                raise RuntimeError("a bare client did not start")
        for _, pipe in children:
            pipe.send("go")
        results = [pipe.recv() for _, pipe in children]
    finally:
        for process, _ in children:
            process.join(30)
            if process.is_alive():
                process.terminate()
    if sum(r[2] for r in results) != rows:
        raise RuntimeError(f"bare clients answered {sum(r[2] for r in results)} of {rows} rows")
    return rows / (max(r[1] for r in results) - min(r[0] for r in results))
