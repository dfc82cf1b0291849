"""APPROX NEAREST 10 BY DISTANCE over 20,000 x 20,000 64-dim vectors: dslc's compiled job (the right
side indexed once, the left probed per partition) against Spark's own lowering of the same SQL (a
cross product and a top-k aggregate), measured in one run on the same session and files; the
speedup and dslc's recall@10 against the exact 10 nearest (NumPy, by brute force: the rows Spark's
EXACT form gives). Standalone (Spark's side takes many minutes and, at 20,000 x 20,000, spills its
sort of the cross product to more local disk than this machine has: the run then reports Spark's
error and how long it ran before it, and the speedup as a lower bound):

    .venv/bin/python -m bench.nearest_join            # 20,000 x 20,000
    .venv/bin/python -m bench.nearest_join 5000       # smaller
"""
from __future__ import annotations

import json
import os
import runpy
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from dslc.compiler.pipeline import compile_file

DIM, K = 64, 10
WARM_UP_ROWS = 300     # a first run of each on this many rows, not measured
HEAP = "6g"            # local mode's heap, for both sides
FLOW = """\
PIPELINE nearest_bench;
SET spark.sql.shuffle.partitions = 2;
SOURCE questions FROM PARQUET 'questions/' SCHEMA (qid BIGINT, embedding ARRAY<FLOAT>);
SOURCE docs FROM PARQUET 'docs/' SCHEMA (doc_id BIGINT, embedding ARRAY<FLOAT>);
STREAM matched = SELECT q.qid, d.doc_id
  FROM questions q JOIN docs d APPROX NEAREST 10 BY DISTANCE vector_l2_distance(q.embedding, d.embedding);
SINK matched TO PARQUET 'out/dslc' MODE OVERWRITE;
"""
SPARK_SQL = ("SELECT q.qid, d.doc_id FROM questions q JOIN docs d "
             "APPROX NEAREST 10 BY DISTANCE vector_l2_distance(q.embedding, d.embedding)")


def write_data(folder: Path, n: int) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(7)
    centres = rng.normal(size=(200, DIM))
    for name, key in (("questions", "qid"), ("docs", "doc_id")):
        vectors = (centres[rng.integers(0, 200, n)] + 0.35 * rng.normal(size=(n, DIM))).astype(np.float32)
        (folder / name).mkdir(parents=True)
        for part in range(2):
            rows = range(part, n, 2)
            pq.write_table(pa.table({key: pa.array(list(rows), pa.int64()),
                                     "embedding": pa.array([vectors[i].tolist() for i in rows],
                                                           pa.list_(pa.float32()))}),
                           folder / name / f"part{part}.parquet")


def main(n: int = 20_000) -> dict:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    folder = Path(tempfile.mkdtemp(prefix="dslc-nearest-bench-"))
    try:
        return _measure(folder, n)
    finally:
        shutil.rmtree(folder, ignore_errors=True)      # Spark's spilled cross product: many GB


def _run_both(spark, folder: Path, n: int) -> tuple[float, float, str | None]:
    """dslc's compiled job, then Spark's own SQL, on the same n x n files in `folder`: their seconds,
    and Spark's error if its side failed (its seconds then: how long it ran before failing)."""
    write_data(folder, n)
    flow = folder / "pipeline.flow"
    flow.write_text(FLOW)
    job = folder / "job.py"
    job.write_text(compile_file(flow, job_folder=str(folder)))
    started = time.perf_counter()
    runpy.run_path(str(job), run_name="__main__")
    dslc_seconds = time.perf_counter() - started
    session = spark.newSession()
    for name in ("questions", "docs"):
        session.read.parquet(str(folder / name)).createOrReplaceTempView(name)
    started = time.perf_counter()
    try:
        session.sql(SPARK_SQL).write.mode("overwrite").parquet(str(folder / "out" / "spark"))
    except Exception as exc:  # noqa: BLE001 - Spark's own plan out of disk or memory: what the bench reports
        return dslc_seconds, time.perf_counter() - started, _condition(exc)
    return dslc_seconds, time.perf_counter() - started, None


def _condition(exc: Exception) -> str:
    """The first line of Spark's error that names its cause (SPILL_OUT_OF_MEMORY, No space left ...)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    for line in lines:
        if "[" in line and "]" in line and "Error" in line or "No space left" in line or "OutOfMemory" in line:
            return line[:300]
    return (lines[0] if lines else type(exc).__name__)[:300]


def exact_nearest(folder: Path) -> dict[int, set[int]]:
    """Each question's K nearest docs by L2 distance over the files in `folder`, by brute force."""
    import pyarrow.parquet as pq

    def read(name: str, key: str) -> tuple[np.ndarray, np.ndarray]:
        table = pq.read_table(folder / name)
        return (table.column(key).to_numpy(),
                np.stack(table.column("embedding").to_pylist()).astype(np.float64))

    qids, questions = read("questions", "qid")
    doc_ids, docs = read("docs", "doc_id")
    docs_norm = (docs * docs).sum(axis=1)
    out: dict[int, set[int]] = {}
    for start in range(0, len(qids), 1000):
        block = questions[start:start + 1000]
        distances = docs_norm[None, :] - 2.0 * block @ docs.T         # |q|^2 is the same along a row
        nearest = np.argpartition(distances, K, axis=1)[:, :K]
        for qid, row in zip(qids[start:start + 1000], nearest):
            out[int(qid)] = {int(doc_ids[i]) for i in row}
    return out


def _measure(folder: Path, n: int) -> dict:
    from pyspark.sql import SparkSession

    # Spark's cross product and top-k hold many rows per group: at 6,000 x 6,000 its plan runs out
    # of local mode's default 1 GB heap (dslc's job needs far less); both get the same heap
    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.driver.memory", HEAP).getOrCreate())
    _run_both(spark, folder / "warm-up", WARM_UP_ROWS)     # both sides then start from a warm JVM
    dslc_seconds, spark_seconds, spark_error = _run_both(spark, folder / "measured", n)
    ours: dict[int, set[int]] = {}
    for row in spark.read.parquet(str(folder / "measured" / "out" / "dslc")).collect():
        ours.setdefault(row.qid, set()).add(row.doc_id)
    exact = exact_nearest(folder / "measured")
    recall = float(np.mean([len(ours.get(q, set()) & found) / len(found) for q, found in exact.items()]))
    result = {"rows": n, "dim": DIM, "k": K, "dslc_seconds": round(dslc_seconds, 2),
              "spark_seconds": round(spark_seconds, 2), "recall_at_10": round(recall, 4)}
    if spark_error is None:
        theirs: dict[int, set[int]] = {}
        for row in spark.read.parquet(str(folder / "measured" / "out" / "spark")).collect():
            theirs.setdefault(row.qid, set()).add(row.doc_id)
        result["speedup"] = round(spark_seconds / dslc_seconds, 1)
        result["recall_at_10_vs_spark"] = round(float(np.mean(
            [len(ours.get(q, set()) & found) / len(found) for q, found in theirs.items()])), 4)
    else:      # Spark's plan gave up: it ran this long, so the speedup is at least this
        result.update(spark_error=spark_error, speedup_at_least=round(spark_seconds / dslc_seconds, 1))
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20_000)
