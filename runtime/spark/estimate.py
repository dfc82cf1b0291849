"""`dslc explain FILE --estimate`: what each ENRICH will cost, before anything is called.

The job is generated as for `dslc test` (it writes nothing), for the estimate target (codegen's
`Target(estimate=True)`): its chains are `chains.estimate_chain`, which calls nothing, records the
DataFrame that reaches each operator (sources read, every filter and join before it applied) in
the job's `captured.chain_inputs` and hands on the rows with the RETURNS columns NULL. For each
recorded ENRICH this module then counts, with Spark:

- rows reaching it (exact);
- distinct request keys: distinct values of the columns its request carries (the URL's
  placeholders and the BODY for HTTP, every input column for PYTHON), exact;
- keys already in the answer store (STORE): the request keys of the distinct values, looked up
  in the store in Arrow batches; above `sample` distinct keys, a random sample of `sample` of
  them is looked up and the share found is applied to all;
- calls: with STORE the keys not in the store; with CACHE the distinct keys (a lower bound: each
  worker process has its own cache); otherwise one per row; BATCH n divides by n;
- tokens (MODEL, EMBEDDING): the prompt tokens of the calls to make, counted as the runtime
  estimates them before sending (limits/tokens.py: the filled SYSTEM and PROMPT messages, or the
  INPUT), over the distinct keys not in the store (sampled and scaled like the store lookup), as
  a mean per key times the elements to call; plus, for MODEL, a completion per call: the mean
  tokens of the answers a recording holds (`--replay/--record DIR`: the structured output's
  JSON text, as the model writes it), else an assumption stated in the notes (the RETURNS
  object with 8-character strings and two-digit numbers);
- time: waves of CAPACITY x tasks calls, one latency each, and at least calls / RATE;
- whether BUDGET n CALLS covers the calls, BUDGET n TOKENS the tokens, or BUDGET n USD the money;
- money (PRICE): the calls and tokens at the operator's own tier's price, and at the other tiers'
  (FLEX and BATCH at half of STANDARD, limits/money.py); TIER BATCH sends each element to call
  as one line of a provider batch, so its time is the provider's (up to 24 hours), not CAPACITY's.

Limits: the rows an ENRICH emits (a miss dropped, a list answer) are unknown before calling, so
an ENRICH after another ENRICH sees one row per input row; retries, errors and timeouts are not
foreseen (with RETRY n a note gives the most calls: each one retried n times); a TTL that expires
during the run is not foreseen.
"""
from __future__ import annotations

import asyncio
import dataclasses
import math
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from dslc.runtime import config as C
from dslc.runtime.schema import provenance


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
    prompt_tokens: int | None = None        # None: the call reports no tokens (HTTP, PYTHON)
    completion_tokens: int | None = None
    completion_basis: str | None = None     # where the completion per call comes from
    retries: int = 0                        # RETRY n: each call may be sent up to n times more
    tier: str = "STANDARD"
    money_usd: float | None = None          # PRICE: what the calls cost at the operator's tier
    tiers_usd: dict[str, float] | None = None   # ... and at each tier (FLEX and BATCH: half of STANDARD)

    @property
    def calls_if_all_retried(self) -> int:
        """The calls when every one fails and is retried RETRY n times: the most the run can make."""
        return self.calls * (1 + self.retries)

    @property
    def tokens(self) -> int | None:
        if self.prompt_tokens is None:
            return None
        return self.prompt_tokens + (self.completion_tokens or 0)

    @property
    def budget_spent(self) -> int | float | None:
        """What the run would spend in the budget's unit."""
        if self.budget_unit == "USD":
            return self.money_usd
        return self.tokens if self.budget_unit == "TOKENS" else self.calls

    @property
    def budget_enough(self) -> bool | None:
        if self.budget is None or self.budget_spent is None:
            return None
        return self.budget_spent <= self.budget

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "tokens": self.tokens, "budget_enough": self.budget_enough}


