"""TIER BATCH on the driver: before the pass of a chain whose head ENRICH has TIER BATCH, the
rows that reach it are computed once (`keep`: the pass reads them back, nothing upstream runs
twice), their distinct request columns brought to the driver, and the provider's batches run
(runtime/batches/runner.py) until every key has its answer in the store or has failed. Then the
chain runs as usual: each row finds its answer in the store (joined by Spark on a warm store).

The batches' figures go to the live progress as a task of the operator's (batch states, lines
done and failed, tokens, money) and into the run's metrics. Ctrl-C leaves the batches running
at the provider: the job says which, that the same command collects them, and how to cancel
them. A replayed run (`--replay`, `dslc test`) sends no batch: its answers come from the recording.
"""
from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

from pyspark.sql import DataFrame

from dslc.runtime import config as C
from dslc.runtime import run_env
from dslc.runtime.batches.api import BatchApi, BatchApiError
from dslc.runtime.batches.lines import MAX_LINES
from dslc.runtime.batches.runner import BatchRunner, Figures
from dslc.runtime.calls.factory import KINDS
from dslc.runtime.metrics import money
from dslc.runtime.store.base import StoreError
from dslc.runtime.store.open_stores import make_store
from dslc.runtime.wrappers import recording

from . import names
from .analysis_errors import FLOW_ENV

LINES_CONF = run_env.BATCH_LINES_CONF.name     # lines per provider batch (the provider's limit: 50,000)


def wanted(df: DataFrame, operators: tuple) -> bool:
    """True when the chain's head ENRICH has TIER BATCH and its provider batches should run."""
    head = operators[0] if operators else None
    if not isinstance(head, C.Enrich) or head.tier != "BATCH" or head.store is None or df.isStreaming:
        return False
    return not replaying(df.sparkSession)


def replaying(spark) -> bool:
    """A recording answers the calls (`--replay`, `dslc test`): no provider batch is sent."""
    if os.environ.get(recording.REPLAY_ENV):
        return True
    try:
        return bool(spark.sparkContext.getLocalProperty(recording.REPLAY_PROPERTY))
    except Exception:  # noqa: BLE001 - Spark Connect has no SparkContext (and no local properties)
        return False


def before_pass(df: DataFrame, op: C.Enrich, metrics: Any, keep: Callable[[DataFrame], DataFrame]) -> DataFrame:
    """Run the operator's provider batches over the rows of `df`; the rows, kept, for its pass."""
    kept = keep(df)
    call = KINDS[type(op.call)](op)
    columns = call.request_columns() or ()
    started = time.monotonic()
    report = _reporter(op, metrics)
    max_lines = int(df.sparkSession.conf.get(LINES_CONF, None) or MAX_LINES)
    figures = _run(op, call, _rows(kept, columns), report, max_lines)
    _add_to_metrics(metrics, op, figures)
    _say(f"'{op.name}' (line {op.line}): provider batches done in {time.monotonic() - started:.1f}s: "
         f"{figures.done} answers stored, {figures.failed} lines failed"
         + (f", {figures.online} sent online" if figures.online else "")
         + (f", {figures.left_out} left for the next run (BUDGET)" if figures.left_out else "")
         + (f", {money(figures.cost_usd)}" if figures.cost_usd is not None else ""))
    return kept


def _rows(df: DataFrame, columns: tuple[str, ...]) -> Iterator[dict[str, Any]]:
    """The distinct values of the request columns, brought to the driver as Arrow (as the chain's
    pass gets its rows: the same Python values, so the same request keys), several times faster
    than a Row at a time."""
    if not columns:
        if df.limit(1).count():
            yield {}
        return
    table = df.select(*[names.col(c) for c in columns]).distinct().toArrow()
    for batch in table.to_batches():
        yield from batch.to_pylist()


def _run(op: C.Enrich, call: Any, rows: Iterator[dict[str, Any]], report: Callable[[Figures], None],
         max_lines: int) -> Figures:
    async def run() -> Figures:
        store = make_store(op.store.location)
        await store.open()
        try:
            async with BatchApi(op.call, op.secrets) as api:
                return await BatchRunner(op, call, store, api, report=report, say=_say, max_lines=max_lines).run(rows)
        finally:
            await store.close()

    try:
        return asyncio.run(run())
    except KeyboardInterrupt:
        _interrupted(op)
        raise SystemExit(130) from None
    except (BatchApiError, StoreError) as exc:
        print(f"dslc: error: '{op.name}' (line {op.line}): TIER BATCH: {exc}", file=sys.stderr, flush=True)
        raise SystemExit(1) from None


def _interrupted(op: C.Enrich) -> None:
    """Ctrl-C: the batches keep running at the provider; say which, and what to do."""
    async def running() -> list[str]:
        store = make_store(op.store.location)
        await store.open()
        try:
            return [r.batch_id for r in await store.batches(op.name) if r.batch_id]
        finally:
            await store.close()

    try:
        ids = asyncio.run(running())
    except Exception:  # noqa: BLE001 - the message below is what matters
        ids = []
    flow = os.environ.get(FLOW_ENV) or "FILE.flow"
    _say(f"interrupted: the provider batches of '{op.name}' keep running at the provider"
         + (f" ({', '.join(ids)})" if ids else "") + "; run the same command again to collect them (no key is "
         f"sent twice), or cancel them: dslc store cancel {flow} --operator {op.name}")


def _say(text: str) -> None:
    print(f"dslc: {text}", file=sys.stderr, flush=True)


def _reporter(op: C.Enrich, metrics: Any) -> Callable[[Figures], None]:
    """Hand the batches' figures to the live progress, as a task of the operator's."""
    collector = getattr(metrics, "progress", None) if metrics is not None else None
    if collector is None:
        return lambda figures: None
    task = f"provider-batches:{op.name}"

    def report(figures: Figures, final: bool = False) -> None:
        message = {"token": collector.token, "task": task, "final": final,
                   "operators": {op.name: {"operator": op.name, **figures.metrics()}}}
        collector.accept(json.dumps(message).encode())

    return report


def _add_to_metrics(metrics: Any, op: C.Enrich, figures: Figures) -> None:
    """The batches' figures in the run's metrics (added to the operator's pass) and, final, in
    the live progress."""
    if metrics is None:
        return
    collector = getattr(metrics, "progress", None)
    if collector is not None:
        collector.accept(json.dumps({"token": collector.token, "task": f"provider-batches:{op.name}", "final": True,
                                     "operators": {op.name: {"operator": op.name, **figures.metrics()}}}).encode())
    metrics.add_driver_figures(op.name, {"operator": op.name, **figures.metrics()})
