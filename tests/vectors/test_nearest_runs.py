"""NEAREST BY through dslc end to end: the compiled job probes the right side's index instead of
Spark's cross product (the plan says so), and writes the rows Spark's own NEAREST BY gives: EXACT
exactly, APPROX with recall@k >= 0.95; STREAMING (which Spark refuses) writes BATCH's rows."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
from jobs import run_flow  # noqa: E402

from dslc.compiler.pipeline import check_file, compile_file  # noqa: E402

pytestmark = pytest.mark.spark
DIM, QUESTIONS, DOCS = 16, 400, 3000

FLOW = """\
PIPELINE nearest MODE {mode} CHECKPOINT 'chk' {trigger};
SOURCE questions FROM JSON 'questions/' SCHEMA (qid BIGINT, embedding ARRAY<FLOAT>);
SOURCE docs FROM JSON 'docs/' SCHEMA (doc_id BIGINT, title STRING, embedding ARRAY<FLOAT>);
STREAM exact = SELECT q.qid, d.doc_id, d.title, vector_l2_distance(q.embedding, d.embedding) AS distance
  FROM questions q LEFT JOIN docs d EXACT NEAREST 5 BY DISTANCE vector_l2_distance(q.embedding, d.embedding);
STREAM approx = SELECT q.qid, doc_id
  FROM questions q JOIN docs d APPROX NEAREST 10 BY SIMILARITY vector_cosine_similarity(q.embedding, d.embedding);
SINK exact TO JSON 'out/exact';
SINK approx TO JSON 'out/approx';
"""


def _vectors(rng, n):
    centres = rng.normal(size=(40, DIM))
    return (centres[rng.integers(0, 40, n)] + 0.4 * rng.normal(size=(n, DIM))).astype(np.float32)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    folder = tmp_path_factory.mktemp("nearest_data")
    rng = np.random.default_rng(9)
    (folder / "questions").mkdir()
    (folder / "docs").mkdir()
    questions = [{"qid": i, "embedding": None if i % 50 == 7 else v.tolist()}
                 for i, v in enumerate(_vectors(rng, QUESTIONS))]
    docs = [{"doc_id": j, "title": f"t{j}", "embedding": v.tolist()} for j, v in enumerate(_vectors(rng, DOCS))]
    for part in range(2):
        (folder / "questions" / f"p{part}.json").write_text(
            "".join(json.dumps(r) + "\n" for r in questions[part::2]))
    (folder / "docs" / "d.json").write_text("".join(json.dumps(r) + "\n" for r in docs))
    return folder


def _run(folder: Path, data: Path, mode: str) -> dict[str, list[dict]]:
    for name in ("questions", "docs"):
        (folder / name).symlink_to(data / name)
    trigger = "TRIGGER AVAILABLE NOW" if mode == "STREAMING" else ""
    flow = folder / "pipeline.flow"
    flow.write_text(FLOW.format(mode=mode, trigger=trigger))
    run_flow(flow)
    return {name: [json.loads(line) for f in sorted((folder / "out" / name).glob("part-*.json"))
                   for line in f.read_text().splitlines()] for name in ("exact", "approx")}


def _spark_rows(spark, data: Path, sql: str) -> list[dict]:
    session = spark.newSession()
    for name, ddl in (("questions", "qid BIGINT, embedding ARRAY<FLOAT>"),
                      ("docs", "doc_id BIGINT, title STRING, embedding ARRAY<FLOAT>")):
        session.read.schema(ddl).json(str(data / name)).createOrReplaceTempView(name)
    return [r.asDict() for r in session.sql(sql).collect()]


def test_the_plan_probes_an_index_instead_of_a_cross_product(data, tmp_path):
    flow = tmp_path / "pipeline.flow"
    flow.write_text(FLOW.format(mode="BATCH", trigger=""))
    code = compile_file(flow, job_folder=str(tmp_path))
    assert code.count("nearest.index_side(") == 2 and code.count("nearest.probe(") == 2
    assert "NEAREST" not in "".join(line for line in code.splitlines() if "spark.sql" in line or "'SELECT" in line)
    assert check_file(flow).node("exact").schema == check_file(flow).node("exact").schema


@pytest.fixture(scope="module")
def batch(spark, data, tmp_path_factory):
    return _run(tmp_path_factory.mktemp("batch"), data, "BATCH")


def test_exact_writes_sparks_own_rows(spark, data, batch):
    theirs = _spark_rows(spark, data, "SELECT q.qid, d.doc_id, d.title, vector_l2_distance(q.embedding, d.embedding) "
                                      "AS distance FROM questions q LEFT JOIN docs d EXACT NEAREST 5 BY DISTANCE "
                                      "vector_l2_distance(q.embedding, d.embedding)")
    key = lambda r: (r["qid"], r.get("doc_id") if r.get("doc_id") is not None else -1)  # noqa: E731
    as_float = lambda rows: sorted([{k: float(np.float32(v)) if k == "distance" else v  # noqa: E731
                                     for k, v in r.items() if v is not None} for r in rows], key=key)
    assert as_float(batch["exact"]) == as_float(theirs)      # FLOATs, as Spark writes and reads them
    assert sum(1 for r in batch["exact"] if "doc_id" not in r) == QUESTIONS // 50   # NULL vectors kept once


def test_approx_keeps_95_percent_of_the_true_top_k(spark, data, batch):
    truth = _spark_rows(spark, data, "SELECT q.qid, d.doc_id FROM questions q JOIN docs d EXACT NEAREST 10 BY "
                                     "SIMILARITY vector_cosine_similarity(q.embedding, d.embedding)")
    want: dict[int, set] = {}
    for r in truth:
        want.setdefault(r["qid"], set()).add(r["doc_id"])
    got: dict[int, set] = {}
    for r in batch["approx"]:
        got.setdefault(r["qid"], set()).add(r["doc_id"])
    assert set(got) == set(want)
    assert np.mean([len(got[q] & want[q]) / len(want[q]) for q in want]) >= 0.95


def test_streaming_writes_batchs_rows(spark, data, batch, tmp_path):
    streaming = _run(tmp_path, data, "STREAMING")
    key = lambda r: json.dumps(r, sort_keys=True)  # noqa: E731
    assert sorted(streaming["exact"], key=key) == sorted(batch["exact"], key=key)
    assert sorted(streaming["approx"], key=key) == sorted(batch["approx"], key=key)
