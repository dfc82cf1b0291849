"""`PROVENANCE AS col` of a warm rerun's joined answers, made on the driver once per stored answer.

A row whose stored answer is joined before the operator (stored_join.py) passes the operator by,
so nothing stamps its struct there (core/provenance.py does it for the rows the operator
resolves). Everything the struct holds for a stored answer is known before the run: the note its
answer was stored with (the model as answered, its system_fingerprint, an HTTP status, when it
came), the stored time when the note has none, the operator's own fields, a hash of the request
key (the store's key of the answer), source `store`, no attempt and no latency of its own. So the
driver makes it for each answer, next to its RETURNS columns, and the joined row carries it like
them: the same struct `Stamper.stamp` makes for an answer the operator finds in the store.

The notes are parsed by Arrow in one go and the times made Arrow-native (rounded to the
microsecond as Python's `datetime.fromtimestamp` rounds, half to even); only when Arrow cannot
read a note as the struct's types are they read one by one, and an answer whose note does not fit
(a service that answered a number for its model) is left out of the join: the operator, the
reference, makes its row.
"""
from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from dslc.runtime import config as C
from dslc.runtime.core.provenance import fixed
from dslc.runtime.schema.arrow import to_arrow_type
from dslc.runtime.schema.provenance import fields
from dslc.runtime.wrappers.joinable import fits

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
        self._constant = {**fixed(op), **_STORED}
        # the fields the answer's note gives, with their Spark types
        self._said = [(name, type_.upper()) for name, type_ in self.fields
                      if name not in self._constant and name not in ("key", "answered_at")]
        self._notes = pa.schema([*((name, self.type.field(name).type) for name, _ in self._said),
                                 ("answered_at", pa.float64())])

    def entries(self, stored: Sequence[Entry]) -> list[tuple[str, str, tuple[pa.StructArray, int]]]:
        """(args, output, (the structs, this answer's position in them)) of each stored answer whose
        note fits the struct (`array` takes the structs of the entries kept in the end)."""
        notes = self._parsed([note for _, _, _, note, _ in stored])
        if notes is None:      # Arrow could not: one by one, leaving out the notes that do not fit
            kept = [entry for entry in stored if self._fits(entry[3])]
            notes = self._parsed([note for _, _, _, note, _ in kept], strict=False)
            stored = kept
        structs = self._structs(stored, notes)
        return [(args, output, (structs, i)) for i, (args, output, *_) in enumerate(stored)]

    def array(self, entries: Sequence[tuple[str, str, tuple[pa.StructArray, int]]]) -> pa.StructArray:
        """The struct column of `entries` (from `entries`), in their order."""
        if not entries:
            return pa.array([], self.type)
        structs = entries[0][2][0]
        return structs.take(pa.array([position for _, _, (_, position) in entries], pa.int64()))

    def _parsed(self, notes: list[str | None], strict: bool = True) -> pa.Table | None:
        """The notes' fields as a table (a missing note or field NULL); None when Arrow cannot read
        one as its type (`strict`), else the values read one by one (they fit: `_fits`)."""
        if strict:
            text = "\n".join(note if note is not None else "{}" for note in notes).encode("utf-8")
            options = pa_json.ParseOptions(explicit_schema=self._notes, unexpected_field_behavior="ignore")
            try:
                table = pa_json.read_json(io.BytesIO(text), parse_options=options) if notes else None
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                return None
            return table.select(self._notes.names) if table is not None else self._notes.empty_table()
        said = [json.loads(note) if note is not None else {} for note in notes]
        return pa.table({name: pa.array([s.get(name) for s in said], type=field.type)
                         for name, field in zip(self._notes.names, self._notes)})

    def _fits(self, note: str | None) -> bool:
        said = json.loads(note) if note is not None else {}
        answered = said.get("answered_at")
        return all(fits(said.get(name), type_name) for name, type_name in self._said) and \
            (answered is None or type(answered) in (int, float))

    def _structs(self, stored: Sequence[Entry], notes: pa.Table) -> pa.StructArray:
        count = len(stored)
        at = pa.array([entry[4] for entry in stored], pa.float64())
        noted_at = notes.column("answered_at").combine_chunks()
        columns = {"key": pa.array([hashlib.sha256(entry[2].encode("utf-8")).hexdigest() for entry in stored],
                                   pa.string()),
                   "answered_at": _timestamps(pc.if_else(pc.is_null(noted_at), at, noted_at)),
                   **{name: notes.column(name).combine_chunks() for name, _ in self._said}}
        arrays = []
        for field in self.type:
            if field.name in columns:
                arrays.append(columns[field.name].cast(field.type))
            else:
                arrays.append(pa.repeat(pa.scalar(self._constant[field.name], field.type), count))
        return pa.StructArray.from_arrays(arrays, fields=list(self.type))


def _timestamps(seconds: pa.Array) -> pa.Array:
    """Seconds since the epoch as UTC microseconds, rounded as `datetime.fromtimestamp` rounds
    (the whole seconds and the fraction apart, the fraction's microseconds half to even)."""
    whole = pc.trunc(seconds)
    micros = pc.round(pc.multiply(pc.subtract(seconds, whole), 1e6), 0, round_mode="half_to_even")
    total = pc.add(pc.multiply(whole.cast(pa.int64()), 1_000_000), micros.cast(pa.int64()))
    return total.cast(pa.timestamp("us", tz="UTC"))
