"""The geo service the clickstream example calls: GET /geo/{ip} → {"country", "city"}.

Answers take 20-50 ms. IPs outside GEO are unknown (404: a miss); FAILING IPs always answer 500
(an error, after the retries a dead letter); SLOW IPs answer after 5 s, past the pipeline's
TIMEOUT (a dead letter); FLAKY IPs answer 503 to their first call only (a retry succeeds).
Every request is counted per IP in `app[CALLS]`.
Run it alone with `python service.py [port]`; examples/run.py starts it for you.
"""
from __future__ import annotations

import asyncio
import sys
import zlib
from collections import Counter

from aiohttp import web

GEO = {
    "81.2.69.160": ("GB", "London"),
    "81.2.69.192": ("GB", "Manchester"),
    "2.16.91.12": ("FR", "Paris"),
    "5.45.112.7": ("DE", "Berlin"),
    "5.45.112.90": ("DE", "Munich"),
    "37.120.3.44": ("NL", "Amsterdam"),
    "79.58.201.3": ("IT", "Milan"),
    "89.160.20.112": ("SE", "Linkoping"),
    "177.45.8.30": ("BR", "Sao Paulo"),
    "203.0.113.50": ("US", "Seattle"),
}
FAILING = {"198.51.100.23"}
SLOW = {"192.0.2.200"}
FLAKY = {"5.45.112.7"}
SLOW_SECONDS = 5.0

CALLS = web.AppKey("calls", Counter)


def geo(ip: str) -> dict | None:
    """Location of a known IP, None for an unknown one (FAILING and SLOW IPs are unknown too)."""
    found = GEO.get(ip)
    return None if found is None else {"country": found[0], "city": found[1]}


async def handle(request: web.Request) -> web.Response:
    ip = request.match_info["ip"]
    calls = request.app[CALLS]
    calls[ip] += 1
    await asyncio.sleep(0.020 + (zlib.crc32(ip.encode()) % 31) / 1000)
    if ip in FAILING:
        return web.json_response({"error": "geo database unavailable"}, status=500)
    if ip in FLAKY and calls[ip] == 1:
        return web.json_response({"error": "busy"}, status=503)
    if ip in SLOW:
        await asyncio.sleep(SLOW_SECONDS)
    location = geo(ip)
    if location is None:
        return web.json_response({"error": "unknown ip"}, status=404)
    return web.json_response(location)


def app() -> web.Application:
    application = web.Application()
    application[CALLS] = Counter()
    application.router.add_get("/geo/{ip}", handle)
    return application


if __name__ == "__main__":
    web.run_app(app(), host="127.0.0.1", port=int(sys.argv[1]) if len(sys.argv) > 1 else 8765, print=None)
