"""The NEAREST BY index without Spark (runtime/vectors/): every search ranks by Spark's own FLOATs
(spark_math.py), checked against the same values computed for every pair; APPROX keeps recall@k
of at least 0.95; vectors with NULLs, zero vectors and wrong lengths behave as Spark's functions."""
from __future__ import annotations

import pickle

import numpy as np
import pyarrow as pa
import pytest

from dslc.runtime.vectors import spark_math
from dslc.runtime.vectors.arrays import VectorDimensionMismatch, check_dimensions, vectors
from dslc.runtime.vectors.index import VectorIndex


def brute_force(metric: str, similarity: bool, queries: np.ndarray, rows: np.ndarray, k: int) -> list[list[int]]:
    """Every pair valued as Spark values it, the k best kept, ties by position."""
    values, null = spark_math.values(metric, queries[:, None, :], rows[None, :, :])
    best = []
    for value, skip in zip(values, null):
        ids = np.nonzero(~skip)[0]
        order = np.lexsort((ids, -value[ids] if similarity else value[ids]))
        best.append(ids[order[:k]].tolist())
    return best


def clustered(rng, n: int, dim: int) -> np.ndarray:
    centres = rng.normal(size=(50, dim))
    return (centres[rng.integers(0, 50, n)] + 0.3 * rng.normal(size=(n, dim))).astype(np.float32)


def test_spark_sums_in_blocks_of_eight_in_float():
    """Spark's own order loses the small terms of `1e8 + 1 + ... `: so must the emulation."""
    left = np.array([[1e8] + [1.0] * 8], np.float32)
    right = np.ones((1, 9), np.float32)
    assert spark_math.values("inner", left, right)[0][0] == np.float32(1e8)
    assert spark_math.values("l2", np.array([[3.0, 4.0]], np.float32), np.zeros((1, 2), np.float32))[0][0] == 5.0


@pytest.mark.parametrize("metric", ["l2", "cosine", "inner"])
@pytest.mark.parametrize("similarity", [False, True])
def test_exact_is_every_pair_valued_as_spark_values_it(metric, similarity):
    rng = np.random.default_rng(11)
    rows, queries = rng.normal(size=(2000, 24)).astype(np.float32), rng.normal(size=(300, 24)).astype(np.float32)
    rows[10] = rows[11]                  # a tie: the first position wins
    rows[12] = 0                         # a zero vector: its cosine is NULL, never a match
    index = VectorIndex(rows, np.ones(len(rows), bool), frozenset({24}), metric=metric, similarity=similarity,
                        approx=False, function="f")
    found = [f.tolist() for f in index.search(queries, 7)]
    assert found == brute_force(metric, similarity, queries, rows, 7)
    if metric == "cosine":
        assert all(12 not in f for f in found)


@pytest.mark.parametrize(("metric", "similarity", "kind"), [("l2", False, "hnsw (faiss)"),
                                                             ("cosine", True, "hnsw (faiss)"),
                                                             ("inner", True, "exact (NumPy)")])
def test_approx_finds_at_least_95_percent_of_the_true_top_k(metric, similarity, kind):
    rng = np.random.default_rng(5)
    rows, queries = clustered(rng, 20_000, 32), clustered(rng, 500, 32)
    index = VectorIndex(rows, np.ones(len(rows), bool), frozenset({32}), metric=metric, similarity=similarity,
                        approx=True, function="f")
    assert index.info.kind == kind
    again = pickle.loads(pickle.dumps(index))           # what an executor gets
    found = again.search(queries, 10)
    truth = brute_force(metric, similarity, queries, rows, 10)
    recall = np.mean([len(set(f.tolist()) & set(t)) / 10 for f, t in zip(found, truth)])
    assert recall >= 0.95


def test_a_ranking_the_graph_cannot_serve_runs_exact():
    rng = np.random.default_rng(2)
    rows = rng.normal(size=(500, 8)).astype(np.float32)
    index = VectorIndex(rows, np.ones(500, bool), frozenset({8}), metric="l2", similarity=True, approx=True,
                        function="f")
    assert index.info.kind == "exact (NumPy)"        # the farthest rows: no graph finds them
    queries = rng.normal(size=(20, 8)).astype(np.float32)
    assert [f.tolist() for f in index.search(queries, 3)] == brute_force("l2", True, queries, rows, 3)


def test_nan_ranks_above_every_number_as_in_spark():
    rows = np.array([[0.0, 1.0], [np.nan, 0.0], [0.0, 2.0]], np.float32)
    by_distance = VectorIndex(rows, np.ones(3, bool), frozenset({2}), metric="l2", similarity=False, approx=False,
                              function="f")
    by_similarity = VectorIndex(rows, np.ones(3, bool), frozenset({2}), metric="inner", similarity=True,
                                approx=False, function="f")
    query = np.array([[0.0, 1.0]], np.float32)
    assert by_distance.search(query, 3)[0].tolist() == [0, 2, 1]      # NaN last when smallest wins
    assert by_similarity.search(query, 3)[0].tolist() == [1, 2, 0]    # and first when largest wins


def test_vectors_of_a_list_column_know_nulls_and_lengths():
    column = pa.array([[1.0, 2.0], None, [1.0, None], [3.0, 4.0], [5.0]], pa.list_(pa.float32()))
    matrix, complete, lengths = vectors(column.slice(0, 5))
    assert complete.tolist() == [True, False, False, True, False]
    assert lengths.tolist() == [2, -1, 2, 2, 1]
    assert matrix[3].tolist() == [3.0, 4.0]
    with pytest.raises(VectorDimensionMismatch, match=r"VECTOR_DIMENSION_MISMATCH.*got 1 and 2"):
        check_dimensions("vector_l2_distance", lengths, 2, frozenset({2}))
    check_dimensions("vector_l2_distance", lengths, 2, frozenset())       # no right vector: no pair
