"""Which approximate-nearest-neighbour library the NEAREST BY index uses (runtime/vectors/): usearch,
hnswlib and faiss-cpu measured on this machine, the same HNSW graph (M = 16, 200 candidates while
building) and the same search breadth (128), on 20,000 x 64-dim float32 vectors, 20,000 queries,
k = 10, 2 threads each: build time, query time and recall@10 against the exact answer (NumPy,
float64). Two data sets: clustered (200 centres, the shape of real embeddings) and plain Gaussian
(no structure, the hard case). Standalone, not part of the `bench` run; the libraries not chosen
are not dependencies of dslc, so install them first:

    .venv/bin/python -m pip install usearch hnswlib faiss-cpu
    .venv/bin/python -m bench.vector_libraries
"""
from __future__ import annotations

import statistics
import time

import numpy as np

N, DIM, K, THREADS = 20_000, 64, 10, 2
M, BUILD_BREADTH, SEARCH_BREADTH = 16, 200, 128


def data(kind: str, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    if kind == "gaussian":
        return (rng.normal(size=(N, DIM)).astype(np.float32), rng.normal(size=(N, DIM)).astype(np.float32))
    centres = rng.normal(size=(200, DIM))
    draw = lambda: (centres[rng.integers(0, 200, N)] + 0.35 * rng.normal(size=(N, DIM))).astype(np.float32)  # noqa: E731
    return draw(), draw()


def exact(base: np.ndarray, queries: np.ndarray) -> np.ndarray:
    base64 = base.astype(np.float64)
    norms = (base64 ** 2).sum(1)
    found = np.empty((len(queries), K), dtype=np.int64)
    for start in range(0, len(queries), 1000):
        distances = norms[None, :] - 2 * queries[start:start + 1000].astype(np.float64) @ base64.T
        found[start:start + 1000] = np.argpartition(distances, K, axis=1)[:, :K]
    return found


def recall(found: np.ndarray, truth: np.ndarray) -> float:
    return float(np.mean([len(set(a) & set(b)) / K for a, b in zip(found, truth)]))


def usearch(base, queries):
    from usearch.index import Index

    started = time.perf_counter()
    index = Index(ndim=DIM, metric="l2sq", dtype="f32", connectivity=M, expansion_add=BUILD_BREADTH,
                  expansion_search=SEARCH_BREADTH)
    index.add(np.arange(N), base, threads=THREADS)
    built = time.perf_counter()
    keys = index.search(queries, K, threads=THREADS).keys
    return built - started, time.perf_counter() - built, keys


def hnswlib(base, queries):
    import hnswlib as lib

    started = time.perf_counter()
    index = lib.Index(space="l2", dim=DIM)
    index.init_index(max_elements=N, ef_construction=BUILD_BREADTH, M=M)
    index.add_items(base, np.arange(N), num_threads=THREADS)
    built = time.perf_counter()
    index.set_ef(SEARCH_BREADTH)
    labels, _ = index.knn_query(queries, k=K, num_threads=THREADS)
    return built - started, time.perf_counter() - built, labels


def faiss(base, queries):
    import faiss as lib

    lib.omp_set_num_threads(THREADS)
    started = time.perf_counter()
    index = lib.IndexHNSWFlat(DIM, M)
    index.hnsw.efConstruction = BUILD_BREADTH
    index.add(base)
    built = time.perf_counter()
    index.hnsw.efSearch = SEARCH_BREADTH
    _, labels = index.search(queries, K)
    return built - started, time.perf_counter() - built, labels


def numpy_exact(base, queries):
    started = time.perf_counter()
    labels = exact(base, queries)
    return 0.0, time.perf_counter() - started, labels


LIBRARIES = {"usearch": usearch, "hnswlib": hnswlib, "faiss-cpu": faiss, "exact (NumPy, float64)": numpy_exact}


def main(repeats: int = 3) -> None:
    rng = np.random.default_rng(7)
    print(f"{N} x {DIM}-dim, {N} queries, k = {K}, {THREADS} threads, median of {repeats} interleaved runs")
    print("| data | library | build s | query s | recall@10 |\n|---|---|---|---|---|")
    for kind in ("clustered", "gaussian"):
        base, queries = data(kind, rng)
        truth = exact(base, queries)
        runs: dict[str, list] = {name: [] for name in LIBRARIES}
        for _ in range(repeats):
            for name, run in LIBRARIES.items():
                runs[name].append(run(base, queries))
        for name, results in runs.items():
            build = statistics.median(r[0] for r in results)
            query = statistics.median(r[1] for r in results)
            print(f"| {kind} | {name} | {build:.2f} | {query:.2f} | {recall(results[-1][2], truth):.3f} |")


if __name__ == "__main__":
    main()
