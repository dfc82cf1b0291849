"""A warm rerun's stored answers found in the chain's own Python pass, by a dictionary lookup.

On a local master (every Python worker on the driver's machine) the driver writes the answers
that can be joined (runtime/spark/stored_join.py) to one Arrow file; each Python worker reads it
once (workers are reused across tasks) into a dictionary from request columns to the row of
their answer. A batch's rows are then looked up as they pass: a hit takes its RETURNS columns
from the file, Arrow to Arrow, and never reaches the operator. This costs less than Spark's join
of the same answers (bench/RESULTS.md, section 13), and the rows cross to Python once anyway.

The match is Spark's join's: the request columns equal (Python's equality of the values Arrow
gives for the same Spark types), and a NULL request column matches nothing (no answer is stored
for one: wrappers/joinable.py).
"""
from __future__ import annotations

import threading
from typing import Any

import pyarrow as pa

KEY_PREFIX = "__dslc_k"       # the file's request columns: __dslc_k0, __dslc_k1, ...

_LOADED: dict[str, StoredAnswers] = {}
_KEPT = 4                     # files a worker keeps loaded (workers outlive jobs: the REPL, a test session)
_LOCK = threading.Lock()


class StoredAnswers:
    """One operator's joinable answers: the key of each, and its RETURNS columns."""

    def __init__(self, table: pa.Table, keys: int) -> None:
        columns = [table.column(f"{KEY_PREFIX}{i}").to_pylist() for i in range(keys)]
        found = columns[0] if keys == 1 else zip(*columns)
        self.rows: dict[Any, int] = {key: row for row, key in enumerate(found)}
        self.returns = table.drop_columns([f"{KEY_PREFIX}{i}" for i in range(keys)]).combine_chunks()

    def positions(self, batch: pa.RecordBatch, columns: tuple[str, ...]) -> list[int]:
        """Each row's position in the answers, -1 for a row without a stored answer."""
        values = [batch.column(c).to_pylist() for c in columns]
        found = values[0] if len(values) == 1 else zip(*values)
        get = self.rows.get
        return [get(key, -1) for key in found]

    def answered(self, batch: pa.RecordBatch, positions: pa.Array) -> pa.RecordBatch:
        """`batch` (rows that all have an answer, at `positions`) with the RETURNS columns added."""
        taken = self.returns.take(positions)
        arrays = [*batch.columns, *(taken.column(i).combine_chunks() for i in range(taken.num_columns))]
        return pa.RecordBatch.from_arrays(arrays, names=[*batch.schema.names, *taken.column_names])


def stored_answers(path: str, keys: int) -> StoredAnswers:
    """The answers in the Arrow file at `path`, read once per process."""
    with _LOCK:
        loaded = _LOADED.get(path)
        if loaded is None:
            while len(_LOADED) >= _KEPT:
                _LOADED.pop(next(iter(_LOADED)))     # the oldest: a job that has ended, most likely
            with pa.OSFile(path, "rb") as source:     # read into memory the table owns
                loaded = _LOADED[path] = StoredAnswers(pa.ipc.open_file(source).read_all(), keys)
        return loaded
