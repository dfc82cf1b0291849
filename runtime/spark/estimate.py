"""`dslc explain FILE --estimate`: what each ENRICH will cost, before anything is called.

The job is generated as for `dslc test` (it writes nothing) and run with `ESTIMATING` on: then
`chains.run_chain` calls nothing, it records the DataFrame that reaches each operator (sources
read, every filter and join before it applied) and hands on the rows with the RETURNS columns
NULL. For each recorded ENRICH this module then counts, with Spark:

- rows reaching it (exact);
- distinct request keys: distinct values of the columns its request carries (the URL's
  placeholders and the BODY for HTTP, every input column for PYTHON), exact;
- keys already in the answer store (STORE): the request keys of the distinct values, looked up
  in the store in Arrow batches; above `sample` distinct keys, a random sample of `sample` of
  them is looked up and the share found is applied to all;
- calls: with STORE the keys not in the store; with CACHE the distinct keys (a lower bound: each
  worker process has its own cache); otherwise one per row; BATCH n divides by n;
- time: waves of CAPACITY x tasks calls, one latency each, and at least calls / RATE;
- whether BUDGET n CALLS covers the calls.

Limits: the rows an ENRICH emits (a miss dropped, a list answer) are unknown before calling, so
an ENRICH after another ENRICH sees one row per input row; retries, errors and timeouts are not
counted; a TTL that expires during the run is not foreseen.
"""
from __future__ import annotations

import asyncio
import dataclasses
import math
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from dslc.runtime import config as C

#: Set while the estimate runs the job: `run_chain` records its operators' inputs instead of calling.
ESTIMATING: list | None = None


@dataclasses.dataclass
class Estimate:
    """The estimate of one ENRICH."""

    operator: str
    line: int
    rows: int
    distinct_keys: int
    stored_keys: int | None          # None: no STORE
    sampled: bool
    calls: int
    tasks: int
    capacity: int
    rate: float | None
    latency_s: float | None
    seconds: float | None
    budget: int | None
    budget_unit: str | None
    notes: list[str]

    @property
    def budget_enough(self) -> bool | None:
        if self.budget is None or self.budget_unit != "CALLS":
            return None
        return self.calls <= self.budget

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "budget_enough": self.budget_enough}


def record_chain(df, operators: tuple, schema_of) -> Any:
    """ESTIMATING: remember each operator's input and return the chain's rows without calling
    (RETURNS columns NULL)."""
    from pyspark.sql import functions as F

    from . import names

    for op in operators:
        if isinstance(op, C.Enrich):
            ESTIMATING.append((op, df))
            extra = [F.lit(None).cast(c.type).alias(c.name) for c in op.returns]
            df = df.select(*[names.col(c) for c in df.columns], *extra)
        else:   # PROCESS: its RETURNS columns only
            df = df.select(*[F.lit(None).cast(c.type).alias(c.name) for c in op.returns])
    return df


def _key_columns(op: C.Enrich, columns: list[str]) -> list[str]:
    call = op.call
    if isinstance(call, C.HttpCall) and call.columns is not None:
        return list(call.columns)
    return columns


class _StoredKeys:
    """mapInArrow: how many of a batch's rows have their answer in the store (one lookup per batch)."""

    def __init__(self, op: C.Enrich) -> None:
        self.op = op

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from dslc.runtime.calls.factory import KINDS
        from dslc.runtime.store.open_stores import make_store

        call = KINDS[type(self.op.call)](self.op)

        async def count(keys: list[str]) -> int:
            store = make_store(self.op.store.location)
            await store.open()
            try:
                found = 0
                for start in range(0, len(keys), 1000):
                    found += len(await store.get_many(self.op.name, keys[start:start + 1000], self.op.store.ttl_s))
                return found
            finally:
                await store.close()

        keys: list[str] = []
        for batch in batches:
            for row in batch.to_pylist():
                key = call.request_key(row)
                if key is not None:
                    keys.append(key)
        found = asyncio.run(count(keys)) if keys else 0
        yield pa.RecordBatch.from_pylist([{"found": found}], schema=pa.schema([("found", pa.int64())]))


def estimate_one(op: C.Enrich, df, *, sample: int, latency_s: float | None, tasks: int) -> Estimate:
    """Count what one ENRICH will do over the DataFrame that reaches it."""
    from pyspark.sql import functions as F

    from . import names

    notes: list[str] = []
    rows = df.count()
    columns = _key_columns(op, df.columns)
    keys_df = df.select(*[names.col(c) for c in columns]).distinct()
    distinct = keys_df.count()
    stored, sampled = None, False
    if op.store is not None and distinct:
        probe = keys_df
        if distinct > sample:
            probe, sampled = keys_df.sample(fraction=min(1.0, sample / distinct), seed=7), True
        probed = probe.count() if sampled else distinct
        found = probe.mapInArrow(_StoredKeys(op), "found long").agg(F.sum("found")).collect()[0][0] or 0
        stored = round(found * distinct / probed) if sampled and probed else int(found)
    elif op.store is not None:
        stored = 0
    if op.store is not None:
        calls = distinct - (stored or 0)
    elif op.cache is not None:
        calls = distinct
        notes.append(f"CACHE is per worker process: up to {distinct} calls per process")
    else:
        calls = rows
    if op.batch is not None:
        calls = math.ceil(calls / op.batch.size)
        notes.append(f"BATCH {op.batch.size}: calls are batches")
    rate = op.rate.per_second if op.rate else None
    seconds = None
    if latency_s is not None:
        per_element = math.ceil(calls / (op.capacity * max(1, tasks))) * latency_s   # waves of calls
        seconds = max(per_element, calls / rate) if rate else per_element
    elif rate:
        seconds = calls / rate
    budget = op.budget
    return Estimate(operator=op.name, line=op.line, rows=rows, distinct_keys=distinct, stored_keys=stored,
                    sampled=sampled, calls=calls, tasks=tasks, capacity=op.capacity, rate=rate,
                    latency_s=latency_s, seconds=seconds, budget=budget.amount if budget else None,
                    budget_unit=budget.unit if budget else None, notes=notes)
