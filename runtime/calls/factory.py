"""The call for an ENRICH: the kind its WITH clause names, wrapped in what the job asks for.

A new kind of call registers its config class here (`KINDS`); a new wrapper composes in
`build_call`. Neither the operator nor the resolver changes: they see one `EnrichCall`.
"""
from __future__ import annotations

from collections.abc import Callable

from dslc.runtime.config import EmbeddingCall, Enrich, HttpCall, ModelCall, PythonCall, SqlCall
from dslc.runtime.wrappers import provider_batch, recording

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


def build_call(config: Enrich) -> EnrichCall:
    """The adapter for an ENRICH's WITH clause (wrapped when the job records or replays calls, and
    for TIER BATCH's pass unless a recording answers)."""
    kind = KINDS.get(type(config.call))
    if kind is None:
        raise TypeError(f"unsupported ENRICH call {config.call!r}")
    call = recording.wrap(kind(config), config)
    return call if isinstance(call, recording.ReplayCall) else provider_batch.wrap(call, config)
