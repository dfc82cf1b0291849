"""The probe: one partition's left rows, in Arrow batches, joined to their k best right rows.

Each output row is the left row's columns, the right row as a struct named after the right side's
alias (so `d.title` in the query reads it, as MATCH's streaming join does) and the right columns
the left side does not have under their own names (so an unqualified `title` reads them too). A
left row whose vector is NULL, holds a NULL or finds no right row with a non-NULL ranking is
dropped by an inner join and kept once, its right side NULL, by LEFT OUTER, as Spark's rewrite
does. Columnar throughout: vectors leave Arrow as one NumPy matrix, rows are gathered by `take`.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from .arrays import check_dimensions, vectors
from .index import VectorIndex


@dataclass(frozen=True)
class ProbeSpec:
    """What a probe does, fixed by the compiler."""

    operator: str           # the STREAM's name, for metrics and errors
    line: int
    vector: str             # the left column holding the query vectors
    k: int
    outer: bool             # LEFT OUTER: unmatched left rows kept
    alias: str              # the right side's alias: the struct column's name
    flat: tuple[str, ...]   # right columns also given under their own names


class Probe:
    """Joins left batches to the index's right rows; counts what it did."""

    def __init__(self, spec: ProbeSpec, index: VectorIndex, right: pa.Table):
        self.spec, self.index, self.right = spec, index, right
        self.struct_type = pa.struct([right.schema.field(i) for i in range(right.num_columns)])
        self.rows_in = self.probes = self.matches = self.unmatched = 0
        self.tally: dict[str, int] = {"candidates": 0}    # right rows ranked exactly, over all probes
        self.seconds = 0.0

    def join(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        started = time.perf_counter()
        self.rows_in += batch.num_rows
        matrix, complete, lengths = vectors(batch.column(batch.schema.get_field_index(self.spec.vector)))
        if complete.any() or (lengths >= 0).any():
            check_dimensions(self.index.function, lengths, self.index.dim, self.index.lengths)
        rows = np.nonzero(complete)[0]
        found = self.index.search(matrix[rows], self.spec.k, self.tally) if len(rows) else []
        matched = dict(zip(rows.tolist(), found))
        left: list[np.ndarray] = []
        right: list[np.ndarray] = []
        for row in range(batch.num_rows):
            hits = matched.get(row)
            if hits is not None and len(hits):
                left.append(np.full(len(hits), row, np.int64))
                right.append(hits)
            elif self.spec.outer:
                left.append(np.array([row], np.int64))
                right.append(np.array([-1], np.int64))
        left_rows = np.concatenate(left) if left else np.zeros(0, np.int64)
        right_rows = np.concatenate(right) if right else np.zeros(0, np.int64)
        self.probes += len(rows)
        self.matches += int((right_rows >= 0).sum())
        self.unmatched += int((right_rows < 0).sum())
        out = self._output(batch, left_rows, right_rows)
        self.seconds += time.perf_counter() - started
        return out

    def _output(self, batch: pa.RecordBatch, left_rows: np.ndarray, right_rows: np.ndarray) -> pa.RecordBatch:
        missing = right_rows < 0
        taken = pa.array(np.where(missing, 0, right_rows), pa.int64(), mask=missing)
        columns = [self.right.column(i).take(taken).combine_chunks() for i in range(self.right.num_columns)]
        struct = pa.StructArray.from_arrays(columns, fields=list(self.struct_type), mask=pa.array(missing))
        arrays = [batch.column(i).take(pa.array(left_rows)) for i in range(batch.num_columns)]
        names = list(batch.schema.names) + [self.spec.alias] + list(self.spec.flat)
        arrays += [struct] + [columns[self.right.schema.get_field_index(name)] for name in self.spec.flat]
        return pa.RecordBatch.from_arrays(arrays, names=names)

    def metrics(self) -> dict[str, dict[str, float]]:
        """This task's figures, by operator: rows in, rows out, probes and their time."""
        return {self.spec.operator: {"elements_in": self.rows_in, "elements_out": self.matches + self.unmatched,
                                     "probes": self.probes, "candidates": self.tally["candidates"],
                                     "matches": self.matches,
                                     "probe_seconds": round(self.seconds, 6)}}


def probe_batches(spec: ProbeSpec, index: VectorIndex, right: pa.Table, batches: Iterator[pa.RecordBatch],
                  report: Callable[[dict], None] | None = None) -> Iterator[pa.RecordBatch]:
    """One partition through the probe; its figures reported at the end (also after a failure)."""
    probe = Probe(spec, index, right)
    try:
        for batch in batches:
            out = probe.join(batch)
            if out.num_rows:
                yield out
    finally:
        if report is not None:
            report(probe.metrics())
