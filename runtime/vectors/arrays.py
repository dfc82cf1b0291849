"""ARRAY<FLOAT> columns (Arrow lists) as NumPy matrices, without a Python object per element."""
from __future__ import annotations

import numpy as np
import pyarrow as pa


class VectorDimensionMismatch(ValueError):
    """Spark's VECTOR_DIMENSION_MISMATCH: two vectors of a pair have different lengths."""

    def __init__(self, function: str, left: int, right: int):
        super().__init__(f"[VECTOR_DIMENSION_MISMATCH] Vectors passed to `{function}` must have the same dimension, "
                         f"but got {left} and {right}")


def vectors(column: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(matrix, complete, lengths) of a list column: `matrix` holds the rows of the most common
    length (float32, zeros elsewhere), `complete` is True for a row that is not NULL, has no NULL
    element and has that length, `lengths` is each row's length (-1 for NULL)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    n = len(column)
    if n == 0:
        return np.zeros((0, 0), np.float32), np.zeros(0, bool), np.zeros(0, np.int64)
    null_rows = column.is_null().to_numpy(zero_copy_only=False)
    offsets = column.offsets.to_numpy().astype(np.int64)
    lengths = np.where(null_rows, -1, offsets[1:] - offsets[:-1])
    present = lengths[lengths >= 0]
    dim = int(np.bincount(present).argmax()) if len(present) else 0
    flat_values = column.values
    values = flat_values.to_numpy(zero_copy_only=False)
    values = np.asarray(values, dtype=np.float32)
    element_null = flat_values.is_null().to_numpy(zero_copy_only=False) if flat_values.null_count else None
    complete = lengths == dim
    if element_null is not None:
        holes = np.concatenate([[0], np.cumsum(element_null)])
        complete &= (holes[offsets[1:]] - holes[offsets[:-1]]) == 0
    matrix = np.zeros((n, dim), np.float32)
    rows = np.nonzero(complete)[0]
    if len(rows) and dim:
        take = offsets[rows][:, None] + np.arange(dim)[None, :]
        matrix[rows] = values[take]
    return matrix, complete, lengths


def check_dimensions(function: str, lengths: np.ndarray, dim: int | None, right_lengths: frozenset[int]) -> None:
    """Spark's check, pair by pair: any two non-NULL vectors of different lengths fail the query."""
    if not right_lengths:
        return
    if len(right_lengths) > 1:
        first, second = sorted(right_lengths)[:2]
        raise VectorDimensionMismatch(function, first, second)
    (right,) = right_lengths
    wrong = lengths[(lengths >= 0) & (lengths != right)]
    if len(wrong):
        raise VectorDimensionMismatch(function, int(wrong[0]), right)
