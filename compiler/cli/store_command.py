"""`dslc store stats|clear|cancel FILE [--operator NAME]`: what the answer store holds (with TIER
BATCH's provider batches in flight), emptying it, and cancelling those batches.

FILE is a .flow file (its STOREs' store: ANSWERS, or the default under CHECKPOINT or target/)
or a store itself (a file path or redis://host:port/db); `cancel` needs the .flow file (where the
provider is, and its HEADERS' secrets: read from the environment or --secrets FILE)."""
from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
from pathlib import Path

from dslc.compiler.diagnostics import ToolError
from dslc.runtime.secrets import mask_url


def _flow_stores(path: str) -> dict[str, list[str]]:
    """Store location -> the operators with STORE in a .flow file."""
    return {where: [node.name for node in nodes] for where, nodes in _flow_nodes(path).items()}


def _flow_nodes(path: str) -> dict[str, list]:
    """Store location -> the ENRICH nodes with STORE of a .flow file."""
    from dslc.compiler.pipeline import check_file
    from dslc.compiler.plan import logical as plan
    from dslc.runtime.spark.answers import location

    checked = check_file(path)
    folder = str(Path(path).resolve().parent)
    stores: dict[str, list] = {}
    for node in checked.nodes:
        if isinstance(node, plan.Enrich) and node.store is not None:
            stores.setdefault(location(node.store.location, folder), []).append(node)
    if not stores:
        raise ToolError(f"{path}: no ENRICH uses STORE, so the pipeline has no answer store")
    return stores


def _when(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return dt.datetime.fromtimestamp(seconds, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")


async def _stats(where: str, operators: list[str] | None) -> list[str]:
    from dslc.runtime.store.base import is_redis
    from dslc.runtime.store.open_stores import make_store
    from dslc.runtime.store.sqlite import file_size

    store = make_store(where)
    await store.open(check=True)
    try:
        found = [s for op in operators for s in await store.stats(op)] if operators else await store.stats()
        batches = [b for op in operators for b in await store.batches(op)] if operators else await store.batches()
    finally:
        await store.close()
    kind = "Redis" if is_redis(where) else f"SQLite, {file_size(where) // 1024} KiB"
    lines = [f"answer store {mask_url(where)} ({kind}, store version {store.version})"]
    if not found:
        lines.append("  no answers" + (f" of {', '.join(operators)}" if operators else ""))
    else:
        width = max(len("operator"), *(len(s.operator) for s in found))
        lines.append(f"  {'operator'.ljust(width)}  answers  misses  oldest                newest")
        for s in found:
            lines.append(f"  {s.operator.ljust(width)}  {s.answers:7d}  {s.misses:6d}  {_when(s.oldest):20}  "
                         f"{_when(s.newest)}")
    return lines + _batch_lines(batches)


def _batch_lines(batches: list) -> list[str]:
    """TIER BATCH's provider batches a run has not collected yet."""
    if not batches:
        return []
    lines = [f"  provider batches in flight (TIER BATCH): {len(batches)}"]
    for b in batches:
        counts = b.data.get("counts") or {}
        lines.append(f"    {b.operator}: {b.batch_id or '(not created yet)'}  {b.data.get('status')}  "
                     f"{counts.get('completed', 0)} of {b.data.get('lines')} lines done, {counts.get('failed', 0)} "
                     f"failed  since {_when(b.data.get('created'))}")
    return lines + ["  a run of the pipeline collects them; `dslc store cancel FILE.flow` cancels them"]


async def _cancel(where: str, nodes: list, secrets_file: str | None) -> list[str]:
    """Cancel the operators' provider batches in flight and forget them (the next run sends
    their keys again; answers already stored stay)."""
    from dslc.runtime import secrets
    from dslc.runtime.batches.api import BatchApi, BatchApiError
    from dslc.runtime.store.open_stores import make_store

    store = make_store(where)
    await store.open()
    out = []
    try:
        for node in nodes:
            records = await store.batches(node.name)
            if not records:
                continue
            values = secrets.read(secrets.secret_names(node.call), file=secrets_file)
            async with BatchApi(node.call, values) as api:
                for record in records:
                    if record.batch_id:
                        try:
                            state = (await api.cancel(record.batch_id)).get("status")
                        except BatchApiError as exc:
                            state = f"not cancelled: {exc}"
                        out.append(f"{node.name}: {record.batch_id} {state}")
                    await store.drop_lines(node.name, list(await store.lines_of(node.name, record.id)))
                    await store.drop_batch(node.name, record.id)
    finally:
        await store.close()
    return out or ["no provider batches in flight"]


async def _clear(where: str, operators: list[str] | None) -> str:
    from dslc.runtime.store import run_hold
    from dslc.runtime.store.base import StoreError
    from dslc.runtime.store.open_stores import make_store

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
        return f"emptied the answer store {mask_url(where)} (it was of another store version)"
    try:
        running = await run_hold.holders(store)
        if running:
            raise StoreError(f"answer store {mask_url(where)} is in use by a running job ({', '.join(running)}): "
                             "clearing it now would make that run pay again for the answers it stored; wait for "
                             "the run to end (or stop it), then clear")
        if operators:
            gone = sum([await store.clear(op) for op in operators])
            return f"cleared {gone} answer{'s' if gone != 1 else ''} of {', '.join(operators)} from {mask_url(where)}"
        gone = await store.clear()
        return f"cleared {gone} answer{'s' if gone != 1 else ''} (every operator) from {mask_url(where)}"
    finally:
        await store.close()


async def _reset(where: str) -> None:
    from dslc.runtime.store.base import is_redis
    if is_redis(where):
        import redis.asyncio as aioredis

        from dslc.runtime.store.open_stores import filled
        client = aioredis.from_url(filled(where))
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
    from dslc.runtime.secrets import MissingSecret
    from dslc.runtime.store.base import StoreError, is_redis

    target = args.target
    if args.action == "cancel":
        return _cmd_cancel(args)
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
    except (StoreError, MissingSecret) as exc:
        raise ToolError(str(exc)) from None
    return 0


def _cmd_cancel(args: argparse.Namespace) -> int:
    """dslc store cancel FILE.flow [--operator NAME] [--secrets FILE]."""
    from dslc.runtime import secrets
    from dslc.runtime.store.base import StoreError

    if not args.target.endswith(".flow") or not Path(args.target).is_file():
        raise ToolError(f"{args.target}: `dslc store cancel` needs the .flow file (where the provider is)")
    try:
        for where, nodes in _flow_nodes(args.target).items():
            chosen = [n for n in nodes if getattr(n, "tier", "STANDARD") == "BATCH"
                      and (not args.operator or n.name == args.operator)]
            if chosen:
                print("\n".join(asyncio.run(_cancel(where, chosen, getattr(args, "secrets", None)))))
    except (StoreError, secrets.MissingSecret) as exc:
        raise ToolError(str(exc)) from None
    return 0


def add_parser(sub) -> None:
    """The `store` sub-command's arguments."""
    store = sub.add_parser("store", help="show or empty the answer store of ENRICH ... STORE, or cancel its "
                                         "provider batches")
    store.add_argument("action", choices=("stats", "clear", "cancel"))
    store.add_argument("target", metavar="FILE", help="a .flow file, an answer store file, or redis://host:port/db")
    store.add_argument("--operator", metavar="NAME", help="only this ENRICH's answers")
    store.add_argument("--secrets", metavar="FILE", help="cancel: a NAME=value file of the HEADERS' secrets")
