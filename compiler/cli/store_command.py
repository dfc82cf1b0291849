"""`dslc store stats|clear FILE [--operator NAME]`: what the answer store holds, and emptying it.

FILE is a .flow file (its STOREs' store: ANSWERS, or the default under CHECKPOINT or target/)
or a store itself (a file path or redis://host:port/db)."""
from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
from pathlib import Path

from dslc.compiler.diagnostics import ToolError


def _flow_stores(path: str) -> dict[str, list[str]]:
    """Store location -> the operators with STORE in a .flow file."""
    from dslc.compiler.pipeline import check_file
    from dslc.compiler.plan import logical as plan
    from dslc.runtime.spark.answers import location

    checked = check_file(path)
    folder = str(Path(path).resolve().parent)
    stores: dict[str, list[str]] = {}
    for node in checked.nodes:
        if isinstance(node, plan.Enrich) and node.store is not None:
            stores.setdefault(location(node.store.location, folder), []).append(node.name)
    if not stores:
        raise ToolError(f"{path}: no ENRICH uses STORE, so the pipeline has no answer store")
    return stores


def _when(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return dt.datetime.fromtimestamp(seconds, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")


async def _stats(where: str, operators: list[str] | None) -> list[str]:
    from dslc.runtime.store.base import is_redis, make_store
    from dslc.runtime.store.sqlite import file_size

    store = make_store(where)
    await store.open(check=True)
    try:
        found = [s for op in operators for s in await store.stats(op)] if operators else await store.stats()
    finally:
        await store.close()
    kind = "Redis" if is_redis(where) else f"SQLite, {file_size(where) // 1024} KiB"
    lines = [f"answer store {where} ({kind}, store version {store.version})"]
    if not found:
        return lines + ["  no answers" + (f" of {', '.join(operators)}" if operators else "")]
    width = max(len("operator"), *(len(s.operator) for s in found))
    lines.append(f"  {'operator'.ljust(width)}  answers  misses  oldest                newest")
    for s in found:
        lines.append(f"  {s.operator.ljust(width)}  {s.answers:7d}  {s.misses:6d}  {_when(s.oldest):20}  {_when(s.newest)}")
    return lines


async def _clear(where: str, operators: list[str] | None) -> str:
    from dslc.runtime.store.base import StoreError, make_store

    store = make_store(where)
    try:
        await store.open()
    except StoreError as exc:
        if operators or "dslc" not in str(exc) or "version" not in str(exc):
            raise
        await _reset(where)          # a store of another version: emptied by starting it anew
        fresh = make_store(where)
        await fresh.open()
        await fresh.close()
        return f"emptied the answer store {where} (it was of another store version)"
    try:
        if operators:
            gone = sum([await store.clear(op) for op in operators])
            return f"cleared {gone} answer{'s' if gone != 1 else ''} of {', '.join(operators)} from {where}"
        gone = await store.clear()
        return f"cleared {gone} answer{'s' if gone != 1 else ''} (every operator) from {where}"
    finally:
        await store.close()


async def _reset(where: str) -> None:
    from dslc.runtime.store.base import is_redis
    if is_redis(where):
        import redis.asyncio as aioredis
        client = aioredis.from_url(where)
        try:
            names = [k async for k in client.scan_iter(match="dslc:*", count=1000)]
            if names:
                await client.unlink(*names)
        finally:
            await client.aclose()
        return
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(where + suffix):
            os.unlink(where + suffix)


def cmd_store(args: argparse.Namespace) -> int:
    """dslc store stats|clear FILE [--operator NAME]."""
    from dslc.runtime.store.base import StoreError, is_redis

    target = args.target
    if target.endswith(".flow"):
        if not Path(target).is_file():
            raise ToolError(f"{target}: cannot read file")
        stores = _flow_stores(target)
        if args.operator:
            stores = {w: [args.operator] for w, ops in stores.items() if args.operator in ops}
            if not stores:
                raise ToolError(f"{target}: no ENRICH named '{args.operator}' uses STORE")
    else:
        if not is_redis(target) and not Path(target).is_file():
            raise ToolError(f"no answer store at {target} (give the .flow file, the store's file, or redis://host:port/db)")
        where = target if is_redis(target) else str(Path(target).resolve())
        stores = {where: [args.operator] if args.operator else None}
    try:
        for where, operators in stores.items():
            if args.action == "stats":
                print("\n".join(asyncio.run(_stats(where, operators))))
            else:
                print(asyncio.run(_clear(where, operators)))
    except StoreError as exc:
        raise ToolError(str(exc)) from None
    return 0


def add_parser(sub) -> None:
    """The `store` sub-command's arguments."""
    store = sub.add_parser("store", help="show or empty the answer store of ENRICH ... STORE")
    store.add_argument("action", choices=("stats", "clear"))
    store.add_argument("target", metavar="FILE", help="a .flow file, an answer store file, or redis://host:port/db")
    store.add_argument("--operator", metavar="NAME", help="only this ENRICH's answers")
