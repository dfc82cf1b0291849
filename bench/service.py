"""The enrichment service of the benchmarks: a real aiohttp server on 127.0.0.1 with set latency.

It runs in its own process (so it does not share a GIL with the Spark driver) and answers

    GET /fixed/{key}       after LATENCY_MS (20 ms)
    GET /lognormal/{key}   after a heavy-tailed delay: lognormal, median 20 ms, p99 400 ms
    GET /instant/{key}     at once (to measure what the machine's CPUs allow)
    POST /model            a model-serving endpoint: a JSON object or an array of them (a batch),
                           answered after BASE_MS + PER_ITEM_MS per item, at most MODEL_LIMIT
                           requests at once: 429 at once above that (`?limit=` overrides it)
    GET /_stats            {"calls", "max_in_flight", "distinct_keys", "items", "rejected"} since the last reset
    GET /_reset            zero the counters

with `{"value": "v-<key>"}`. The lognormal delay of a key is a pure function of the key
(`delay_s`), so every method benchmarked against the service waits exactly as long for the same
rows, and the bound of a run can use the true mean latency of its keys. Delays are capped at
MAX_DELAY_S so one unlucky key cannot stall a run.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import math
import multiprocessing as mp
import statistics
import urllib.request
from collections.abc import Iterable
from typing import Any

LATENCY_MS = 20.0
MEDIAN_MS = 20.0
P99_MS = 400.0
MAX_DELAY_S = 2.0
SIGMA = math.log(P99_MS / MEDIAN_MS) / statistics.NormalDist().inv_cdf(0.99)   # ≈ 1.29
DISTRIBUTIONS = ("fixed", "lognormal", "instant")
BASE_MS = 20.0          # /model: fixed cost of one request ...
PER_ITEM_MS = 0.2       # ... plus this per item of a batch
MODEL_LIMIT = 8         # /model: concurrent requests served; 429 above


def delay_s(distribution: str, key: str) -> float:
    """The service's answer time for `key`, in seconds (deterministic)."""
    if distribution == "fixed":
        return LATENCY_MS / 1000.0
    if distribution == "instant":
        return 0.0
    if distribution != "lognormal":
        raise ValueError(f"unknown latency distribution {distribution!r}")
    digest = hashlib.blake2b(key.encode(), digest_size=8).digest()
    u = (int.from_bytes(digest, "big") + 0.5) / 2.0 ** 64            # uniform in (0, 1)
    z = statistics.NormalDist().inv_cdf(u)
    return min(MAX_DELAY_S, MEDIAN_MS / 1000.0 * math.exp(SIGMA * z))


def mean_delay_s(distribution: str, keys: Iterable[str]) -> float:
    """Mean answer time over these keys (the latency the bound of a run divides by)."""
    return statistics.fmean(delay_s(distribution, k) for k in keys)


def _serve(pipe: Any) -> None:
    from aiohttp import web

    # first: loop time of the first /model call since the reset; rejected_first_s: its 429s in the
    # first second of the run (where a slow start that overshoots puts them)
    state = {"calls": 0, "in_flight": 0, "max_in_flight": 0, "items": 0, "rejected": 0, "first": None,
             "rejected_first_s": 0}
    keys: set[str] = set()

    def handler(distribution: str):
        async def handle(request: web.Request) -> web.Response:
            key = request.match_info["key"]
            state["calls"] += 1
            keys.add(key)
            state["in_flight"] += 1
            state["max_in_flight"] = max(state["max_in_flight"], state["in_flight"])
            try:
                delay = delay_s(distribution, key)
                if delay:
                    await asyncio.sleep(delay)
            finally:
                state["in_flight"] -= 1
            if request.query.get("wrap"):   # as an API gateway answers, and only with a token
                if not request.headers.get("Authorization", "").startswith("Bearer "):
                    return web.Response(status=401, text="unauthorized")
                return web.Response(text=json.dumps({"data": {"item": {"value": f"v-{key}"}}, "meta": {"v": 2}}),
                                    content_type="application/json")
            return web.Response(text=json.dumps({"value": f"v-{key}"}), content_type="application/json")
        return handle

    async def model(request: web.Request) -> web.Response:
        body = await request.json()
        items = body if isinstance(body, list) else [body]
        limit = int(request.query.get("limit", MODEL_LIMIT))
        state["calls"] += 1
        now = asyncio.get_running_loop().time()
        if state["first"] is None:
            state["first"] = now
        if state["in_flight"] >= limit:
            state["rejected"] += 1
            state["rejected_first_s"] += now - state["first"] < 1.0
            return web.Response(status=429, text="busy", headers={"Retry-After": "0"})
        state["in_flight"] += 1
        state["max_in_flight"] = max(state["max_in_flight"], state["in_flight"])
        state["items"] += len(items)
        try:
            await asyncio.sleep((BASE_MS + PER_ITEM_MS * len(items)) / 1000.0)
        finally:
            state["in_flight"] -= 1
        answers = [{"value": f"v-{item.get('id')}"} for item in items]
        return web.json_response(answers if isinstance(body, list) else answers[0])

    async def stats(request: web.Request) -> web.Response:
        return web.json_response({"calls": state["calls"], "max_in_flight": state["max_in_flight"],
                                  "distinct_keys": len(keys), "items": state["items"],
                                  "rejected": state["rejected"], "rejected_first_s": state["rejected_first_s"]})

    async def reset(request: web.Request) -> web.Response:
        state.update(calls=0, max_in_flight=state["in_flight"], items=0, rejected=0, first=None, rejected_first_s=0)
        keys.clear()
        return web.json_response({})

    async def main() -> None:
        app = web.Application()
        for distribution in DISTRIBUTIONS:
            app.router.add_get(f"/{distribution}/{{key}}", handler(distribution))
        app.router.add_post("/model", model)
        app.router.add_get("/_stats", stats)
        app.router.add_get("/_reset", reset)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, backlog=4096)
        await site.start()
        pipe.send(site._server.sockets[0].getsockname()[1])  # noqa: SLF001 - port 0 -> actual port
        await asyncio.Event().wait()

    asyncio.run(main())


class LatencyService:
    """The server process; use as a context manager."""

    def __init__(self) -> None:
        self.port = 0
        self._process: Any = None

    def __enter__(self) -> "LatencyService":
        ctx = mp.get_context("spawn")
        parent, child = ctx.Pipe()
        self._process = ctx.Process(target=_serve, args=(child,), name="bench-service", daemon=True)
        self._process.start()
        if not parent.poll(60):
            raise RuntimeError("the benchmark service did not start")
        self.port = parent.recv()
        return self

    def __exit__(self, *exc: object) -> None:
        self._process.terminate()
        self._process.join(10)

    def url(self, distribution: str, placeholder: str = "{id}") -> str:
        """The URL template of one latency distribution."""
        if distribution not in DISTRIBUTIONS:
            raise ValueError(f"unknown latency distribution {distribution!r}")
        return f"http://127.0.0.1:{self.port}/{distribution}/{placeholder}"

    def model_url(self, limit: int | None = None) -> str:
        """The URL of the model-serving endpoint (`limit`: its concurrency limit, default MODEL_LIMIT)."""
        return f"http://127.0.0.1:{self.port}/model" + (f"?limit={limit}" if limit else "")

    def _get(self, path: str) -> dict[str, Any]:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=10) as response:
            return json.loads(response.read())

    def reset(self) -> None:
        """Zero the call counters."""
        self._get("/_reset")

    def stats(self) -> dict[str, int]:
        """Calls, maximum concurrent calls and distinct keys since the last reset."""
        return self._get("/_stats")
