"""The answer store on the driver: each STORE's location made absolute and checked before any
call, the run named (BUDGET counts per run), and a run stopped when a BUDGET is spent.

BATCH: a chain with a BUDGET is computed at once (`keep`, so no sink has written anything yet);
if some rows were left unanswered the job prints the metrics and how many rows are left, and
exits with code 3. Every answer received is in the store, so the same command continues where
it stopped. STREAMING: the task that left rows unanswered fails (its micro-batch does not
commit, and is replayed on the next run, finding its answers in the store); the job prints the
metrics and the task's message, and exits with code 3 (failure.run_main).
"""
from __future__ import annotations

import asyncio
import dataclasses
import sys
import uuid
from pathlib import Path

from dslc.runtime import config as C
from dslc.runtime import exit_codes
from dslc.runtime.limits.money import budget_message
from dslc.runtime.store import run_hold
from dslc.runtime.store.base import StoreError, is_redis
from dslc.runtime.store.open_stores import check_location, use_secrets

BUDGET_EXIT = exit_codes.BUDGET

_checked: set[str] = set()


def location(path: str, folder: str) -> str:
    """A store location as every executor reaches it: `redis://` as written, a path absolute and
    normalised, a relative one against the .flow file's folder (the job gives its paths through
    resolve(FOLDER, ...), `dslc store` gives them as the .flow file has them)."""
    if is_redis(path):
        return path
    return str(Path(folder, path).resolve())


def prepare(operators: tuple, folder: str, streaming: bool) -> tuple:
    """The chain's operators with their store located and checked, this run named, and (in
    STREAMING) a spent BUDGET made to fail its task."""
    out = []
    run = uuid.uuid4().hex[:16]     # this run of the job: its BUDGET counters start from nothing
    for op in operators:
        if isinstance(op, C.Enrich) and op.store is not None:
            where = location(op.store.location, folder)
            use_secrets(where, op.secrets)      # a `${NAME}` in ANSWERS (a Redis password)
            check(where)
            run_hold.hold(where)                # `dslc store clear` refuses while this job runs
            op = dataclasses.replace(op, store=dataclasses.replace(op.store, location=where, run=run))
            if op.budget is not None and streaming:
                op = dataclasses.replace(op, budget=dataclasses.replace(op.budget, stop_task=True))
        out.append(op)
    return tuple(out)


def check(where: str) -> None:
    """Open the store once (per location and run) before any call: an unreachable Redis, a
    damaged file or a store of another dslc version stops the job here, with one clear line."""
    if where in _checked:
        return
    try:
        asyncio.run(check_location(where))
    except StoreError as exc:
        print(f"dslc: error: {exc}", file=sys.stderr, flush=True)
        raise SystemExit(1) from None
    _checked.add(where)


def stop_when_spent(df, chain: C.Chain, metrics, keep):
    """BATCH: compute a chain with a BUDGET now (`keep`: chains.keep) and stop the job (exit 3)
    if rows were left unanswered; other chains pass unchanged."""
    budgeted = [op for op in chain.operators if isinstance(op, C.Enrich) and op.budget is not None]
    if not budgeted or df.isStreaming or metrics is None:
        return df
    df = keep(df)
    df._dslc_kept = True
    totals = metrics.value()
    spent = [(op, int(totals.get(op.name, {}).get("unanswered", 0))) for op in budgeted]
    spent = [(op, n) for op, n in spent if n]
    if spent:
        metrics.report(ceiling_stops=False)
        for op, unanswered in spent:
            print(f"dslc: {budget_message(op, unanswered)}", file=sys.stderr, flush=True)
        raise SystemExit(BUDGET_EXIT)
    return df
