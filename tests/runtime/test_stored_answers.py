"""Stored answers looked up in the chain's pass (runtime/core/stored_answers.py): a row matches the
answer whose request columns equal its own, as Spark's join on them would match it; a NULL request
column matches nothing; the RETURNS columns come with the row."""
from __future__ import annotations

import pyarrow as pa

from dslc.runtime.core import stored_answers
from dslc.runtime.core.stored_answers import KEY_PREFIX, StoredAnswers


def _file(tmp_path, table: pa.Table) -> str:
    path = str(tmp_path / "answers.arrow")
    with pa.OSFile(path, "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    return path


ANSWERS = pa.table({f"{KEY_PREFIX}0": pa.array(["c1", "c2", "c2"], pa.string()),
                    f"{KEY_PREFIX}1": pa.array([7, 7, -1], pa.int32()),
                    "tier": pa.array(["gold", None, "bronze"], pa.string()),
                    "score": pa.array([1.5, 2.0, 3.0], pa.float64())})


def test_rows_match_on_every_request_column_and_take_their_returns(tmp_path):
    stored = stored_answers.stored_answers(_file(tmp_path, ANSWERS), 2)
    rows = pa.RecordBatch.from_pydict({"id": ["a", "b", "c", "d", "e"],
                                       "customer_id": ["c2", "c1", "c1", None, "c2"],
                                       "region": pa.array([-1, 7, -1, 7, None], pa.int32())})
    positions = stored.positions(rows, ("customer_id", "region"))
    assert positions == [2, 0, -1, -1, -1]       # (c1, -1) was never answered; NULLs match nothing
    hits = pa.array([p >= 0 for p in positions])
    answered = stored.answered(rows.filter(hits), pa.array([p for p in positions if p >= 0], pa.int64()))
    assert answered.to_pylist() == [
        {"id": "a", "customer_id": "c2", "region": -1, "tier": "bronze", "score": 3.0},
        {"id": "b", "customer_id": "c1", "region": 7, "tier": "gold", "score": 1.5},
    ]


def test_one_request_column_and_booleans(tmp_path):
    table = pa.table({f"{KEY_PREFIX}0": pa.array([True], pa.bool_()), "label": pa.array(["yes"])})
    stored = StoredAnswers(table, 1)
    rows = pa.RecordBatch.from_pydict({"flag": pa.array([False, True, None], pa.bool_())})
    assert stored.positions(rows, ("flag",)) == [-1, 0, -1]


def test_a_worker_reads_a_file_once_and_keeps_only_the_newest(tmp_path, monkeypatch):
    monkeypatch.setattr(stored_answers, "_LOADED", {})
    paths = []
    for index in range(stored_answers._KEPT + 1):
        folder = tmp_path / str(index)
        folder.mkdir()
        paths.append(_file(folder, ANSWERS))
    first = stored_answers.stored_answers(paths[0], 2)
    assert stored_answers.stored_answers(paths[0], 2) is first          # read once
    for path in paths[1:]:
        stored_answers.stored_answers(path, 2)
    assert list(stored_answers._LOADED) == paths[1:]                    # the oldest let go
