"""The customer service the fraud example calls: GET /customers/{id} → {"tier", "risk"}.

Customers c00..c19 exist (c13 is unknown: 404, a miss); answers take 5-25 ms.
Run it alone with `python service.py [port]`; examples/run.py starts it for you.
"""
from __future__ import annotations

import asyncio
import sys
import zlib

from aiohttp import web

TIERS = ("bronze", "silver", "gold")


def customer(customer_id: str) -> dict | None:
    """Deterministic profile of a known customer, None for an unknown one."""
    if not (customer_id.startswith("c") and customer_id[1:].isdigit()) or customer_id == "c13":
        return None
    n = int(customer_id[1:])
    if n >= 20:
        return None
    return {"tier": TIERS[n % 3], "risk": round((zlib.crc32(customer_id.encode()) % 100) / 100, 2)}


async def handle(request: web.Request) -> web.Response:
    customer_id = request.match_info["customer_id"]
    await asyncio.sleep(0.005 + (zlib.crc32(customer_id.encode()) % 20) / 1000)
    profile = customer(customer_id)
    if profile is None:
        return web.json_response({"error": "unknown customer"}, status=404)
    return web.json_response(profile)


def app() -> web.Application:
    application = web.Application()
    application.router.add_get("/customers/{customer_id}", handle)
    return application


if __name__ == "__main__":
    web.run_app(app(), host="127.0.0.1", port=int(sys.argv[1]) if len(sys.argv) > 1 else 8765, print=None)
