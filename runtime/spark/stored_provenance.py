"""`PROVENANCE AS col` of a warm rerun's joined answers, made on the driver once per stored answer.

A row whose stored answer is joined before the operator (stored_join.py) passes the operator by,
so nothing stamps its struct there (core/provenance.py does it for the rows the operator
resolves). Everything the struct holds for a stored answer is known before the run: the note its
answer was stored with (the model as answered, its system_fingerprint, an HTTP status, when it
came), the stored time when the note has none, the operator's own fields, a hash of the request
key (the store's key of the answer), source `store`, no attempt and no latency of its own. So the
driver makes it for each answer, next to its RETURNS columns, and the joined row carries it like
them: the same struct `Stamper.stamp` makes for an answer the operator finds in the store.

An answer whose note does not fit the struct's types (a service that answered a number for its
model) is left out of the join: the operator, the reference, makes its row.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from dslc.runtime import config as C
from dslc.runtime.core.provenance import fixed
from dslc.runtime.schema.arrow import to_arrow_type
from dslc.runtime.schema.provenance import fields
from dslc.runtime.wrappers.joinable import fits

_UTC = dt.timezone.utc
#: what the struct of an answer found in the store says, whatever its note
_STORED = {"source": "store", "attempts": 0, "latency_ms": None}
_NOT_FOUND = object()

#: (args, output, key, note, at) as the store gives them (`AnswerStore.joinable_noted`)
Entry = tuple[str, str, str, "str | None", float]


class Noted:
    """One ENRICH's PROVENANCE struct for its joinable answers (the driver, before the chain runs)."""

    def __init__(self, op: C.Enrich) -> None:
        assert op.provenance is not None
        self.column = op.provenance
        self.fields = fields(op.call)
        self.type = pa.struct([pa.field(name, to_arrow_type(type_)) for name, type_ in self.fields])
        constant = {**fixed(op), **_STORED}
        # per field: its constant value, or _NOT_FOUND for one the answer's note or key gives
        self._constant = [constant.get(name, _NOT_FOUND) for name, _ in self.fields]
        self._said = [(i, name, type_.upper()) for i, (name, type_) in enumerate(self.fields)
                      if name not in constant and name not in ("key", "answered_at")]
        self._key = [name for name, _ in self.fields].index("key")
        self._at = [name for name, _ in self.fields].index("answered_at")

    def entries(self, stored: Sequence[Entry]) -> list[tuple[str, str, list[Any]]]:
        """(args, output, the struct's values) of each stored answer whose note fits the struct."""
        kept = []
        for args, output, key, note, at in stored:
            values = self._values(key, note, at)
            if values is not None:
                kept.append((args, output, values))
        return kept

    def _values(self, key: str, note: str | None, at: float) -> list[Any] | None:
        said = json.loads(note) if note is not None else {}
        values = list(self._constant)
        for i, name, type_name in self._said:
            value = said.get(name)
            if not fits(value, type_name):
                return None
            values[i] = value
        values[self._key] = hashlib.sha256(key.encode("utf-8")).hexdigest()
        answered = said.get("answered_at")
        answered = at if answered is None else answered
        if type(answered) not in (int, float):
            return None
        values[self._at] = dt.datetime.fromtimestamp(answered, _UTC)
        return values

    def array(self, entries: Sequence[tuple[str, str, list[Any]]]) -> pa.StructArray:
        """The struct column of `entries` (from `entries`), in their order, built field by field."""
        columns = list(zip(*(values for _, _, values in entries))) or [() for _ in self.fields]
        arrays = [pa.array(column, type=field.type) for column, field in zip(columns, self.type)]
        return pa.StructArray.from_arrays(arrays, fields=list(self.type))
