"""NEAREST BY against BROADCAST state (spec "Vectors"): "Where the right side is a SOURCE or
BROADCAST state (bounded), dslc runs it with an index built once per version of that side (rebuilt
when the BROADCAST changes) ... in BATCH and in STREAMING ... with the same result."""
from __future__ import annotations

import json
import threading
import time

import numpy as np
import pytest

from contract.support import by
from dslc.compiler.diagnostics import CompileError
from dslc.compiler.pipeline import check_text

pytestmark = pytest.mark.spark

PIPE = """
SOURCE questions FROM JSON 'in/questions/' SCHEMA (qid BIGINT, embedding ARRAY<FLOAT>);
SOURCE doc_updates FROM JSON 'in/docs/' SCHEMA (doc_id BIGINT, op STRING, title STRING, embedding ARRAY<FLOAT>);
BROADCAST docs FROM doc_updates KEY doc_id OP op;
STREAM matched = SELECT q.qid, d.doc_id, title, vector_l2_distance(q.embedding, d.embedding) AS distance
  FROM questions q LEFT JOIN docs d EXACT NEAREST 3 BY DISTANCE vector_l2_distance(q.embedding, d.embedding);
STREAM similar = SELECT q.qid, d.doc_id
  FROM questions q JOIN docs d APPROX NEAREST 2 BY SIMILARITY vector_cosine_similarity(q.embedding, d.embedding);
SINK matched TO PARQUET 'out/matched';
SINK similar TO PARQUET 'out/similar';
"""


def _docs_and_questions(seed: int = 3, docs: int = 60, questions: int = 40, dim: int = 8):
    rng = np.random.default_rng(seed)
    d = rng.normal(size=(docs, dim)).astype(np.float32)
    q = rng.normal(size=(questions, dim)).astype(np.float32)
    updates = [{"doc_id": j, "op": "set", "title": f"t{j}", "embedding": v.tolist()} for j, v in enumerate(d)]
    updates += [{"doc_id": j, "op": "delete"} for j in range(0, docs, 7)]        # deleted: never matched
    updates += [{"doc_id": 1, "op": "set", "title": "moved", "embedding": q[0].tolist()}]   # upserted
    asked = [{"qid": i, "embedding": None if i == 5 else v.tolist()} for i, v in enumerate(q)]
    return updates, asked, d, q


def _expected(d: np.ndarray, q: np.ndarray, k: int = 3) -> list[tuple]:
    """The top k by float64 L2 over the state's entries (the data has no near ties)."""
    live = {j: d[j] for j in range(len(d)) if j % 7}
    live[1] = q[0]
    keys = sorted(live)
    matrix = np.stack([live[j] for j in keys]).astype(np.float64)
    rows = []
    for i, v in enumerate(q):
        if i == 5:
            rows.append((i, None))
            continue
        order = np.argsort(((matrix - v.astype(np.float64)) ** 2).sum(axis=1))[:k]
        rows += [(i, keys[j]) for j in order]
    return sorted(rows, key=lambda r: (r[0], -1 if r[1] is None else r[1]))


def test_a_broadcast_is_indexed_and_both_modes_write_the_same_rows(flow, capfd):
    updates, asked, d, q = _docs_and_questions()
    flow.rows_file("in/docs/1.json", updates)
    flow.rows_file("in/questions/1.json", asked)
    code = flow.run(PIPE, "BATCH")
    assert code.count("nearest_state.state_side(") == 2
    assert not [line for line in code.splitlines() if "NEAREST" in line and not line.strip().startswith("#")]
    batch = {name: flow.read(f"out/{name}") for name in ("matched", "similar")}
    got = sorted(by(batch["matched"], "qid", "doc_id"), key=lambda r: (r[0], -1 if r[1] is None else r[1]))
    assert got == _expected(d, q)
    assert ("moved" in {r["title"] for r in batch["matched"] if r["qid"] == 0})
    assert len(batch["similar"]) == 2 * (len(asked) - 1)
    for name in ("matched", "similar"):
        (flow.folder / "out" / name).rename(flow.folder / "out" / f"{name}_batch")
    code = flow.run(PIPE, "STREAMING")
    assert "nearest_state.probe_state(" in code and "pinned.PinnedStates" in code
    for name in ("matched", "similar"):
        cols = ("qid", "doc_id", "title", "distance") if name == "matched" else ("qid", "doc_id")
        assert by(flow.read(f"out/{name}"), *cols) == by(batch[name], *cols), name
    assert "NEAREST BY index (state version" in capfd.readouterr().err
    figures = json.loads(sorted((flow.folder / "target" / "metrics").glob("*.json"))[-1].read_text())["operators"]
    probed = figures["matched"]
    assert probed["elements_in"] == len(asked) and probed["probes"] == len(asked) - 1
    assert probed["candidates"] >= 3 * probed["probes"] and probed["index_rows"] == 51 and probed["index_builds"] >= 1