def record_chain(df, operators: tuple, chain_inputs: list) -> Any:
    """Append each ENRICH and the rows reaching it to `chain_inputs`; return the chain's rows
    without calling (RETURNS columns NULL)."""
    from pyspark.sql import functions as F

    from . import names

    for op in operators:
        if isinstance(op, C.Expect):
            continue        # judges rows, calls nothing
        if isinstance(op, C.Enrich):
            chain_inputs.append((op, df))
            extra = [F.lit(None).cast(c.type).alias(c.name) for c in provenance.added(op)]
            df = df.select(*[names.col(c) for c in df.columns], *extra)
        else:   # PROCESS: its RETURNS columns only
            df = df.select(*[F.lit(None).cast(c.type).alias(c.name) for c in op.returns])
    return df


_MODELS = (C.ModelCall, C.EmbeddingCall)


def _key_columns(op: C.Enrich, columns: list[str]) -> list[str]:
    call = op.call
    if isinstance(call, C.HttpCall) and call.columns is not None:
        return list(call.columns)
    if isinstance(call, _MODELS) and call.columns:      # the placeholders fill the prompt or input
        return list(call.columns)
    return columns


def prompt_tokens(call: C.ModelCall | C.EmbeddingCall, row: dict) -> int | None:
    """A request's prompt tokens as the runtime estimates them before sending (None: a null
    placeholder, nothing is sent)."""
    from dslc.runtime.calls.prompt import UnfillableText, fill
    from dslc.runtime.limits.tokens import message_tokens, text_tokens

    try:
        if isinstance(call, C.EmbeddingCall):
            return text_tokens(fill(call.input, row))
        texts = ([fill(call.system, row)] if call.system is not None else []) + [fill(call.prompt, row)]
    except UnfillableText:
        return None
    return message_tokens(texts)


def assumed_completion(op: C.Enrich) -> int:
    """Completion tokens of one answer when no recording says (limits/tokens.py)."""
    from dslc.runtime.limits.tokens import assumed_completion as assumed

    return assumed(op.returns)


_COSTS = pa.schema([("found", pa.int64()), ("to_call", pa.int64()), ("prompt_tokens", pa.int64())])


class _KeyCosts:
    """mapInArrow over distinct keys: how many have their answer in the store (one lookup per
    batch), and how many must be called with how many prompt tokens (MODEL, EMBEDDING)."""

    def __init__(self, op: C.Enrich) -> None:
        self.op = op

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from dslc.runtime.calls.factory import KINDS
        from dslc.runtime.store.open_stores import make_store

        op = self.op
        call = KINDS[type(op.call)](op)
        tokens = isinstance(op.call, _MODELS)

        async def look_up(keys: list[str]) -> set[str]:
            store = make_store(op.store.location)
            await store.open()
            try:
                found: set[str] = set()
                for start in range(0, len(keys), 1000):
                    found.update(await store.get_many(op.name, keys[start:start + 1000], op.store.ttl_s))
                return found
            finally:
                await store.close()

        keyed: list[tuple[str, dict]] = []
        for batch in batches:
            for row in batch.to_pylist():
                key = call.request_key(row)
                if key is not None:
                    keyed.append((key, row))
        found = asyncio.run(look_up([k for k, _ in keyed])) if keyed and op.store is not None else set()
        to_call = prompt = 0
        for key, row in keyed:
            if key in found:
                continue
            to_call += 1
            if tokens:
                prompt += prompt_tokens(op.call, row) or 0
        yield pa.RecordBatch.from_pylist([{"found": len(found), "to_call": to_call, "prompt_tokens": prompt}],
                                         schema=_COSTS)


