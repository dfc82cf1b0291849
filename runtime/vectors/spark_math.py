"""Spark's vector functions to the last bit, on NumPy arrays.

Spark 4.3 computes `vector_l2_distance`, `vector_inner_product` and `vector_cosine_similarity` in
FLOAT (VectorFunctionImplUtils): eight products at a time, each block summed left to right and then
added to the running sum, the remaining elements one by one; the L2 distance is
`(float) Math.sqrt(sumSq)`, the cosine `dot / (float) Math.sqrt(norm1Sq * norm2Sq)` and NULL below
Float.MIN_NORMAL. NumPy's float32 operations round each step the same way (no fused multiply-add),
so `values` gives exactly the FLOATs Spark compares, and EXACT ranks pairs as Spark does, near ties
included. Here every vector is complete: a NULL vector or element makes a NULL ranking, which the
caller leaves out before.
"""
from __future__ import annotations

import numpy as np

L2, COSINE, INNER = "l2", "cosine", "inner"
FUNCTIONS = {"vector_l2_distance": L2, "vector_cosine_similarity": COSINE, "vector_inner_product": INNER}
_MIN_NORMAL = np.float32(np.finfo(np.float32).tiny)


def _blocked_sum(terms: np.ndarray) -> np.ndarray:
    """Σ over the last axis in Spark's order: blocks of 8 summed left to right, then the rest."""
    dim = terms.shape[-1]
    total = np.zeros(terms.shape[:-1], dtype=np.float32)
    full = dim // 8 * 8
    for start in range(0, full, 8):
        block = terms[..., start]
        for offset in range(1, 8):
            block = block + terms[..., start + offset]
        total = total + block
    for i in range(full, dim):
        total = total + terms[..., i]
    return total


def values(metric: str, left: np.ndarray, right: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Spark's FLOAT of `metric` for each pair of `left[..., :]` and `right[..., :]` (broadcast
    against each other, float32), and where Spark's answer is NULL (the cosine of a vector whose
    norm is below Float.MIN_NORMAL). NaN stays NaN, which Spark orders above every number."""
    with np.errstate(all="ignore"):
        if metric == L2:
            diff = left - right
            distance = np.sqrt(_blocked_sum(diff * diff).astype(np.float64)).astype(np.float32)
            return distance, np.zeros(distance.shape, dtype=bool)
        dot = _blocked_sum(left * right)
        if metric == INNER:
            return dot, np.zeros(dot.shape, dtype=bool)
        norms = (_blocked_sum(left * left) * _blocked_sum(right * right)).astype(np.float32)
        product = np.sqrt(norms.astype(np.float64)).astype(np.float32)
        return (dot / product).astype(np.float32), product < _MIN_NORMAL


def relative_error(metric: str, dim: int) -> float:
    """A generous bound of how far Spark's FLOAT (or a float32 product of matrices) can be from the
    exact value, relative to the scale `scale()` gives: (dim + 8) rounding steps of 2^-24, times 8."""
    return 8.0 * (dim + 8) * 2.0 ** -24 * (2 if metric == COSINE else 1)
