"""The index of the right side's vectors, and the search that ranks pairs exactly as Spark does.

Every answer is ranked by Spark's own FLOAT values (spark_math.py), ties by the right row's
position (Spark keeps the first rows it meets among equal rankings), NaN above every number, and
pairs whose ranking is NULL (a NULL vector or element, a zero vector's cosine) never match. What
differs is how candidates are found:

- EXACT: every right row, by one float32 product of matrices (BLAS), keeping each candidate whose
  coarse value is within twice the error bound of the k-th best: Spark's FLOATs cannot order any
  other row before it. Those few are then valued as Spark values them and ranked.
- APPROX: an HNSW graph (faiss-cpu, chosen by bench/vector_libraries.py: the best recall for its
  query time among usearch, hnswlib and faiss on this machine, and its serialisation comes with
  it) finds k + 24 candidates per row, ranked the same way. An L2 distance BY DISTANCE and a
  cosine BY SIMILARITY (at unit length: L2 again) use it. An inner product runs as EXACT: the
  graph over the usual L2 reduction of it kept 0.89 of the top 10 on clustered vectors, and one
  product of matrices is exact and cheap; so does a ranking the graph cannot serve (a distance BY
  SIMILARITY: the farthest rows).

Rows whose vector has an infinite or NaN element are candidates of every search.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from . import spark_math
from .spark_math import COSINE, INNER, L2

EXTRA = 24                 # APPROX: candidates beyond k per row, re-ranked exactly
CHUNK = 512                # rows of a coarse product at once (CHUNK x right rows floats)
SEARCH_BREADTH = 256       # HNSW's efSearch (at least 4 x the candidates asked for)
GRAPH_DEGREE, BUILD_BREADTH = 32, 200


@dataclass(frozen=True)
class IndexInfo:
    """What explain and the metrics say of an index."""

    kind: str               # "hnsw (faiss)" or "exact (NumPy)"
    rows: int               # right rows
    indexed: int            # rows with a complete vector
    dim: int
    build_seconds: float
    bytes: int


class VectorIndex:
    """The right side's vectors (all rows, in order), searchable by a ranking and a direction."""

    def __init__(self, matrix: np.ndarray, complete: np.ndarray, lengths: frozenset[int], *, metric: str,
                 similarity: bool, approx: bool, function: str):
        started = time.perf_counter()
        self.metric, self.similarity, self.approx, self.function = metric, similarity, approx, function
        self.lengths = lengths
        self.matrix = np.ascontiguousarray(matrix, dtype=np.float32)
        self.dim = self.matrix.shape[1] if self.matrix.ndim == 2 else 0
        finite = np.isfinite(self.matrix).all(axis=1) if len(self.matrix) else np.zeros(0, bool)
        usable = complete.copy()
        norms = np.sqrt((self.matrix.astype(np.float64) ** 2).sum(axis=1)) if len(self.matrix) else np.zeros(0)
        if metric == COSINE:
            usable &= ~(finite & (norms < 1e-30))           # a zero vector's cosine is NULL
        self.special = np.nonzero(usable & ~finite)[0]      # every search's candidates
        self.ids = np.nonzero(usable & finite)[0]
        self.rows = self.matrix[self.ids]
        self.row_norms = norms[self.ids]
        self.scale = float(self.row_norms.max()) if len(self.ids) else 0.0
        self.graph = None
        self._graph_bytes: np.ndarray | None = None
        if approx and self.natural and metric != INNER and len(self.ids) > EXTRA:
            self.graph = _hnsw(self._searchable(self.rows), metric)
        self.info = IndexInfo("hnsw (faiss)" if self.graph is not None else "exact (NumPy)", len(self.matrix),
                              int(usable.sum()), self.dim, time.perf_counter() - started, self._size())

    @property
    def natural(self) -> bool:
        """The nearest rows are the best ones: a distance BY DISTANCE, a similarity BY SIMILARITY."""
        return (self.metric == L2) != self.similarity

    def _searchable(self, rows: np.ndarray, queries: bool = False) -> np.ndarray:
        """The vectors the graph holds (or is asked about), compared by L2 distance: a cosine's at
        unit length, where the nearest is the most similar."""
        rows = rows.astype(np.float64)
        if self.metric == COSINE:
            norms = np.sqrt((rows ** 2).sum(axis=1, keepdims=True))
            rows = rows / np.where(norms > 0, norms, 1)
        return np.ascontiguousarray(rows, dtype=np.float32)

    def _size(self) -> int:
        graph = 0
        if self.graph is not None:
            import faiss

            graph = int(faiss.serialize_index(self.graph).nbytes)
        return int(self.matrix.nbytes + graph)

    # -- pickling: the graph travels as faiss's own bytes ------------------------------------
    def __getstate__(self):
        state = self.__dict__.copy()
        if self.graph is not None:
            import faiss

            state["_graph_bytes"] = faiss.serialize_index(self.graph)
        state["graph"] = None
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        if self._graph_bytes is not None:
            import faiss

            self.graph = faiss.deserialize_index(self._graph_bytes)
            self.graph.hnsw.efSearch = SEARCH_BREADTH

    # -- search ------------------------------------------------------------------------------
    def search(self, queries: np.ndarray, k: int, tally: dict[str, int] | None = None) -> list[np.ndarray]:
        """For each query (a complete vector of this index's dimension), the positions of its k
        best right rows, best first (fewer when fewer rows have a non-NULL ranking). `tally`
        (the caller's: the index is shared by the tasks of a worker) counts the candidates ranked."""
        if not len(queries):
            return []
        if not len(self.ids) and not len(self.special):
            return [np.zeros(0, np.int64)] * len(queries)
        queries = np.ascontiguousarray(queries, dtype=np.float32)
        found: list[np.ndarray] = []
        for start in range(0, len(queries), CHUNK):
            chunk = queries[start:start + CHUNK]
            candidates = self._candidates(chunk, k)
            if tally is not None:
                tally["candidates"] = tally.get("candidates", 0) + sum(len(c) for c in candidates)
            found.extend(self._rank(chunk, candidates, k))
        return found

    def _candidates(self, queries: np.ndarray, k: int) -> list[np.ndarray]:
        finite = np.isfinite(queries).all(axis=1)
        if self.graph is not None:
            wanted = min(len(self.ids), k + EXTRA)
            self.graph.hnsw.efSearch = max(SEARCH_BREADTH, 4 * wanted)
            _, labels = self.graph.search(self._searchable(queries, queries=True), wanted)
            rows = [self.ids[found[found >= 0]] for found in labels]
        else:
            rows = self._exact_candidates(queries, k)
        every = self.ids
        return [np.concatenate([row if ok else every, self.special]) for row, ok in zip(rows, finite)]

    def _exact_candidates(self, queries: np.ndarray, k: int) -> list[np.ndarray]:
        """The rows whose coarse value is within twice the error bound of each query's k-th best."""
        n = len(self.ids)
        if n <= k + EXTRA:
            return [self.ids] * len(queries)
        products = queries @ self.rows.T                            # float32 BLAS
        query_norms = np.sqrt((queries.astype(np.float64) ** 2).sum(axis=1))
        error = spark_math.relative_error(self.metric, self.dim)
        if self.metric == L2:
            worse = (query_norms[:, None] ** 2 + self.row_norms[None, :] ** 2) - 2.0 * products
            margin = 6 * error * (query_norms ** 2 + self.scale ** 2)
        elif self.metric == INNER:
            worse = -products.astype(np.float64)
            margin = 2 * error * query_norms * self.scale
        else:
            scale = np.maximum(query_norms[:, None] * self.row_norms[None, :], 1e-300)
            worse = -products / scale
            margin = np.full(len(queries), 2 * error)
        if self.similarity == (self.metric == L2):                  # the farthest rows are the best
            worse = -worse
        kth = np.partition(worse, k - 1, axis=1)[:, k - 1]
        limit = kth + 2 * margin
        cap = min(n, k + EXTRA)
        nearest = np.argpartition(worse, cap - 1, axis=1)[:, :cap]
        chosen = []
        for row, (picks, bound) in enumerate(zip(nearest, limit)):
            taken = worse[row, picks]
            if cap < n and taken.max() <= bound:                    # more may lie beyond the cap
                chosen.append(self.ids[np.nonzero(worse[row] <= bound)[0]])
            else:
                chosen.append(self.ids[picks[taken <= bound]])
        return chosen

    def _rank(self, queries: np.ndarray, candidates: list[np.ndarray], k: int) -> list[np.ndarray]:
        """Spark's FLOATs for each query's candidates; the k best, NULLs left out. Queries with
        many candidates (every row: a query with an infinite element) are ranked one at a time."""
        narrow = 4 * (k + EXTRA) + len(self.special)
        ranked: list[np.ndarray | None] = [None] * len(queries)
        few = [i for i, c in enumerate(candidates) if len(c) <= narrow]
        for i, found in zip(few, self._rank_group(queries[few], [candidates[i] for i in few], k)):
            ranked[i] = found
        for i, found in enumerate(candidates):
            if ranked[i] is None:
                ranked[i] = self._rank_group(queries[i:i + 1], [found], k)[0]
        return ranked

    def _rank_group(self, queries: np.ndarray, candidates: list[np.ndarray], k: int) -> list[np.ndarray]:
        width = max((len(c) for c in candidates), default=0)
        if width == 0:
            return [np.zeros(0, np.int64)] * len(queries)
        padded = np.full((len(queries), width), -1, np.int64)
        for row, found in enumerate(candidates):
            padded[row, :len(found)] = found
        values, null = spark_math.values(self.metric, queries[:, None, :], self.matrix[np.maximum(padded, 0)])
        null |= padded < 0
        nan = np.isnan(values)
        if self.similarity:     # largest first, NaN (above every number) first of all
            first, second = np.where(null, 2, np.where(nan, 0, 1)), -np.nan_to_num(values, nan=0.0)
        else:                   # smallest first, NaN last
            first, second = np.where(null, 2, np.where(nan, 1, 0)), np.nan_to_num(values, nan=0.0)
        order = np.lexsort((padded, second, first), axis=-1)[:, :k]
        best = np.take_along_axis(padded, order, axis=1)
        keep = np.take_along_axis(first, order, axis=1) < 2
        return [row[mask] for row, mask in zip(best, keep)]


def _hnsw(rows: np.ndarray, metric: str):
    import faiss

    graph = faiss.IndexHNSWFlat(rows.shape[1], GRAPH_DEGREE, faiss.METRIC_L2)
    graph.hnsw.efConstruction = BUILD_BREADTH
    graph.add(rows)
    graph.hnsw.efSearch = SEARCH_BREADTH
    return graph