def estimate_one(op: C.Enrich, df, *, sample: int, latency_s: float | None, tasks: int,
                 completion: float | None = None) -> Estimate:
    """Count what one ENRICH will do over the DataFrame that reaches it (`completion`: the mean
    completion tokens of a recording's answers, None: assumed from RETURNS)."""
    from pyspark.sql import functions as F

    from . import names

    notes: list[str] = []
    rows = df.count()
    columns = _key_columns(op, df.columns)
    keys_df = df.select(*[names.col(c) for c in columns]).distinct()
    distinct = keys_df.count()
    model = isinstance(op.call, _MODELS)
    stored, sampled = None, False
    per_key_prompt = None
    # a call per row (no STORE, no CACHE): the tokens of every row's request, else of each key's
    per_row = model and op.store is None and op.cache is None
    source, total = (df.select(*[names.col(c) for c in columns]), rows) if per_row else (keys_df, distinct)
    if (op.store is not None or model) and total:
        probe = source
        if total > sample:
            probe, sampled = source.sample(fraction=min(1.0, sample / total), seed=7), True
        probed = probe.count() if sampled else total
        costs = probe.mapInArrow(_KeyCosts(op), "found long, to_call long, prompt_tokens long").agg(
            F.sum("found").alias("found"), F.sum("to_call").alias("to_call"),
            F.sum("prompt_tokens").alias("prompt_tokens")).collect()[0]
        found = costs["found"] or 0
        if op.store is not None:
            stored = round(found * total / probed) if sampled and probed else int(found)
        if costs["to_call"]:
            per_key_prompt = costs["prompt_tokens"] / costs["to_call"]
    if op.store is not None and stored is None:
        stored = 0
    if op.store is not None:
        calls = distinct - (stored or 0)
    elif op.cache is not None:
        calls = distinct
        notes.append(f"CACHE is per worker process: up to {distinct} calls per process")
    else:
        calls = rows
    elements = calls        # elements sent (a BATCH call carries many): what tokens are counted on
    if op.batch is not None:
        calls = math.ceil(calls / op.batch.size)
        notes.append(f"BATCH {op.batch.size}: calls are batches")
    prompt = completion_tokens = basis = None
    if model:
        prompt = round((per_key_prompt or 0) * elements)
        if isinstance(op.call, C.ModelCall):
            if completion is not None:
                per_call, basis = completion, "the recording's answers"
            else:
                per_call, basis = assumed_completion(op), "assumed: the RETURNS object as JSON"
            completion_tokens = round(per_call * elements)
            notes.append(f"tokens: prompt {prompt} + completion {completion_tokens} "
                         f"({per_call:.0f} a call, {basis}); retries not counted")
    retries = op.retry.attempts if op.retry else 0
    if retries and calls:
        notes.append(f"RETRY {retries}: up to {calls * (1 + retries)} calls if every call fails and is retried")
    rate = op.rate.per_second if op.rate else None
    seconds = _time(op, calls, latency_s, tasks, rate)
    if op.tier == "BATCH":
        notes.append(f"TIER BATCH: {elements} lines in provider batches, answered within the provider's "
                     "completion window (up to 24h); no online call unless a line fails")
    budget = op.budget
    money, tiers = _money(op, calls if op.tier != "BATCH" else elements, prompt, completion_tokens)
    return Estimate(operator=op.name, line=op.line, rows=rows, distinct_keys=distinct, stored_keys=stored,
                    sampled=sampled, calls=calls, tasks=tasks, capacity=op.capacity, rate=rate,
                    latency_s=latency_s, seconds=seconds, budget=budget.amount if budget else None,
                    budget_unit=budget.unit if budget else None, notes=notes,
                    prompt_tokens=prompt, completion_tokens=completion_tokens, completion_basis=basis,
                    retries=retries, tier=op.tier, money_usd=money, tiers_usd=tiers)


def _time(op: C.Enrich, calls: int, latency_s: float | None, tasks: int, rate: float | None) -> float | None:
    """Seconds the calls take: waves of CAPACITY x tasks calls, one latency each, and at least
    calls / RATE (None: no latency given and no RATE, or TIER BATCH: the provider's time)."""
    if op.tier == "BATCH":
        return None
    if latency_s is not None:
        per_element = math.ceil(calls / (op.capacity * max(1, tasks))) * latency_s   # waves of calls
        return max(per_element, calls / rate) if rate else per_element
    return calls / rate if rate else None


def _money(op: C.Enrich, calls: int, prompt: int | None, completion: int | None
           ) -> tuple[float | None, dict[str, float] | None]:
    """What the calls cost at the operator's PRICE, and at each tier's (None: no PRICE)."""
    from dslc.runtime.limits.money import price_at

    if op.price is None:
        return None, None
    tiers = {tier: price_at(op, tier).cost(calls, prompt or 0, completion or 0) for tier in C.TIERS}
    return tiers[op.tier], tiers
