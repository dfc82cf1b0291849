"""The call for an ENRICH: the kind its WITH clause names, wrapped in what the job asks for.

A new kind of call registers its config class here (`KINDS`); a new wrapper composes in
`compose`. Neither the operator nor the resolver changes: they see one `EnrichCall`, and ask it
what its wrappers add through that interface (`counts_own_calls`, `gathers`, `known_answer`...),
never which wrapper it is.
"""
from __future__ import annotations

from collections.abc import Callable

from dslc.runtime.config import EmbeddingCall, Enrich, HttpCall, ModelCall, PythonCall, SqlCall
from dslc.runtime.metrics import OperatorMetrics
from dslc.runtime.wrappers import provider_batch, recording
from dslc.runtime.wrappers.batching import BatchingCall
from dslc.runtime.wrappers.stored import StoredCall

from .base import EnrichCall
from .embedding import EmbeddingEnrichCall
from .http import HttpEnrichCall
from .model import ModelEnrichCall
from .python import PythonEnrichCall
from .sql import SqlEnrichCall

KINDS: dict[type, Callable[[Enrich], EnrichCall]] = {
    PythonCall: PythonEnrichCall,
    HttpCall: HttpEnrichCall,
    ModelCall: ModelEnrichCall,
    EmbeddingCall: EmbeddingEnrichCall,
    SqlCall: SqlEnrichCall,
}


def build_call(config: Enrich, metrics: OperatorMetrics | None = None) -> EnrichCall:
    """The whole call of an ENRICH: its kind, recorded or replayed when the job says so, TIER
    BATCH's pass unless a recording answers, then BATCH and STORE (`compose`), counting into
    `metrics` (the operator's; a fresh set when none is given)."""
    kind = KINDS.get(type(config.call))
    if kind is None:
        raise TypeError(f"unsupported ENRICH call {config.call!r}")
    call = recording.wrap(kind(config), config)
    if not isinstance(call, recording.ReplayCall):   # a replay answers what provider batches would
        call = provider_batch.wrap(call, config)
    return compose(call, config, metrics if metrics is not None else OperatorMetrics(config.name))


def compose(call: EnrichCall, config: Enrich, metrics: OperatorMetrics) -> EnrichCall:
    """`call` bound to the operator's `metrics`, inside BATCH's gathering and the answer store
    (outermost: a stored answer never joins a batch)."""
    call.bind_metrics(metrics)
    if config.batch is not None:
        call = BatchingCall(call, config, metrics)
    if config.store is not None:
        call = StoredCall(call, config, metrics, counts_calls=config.batch is None)
    return call
