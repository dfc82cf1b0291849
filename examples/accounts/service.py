"""The account service the accounts example calls, as an API gateway would serve it:
GET /v2/accounts/{id} with `Authorization: Bearer <token>` (401 without it) answers
{"data": {"account": {"plan", "limits": {"monthly"}, "owner": {"country"}}}, "meta": {...}}.

Accounts a00..a14 exist (a07 is unknown: 404, a miss); answers take 5-15 ms. The token is the
one in secrets.env beside this file. Run it alone with `python service.py [port]`;
examples/run.py starts it for you.
"""
from __future__ import annotations

import asyncio
import sys
import zlib
from pathlib import Path

from aiohttp import web

PLANS = ("free", "team", "business")
COUNTRIES = ("FR", "DE", "BR", "US")


def token() -> str:
    """The token this service accepts: ACCOUNTS_API_TOKEN in secrets.env."""
    for line in (Path(__file__).with_name("secrets.env")).read_text().splitlines():
        if line.startswith("ACCOUNTS_API_TOKEN="):
            return line.split("=", 1)[1].strip()
    raise SystemExit("secrets.env has no ACCOUNTS_API_TOKEN")


def account(account_id: str) -> dict | None:
    """Deterministic account for a00..a14 (a07 unknown), None otherwise."""
    if not (account_id.startswith("a") and account_id[1:].isdigit()) or account_id == "a07":
        return None
    n = int(account_id[1:])
    if n >= 15:
        return None
    return {"plan": PLANS[n % 3], "limits": {"monthly": 200.0 * (1 + n % 3)},
            "owner": {"country": COUNTRIES[n % 4]}}


def app(expected: str | None = None) -> web.Application:
    expected = expected or token()

    async def handle(request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != f"Bearer {expected}":
            return web.json_response({"errors": [{"code": "unauthorized"}]}, status=401)
        account_id = request.match_info["account_id"]
        await asyncio.sleep(0.005 + (zlib.crc32(account_id.encode()) % 10) / 1000)
        found = account(account_id)
        if found is None:
            return web.json_response({"errors": [{"code": "not_found"}]}, status=404)
        return web.json_response({"data": {"account": found}, "meta": {"api": "v2"}})

    application = web.Application()
    application.router.add_get("/v2/accounts/{account_id}", handle)
    return application


if __name__ == "__main__":
    web.run_app(app(), host="127.0.0.1", port=int(sys.argv[1]) if len(sys.argv) > 1 else 8765, print=None)
