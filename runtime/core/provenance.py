"""`PROVENANCE AS col`: the struct each output row of an ENRICH gets, made when its element
resolves (core/resolution.py asks `Stamper.stamp`).

What the service said about its answer (the model as answered, its system_fingerprint, an HTTP
status, when it came) travels in the answer as its note (schema/provenance.py); what only the
operator knows is added here: where the answer came from this time (a call, the worker's cache,
the answer store, a BATCH request, a replay or a `dslc test` answer), how many calls this
element made and how long it took, the operator, its line and a hash of the request key.
Static fields (the database, the TIER) come from the configuration. Nothing here holds a
secret: a URL is noted as written (`${NAME}`), masked, and a key is hashed.
"""
from __future__ import annotations

import datetime as dt
import time
from typing import Any

from dslc.runtime.calls.base import EnrichCall
from dslc.runtime.config import Enrich, SqlCall
from dslc.runtime.core.operator import Row
from dslc.runtime.schema.provenance import NOTE, fields, sha256

_UTC = dt.timezone.utc
#: sources that made no call for this element: it spent no attempt
_NO_CALL = ("store", "cache")
#: the fields `Stamper.stamp` makes itself for every row
_MADE = frozenset({"source", "key", "attempts", "latency_ms", "answered_at"})


def _tier(config: Enrich) -> str | None:
    """The operator's TIER in lower case (None: the provider's default)."""
    tier = getattr(config, "tier", None) or getattr(config.call, "tier", None)
    return str(tier).lower() if tier else None


def fixed(config: Enrich) -> dict[str, Any]:
    """The struct's fields that are the operator's own, the same in every row: its name and line,
    its TIER (MODEL, EMBEDDING) and its database (SQL)."""
    values: dict[str, Any] = {"operator": config.name, "line": config.line}
    if any(name == "tier" for name, _ in fields(config.call)):
        values["tier"] = _tier(config)
    if isinstance(config.call, SqlCall):
        values["database"] = config.call.database
    return values


class Stamper:
    """Makes one ENRICH's PROVENANCE struct for each output row (one per operator instance)."""

    def __init__(self, config: Enrich, call: EnrichCall) -> None:
        assert config.provenance is not None
        self.column = config.provenance
        self.names = tuple(name for name, _ in fields(config.call))
        self.fixed = fixed(config)
        # the fields the answer's note gives (the others are the operator's, or made here)
        self.said = tuple(name for name in self.names if name not in _MADE and name not in self.fixed)
        self.request_key = call.request_key
        self.batched = config.batch is not None

    def stamp(self, out: Row, row: Row, result: dict[str, Any], attempts: int, began: float | None,
              cached: bool) -> Row:
        """`out` (the output row of `result`) with its provenance struct; `began`: when the element's
        first attempt started (perf_counter), None when it made no call of its own."""
        said = result.get(NOTE)
        said = said if isinstance(said, dict) else {}
        source = "cache" if cached else said.get("source") or ("batch" if self.batched else "call")
        if source in _NO_CALL:
            attempts = 0
        key = self.request_key(row)
        at = said.get("answered_at")
        struct = {name: said.get(name) for name in self.said}
        struct.update(self.fixed)
        struct["source"] = source
        struct["key"] = sha256(key) if key is not None else None
        struct["attempts"] = attempts
        struct["latency_ms"] = round((time.perf_counter() - began) * 1000, 3) if began is not None else None
        struct["answered_at"] = dt.datetime.fromtimestamp(at if at is not None else time.time(), _UTC)
        out[self.column] = struct
        return out
