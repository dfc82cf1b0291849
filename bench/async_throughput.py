"""Throughput of EnrichOperator (no Spark) against a 20 ms HTTP service, as a share of CAPACITY/latency.

Usage: python bench/async_throughput.py [--rows 5000] [--capacity 100] [--latency-ms 20]

The server runs in a separate process (so it does not compete for this process's GIL) and
answers every GET after a fixed delay. The ideal throughput is CAPACITY / latency rows per
second; the script prints the measured rate and its ratio to that bound for UNORDERED and
ORDERED mode.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import time
from typing import Any

from dslc.runtime.async_operator import EnrichOperator
from dslc.runtime.config import Column, Enrich, HttpCall, Mode
from dslc.runtime.metrics import format_summary
from dslc.runtime.operator import Watermark


def _serve(latency_s: float, port_pipe: Any) -> None:
    from aiohttp import web

    async def handle(request: web.Request) -> web.Response:
        await asyncio.sleep(latency_s)
        key = request.match_info["key"]
        return web.Response(text=json.dumps({"value": f"v-{key}"}), content_type="application/json")

    async def main() -> None:
        app = web.Application()
        app.router.add_get("/kv/{key}", handle)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, backlog=1024)
        await site.start()
        port_pipe.send(site._server.sockets[0].getsockname()[1])  # noqa: SLF001
        await asyncio.Event().wait()

    asyncio.run(main())


class _Sink:
    """Counts what the operator emits."""

    def __init__(self) -> None:
        self.rows = 0
        self.watermarks = 0

    def emit(self, row: dict[str, Any]) -> None:
        self.rows += 1

    def emit_watermark(self, watermark: Watermark) -> None:
        self.watermarks += 1

    def emit_dead_letter(self, letter: dict[str, Any]) -> None:
        raise AssertionError(f"unexpected dead letter {letter}")


def run_mode(port: int, mode: Mode, rows: int, capacity: int, name: str) -> tuple[float, dict[str, Any]]:
    """Seconds to push `rows` rows through one operator, and its metrics."""
    cfg = Enrich(name=name, line=1, call=HttpCall(f"http://127.0.0.1:{port}/kv/{{id}}"),
                 returns=(Column("value", "STRING"),), key_columns=("id",), mode=mode,
                 capacity=capacity, timeout_s=10.0)
    op = EnrichOperator(cfg)
    sink = _Sink()
    op.open(sink)
    started = time.perf_counter()
    for i in range(rows):
        op.process_element({"id": i, "payload": "x"})
        if i % 1000 == 999:
            op.process_watermark(Watermark(float(i)))
    op.finish()
    elapsed = time.perf_counter() - started
    op.close()
    op.dispose()
    assert sink.rows == rows, (sink.rows, rows)
    return elapsed, op.metrics()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=5000)
    parser.add_argument("--capacity", type=int, default=100)
    parser.add_argument("--latency-ms", type=float, default=20.0)
    args = parser.parse_args()

    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    server = ctx.Process(target=_serve, args=(args.latency_ms / 1000.0, child), daemon=True)
    server.start()
    port = parent.recv()
    bound = args.capacity / (args.latency_ms / 1000.0)
    try:
        run_mode(port, Mode.UNORDERED, min(args.rows, 500), args.capacity, "warmup")   # connections, imports
        print(f"bound: CAPACITY {args.capacity} / latency {args.latency_ms:g} ms = {bound:.0f} rows/s")
        for mode in (Mode.UNORDERED, Mode.ORDERED):
            elapsed, metrics = run_mode(port, mode, args.rows, args.capacity, f"bench_{mode.value.lower()}")
            rate = args.rows / elapsed
            print(f"{mode.value:9s} {args.rows} rows in {elapsed:.3f}s = {rate:.0f} rows/s, "
                  f"ratio {rate / bound:.1%} of bound")
            print("   ", format_summary(metrics))
    finally:
        server.terminate()
        server.join(5)


if __name__ == "__main__":
    main()
