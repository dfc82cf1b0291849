"""What `PROVENANCE AS col` adds to an ENRICH's rows: one struct column, its fields decided by the
kind of call, and the note an answer carries from the call that made it to the operator.

The compiler types the column from `struct_type(call)`; at run time a call that answers puts a
`note` into each result dict under `NOTE` (a key no RETURNS column can have), so what the service
said about itself (the model as answered, its system_fingerprint, an HTTP status) travels with the
answer through the cache, the answer store and a recording, and a stored answer still reports its
original time and model. `core/provenance.py` makes the struct from the note and what the
operator knows (source, attempts, latency).
"""
from __future__ import annotations

import hashlib
import time
from typing import Any

from dslc.runtime.config import Column, EmbeddingCall, Enrich, HttpCall, ModelCall, SqlCall

#: the result key of the note: not a column name a RETURNS clause can declare
NOTE = "dslc:provenance"

#: where an answer came from, as the `source` field says it
SOURCES = ("call", "store", "cache", "batch", "replay", "test")

_COMMON = (("source", "STRING"), ("operator", "STRING"), ("line", "INT"), ("key", "STRING"),
           ("attempts", "INT"), ("latency_ms", "DOUBLE"), ("answered_at", "TIMESTAMP"))
_MODEL = (("model", "STRING"), ("system_fingerprint", "STRING"), ("prompt_sha256", "STRING"), ("tier", "STRING"))
_HTTP = (("status", "INT"), ("url", "STRING"))
_SQL = (("database", "STRING"),)


def fields(call: Any) -> tuple[tuple[str, str], ...]:
    """The struct's (name, Spark type) fields for an ENRICH of this call kind."""
    if isinstance(call, (ModelCall, EmbeddingCall)):
        return _COMMON + _MODEL
    if isinstance(call, HttpCall):
        return _COMMON + _HTTP
    if isinstance(call, SqlCall):
        return _COMMON + _SQL
    return _COMMON


def struct_type(call: Any) -> str:
    """The Spark SQL type of the PROVENANCE column for this call kind."""
    return "STRUCT<" + ", ".join(f"{name}: {type_}" for name, type_ in fields(call)) + ">"


def added(config: Enrich) -> tuple[Column, ...]:
    """The columns an ENRICH appends to its input's: RETURNS, then the PROVENANCE column."""
    if config.provenance is None:
        return config.returns
    return (*config.returns, Column(config.provenance, struct_type(config.call)))


def notes(config: Enrich) -> bool:
    """Whether this ENRICH's answers carry notes: with PROVENANCE, and for MODEL and EMBEDDING
    with STORE too (the store keeps the model that answered, to notice when it changes)."""
    return config.provenance is not None or (
        config.store is not None and isinstance(config.call, (ModelCall, EmbeddingCall)))


def note(**said: Any) -> dict[str, Any]:
    """A fresh answer's note: what the answer said (fields of `fields`) and when it came."""
    said["answered_at"] = time.time()
    return said


def noted(value: Any, said: dict[str, Any]) -> Any:
    """`value` (a result dict, a list of them, or a miss) with `said` as each result's note; the
    dicts of a fresh answer are the call's own, so they are written in place."""
    if isinstance(value, dict):
        value[NOTE] = said
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, dict):
                item[NOTE] = said
    return value


def marked(value: Any, source: str, answered_at: float | None = None) -> Any:
    """A copy of `value` whose results say they came from `source` (a stored answer, a replay):
    the note they were kept with stays (model, time), `answered_at` filling a time it lacks. The
    value itself is shared (the store's memo, a recording) and never changed."""
    if isinstance(value, dict):
        old = value.get(NOTE)
        said = dict(old) if isinstance(old, dict) else {}
        said["source"] = source
        if answered_at is not None and said.get("answered_at") is None:
            said["answered_at"] = answered_at
        return {**value, NOTE: said}
    if isinstance(value, list):
        return [marked(item, source, answered_at) for item in value]
    return value


def answered(value: Any) -> Any:
    """`value` as the service answered it: its results without their notes (what a model's
    completion said, for counting its tokens)."""
    if isinstance(value, dict):
        return {k: v for k, v in value.items() if k != NOTE}
    if isinstance(value, list):
        return [answered(item) for item in value]
    return value


def sha256(text: str) -> str:
    """The hex SHA-256 of `text` as UTF-8 (a prompt as sent, a request key)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