EVERY = """PIPELINE every MODE STREAMING CHECKPOINT 'chk' TRIGGER EVERY 2s;
SOURCE questions FROM JSON 'in/questions/' SCHEMA (qid BIGINT, embedding ARRAY<FLOAT>);
SOURCE doc_updates FROM JSON 'in/docs/' SCHEMA (doc_id BIGINT, op STRING, title STRING, embedding ARRAY<FLOAT>);
BROADCAST docs FROM doc_updates KEY doc_id OP op;
STREAM matched = SELECT q.qid, d.doc_id
  FROM questions q JOIN docs d EXACT NEAREST 1 BY DISTANCE vector_l2_distance(q.embedding, d.embedding);
SINK matched TO PARQUET 'out/matched';
"""


def test_a_broadcast_update_rebuilds_the_index_for_the_next_micro_batch(flow):
    """Each round adds doc r at exactly the vector of question r, which arrives a second later:
    question r's nearest doc is r only if its micro-batch probes an index of the new version."""
    rng = np.random.default_rng(5)
    vectors = rng.normal(size=(5, 8)).astype(np.float32) * 10
    (flow.folder / "in/questions").mkdir(parents=True)
    flow.move_in("in/docs", "0.json", [{"doc_id": 0, "op": "set", "title": "t0", "embedding": vectors[0].tolist()}])
    failures: list[BaseException] = []

    def run() -> None:
        try:
            flow.run(EVERY)
        except BaseException as error:     # noqa: BLE001 - reported by the test below
            failures.append(error)

    job = threading.Thread(target=run, daemon=True)
    job.start()
    rounds = 4
    try:
        for r in range(1, rounds + 1):
            time.sleep(1.3)
            flow.move_in("in/docs", f"{r}.json",
                     [{"doc_id": r, "op": "set", "title": f"t{r}", "embedding": vectors[r].tolist()}])
            time.sleep(1.0)
            flow.move_in("in/questions", f"{r}.json", [{"qid": r, "embedding": vectors[r].tolist()}])
            deadline = time.monotonic() + 60
            while len(flow.committed("out/matched")) < r:
                assert not failures and time.monotonic() < deadline, [str(f) for f in failures]
                time.sleep(0.3)
    finally:
        for query in flow.spark.streams.active:
            query.stop()
        job.join(60)
    assert by(flow.read("out/matched"), "qid", "doc_id") == [(r, r) for r in range(1, rounds + 1)]
    reports = sorted((flow.folder / "target" / "metrics").glob("*.json"))
    matched = json.loads(reports[-1].read_text())["operators"]["matched"]
    # a version per update (doc 0 is version 1, doc r version r + 1), each indexed when first met
    assert matched["index_version"] == rounds + 1 and matched["index_builds"] >= rounds, matched


def test_a_state_read_other_than_by_an_indexed_nearest_by_is_refused():
    text = "PIPELINE p MODE BATCH;" + PIPE.replace("vector_cosine_similarity(q.embedding, d.embedding)",
                                                     "vector_cosine_similarity(q.embedding, d.embedding) + 1")
    with pytest.raises(CompileError) as caught:
        check_text(text)
    codes = [(p.code, p.message) for p in caught.value.diagnostics]
    assert codes == [("E0209", "'docs' is a broadcast state, but this NEAREST BY join needs a source or stream")]
    text = "PIPELINE p MODE BATCH;" + PIPE + "STREAM plain = SELECT * FROM docs;\nSINK plain TO CONSOLE;"
    with pytest.raises(CompileError) as caught:
        check_text(text)
    assert [p.code for p in caught.value.diagnostics] == ["E0209"]
    assert "NEAREST k BY" in caught.value.diagnostics[0].hint
