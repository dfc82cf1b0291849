"""The OpenAI-compatible test service (dslc.testing.openai_service) in a process of its own, for
timings. Served from a thread of the bench's process, its own work (answering a batch's lines,
writing its output files: about as much CPU as dslc's side of a batch) takes the GIL from the
job's driver and would be counted as dslc's overhead; in its own process it is the provider's.
"""
from __future__ import annotations

import asyncio
import multiprocessing as mp
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


def _serve(pipe: Any, batch_delay_s: float) -> None:
    from aiohttp import web

    from dslc.testing.openai_service import OpenAIService

    from .pay_half import LABELS

    async def main() -> None:
        runner = web.AppRunner(OpenAIService(labeller=LABELS, batch_delay_s=batch_delay_s).app(), access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        pipe.send(site._server.sockets[0].getsockname()[1])  # noqa: SLF001 - port 0 -> actual port
        await asyncio.Event().wait()

    asyncio.run(main())


@contextmanager
def served_in_process(batch_delay_s: float) -> Iterator[str]:
    """The service's base URL (ending in /v1) while the block runs; the bench's ticket labeller."""
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    process = ctx.Process(target=_serve, args=(child, batch_delay_s), name="bench-openai-service", daemon=True)
    process.start()
    try:
        if not parent.poll(60):
            raise RuntimeError("the OpenAI-compatible bench service did not start")
        yield f"http://127.0.0.1:{parent.recv()}/v1"
    finally:
        process.terminate()
        process.join(10)
