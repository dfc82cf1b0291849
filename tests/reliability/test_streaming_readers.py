"""A reader of a STREAMING sink folder never sees a partial micro-batch (#12).

APPEND sinks (Spark's streaming file sink): Spark's own streaming file source
(`spark.readStream.format('parquet').schema(...).load(folder)`) reads the sink folder in this test
process while the dslc job (its own process group, ENRICH then MATCH against broadcast rules)
writes several micro-batches; then the job is SIGKILLed while one task of a micro-batch has already
written its part file and the other is still working. The reader must see every group of rows whole
or not at all, each row once, nothing of the killed batch until a restart commits it.

MODE COMPLETE into files is not a streaming file sink (the folder is replaced, not appended to): a
reader resolves the sink path's link once and reads that version with `spark.read`
(docs/streaming.md); each read is one whole result, while the writer runs micro-batches.
"""
from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pytest
from reliability_support import (
    JobProcess,
    committed_files,
    compile_job,
    wait_for,
    write_jsonl,
)

pytestmark = [pytest.mark.spark, pytest.mark.slow]

APPEND_FLOW = """PIPELINE readers MODE STREAMING CHECKPOINT 'chk' TRIGGER EVERY 500ms;
SET spark.ui.enabled = 'false';
SET spark.sql.shuffle.partitions = 2;
SOURCE events FROM JSON 'in/events/' SCHEMA (id STRING, grp STRING, user STRING, amount DOUBLE);
SOURCE limit_updates FROM JSON 'in/limits/' SCHEMA (user STRING, op STRING, max_amount DOUBLE);
BROADCAST limits FROM limit_updates KEY user OP op;
STREAM scored = ENRICH events WITH PYTHON 'lookup:score' RETURNS (score DOUBLE) ASYNC ORDERED CAPACITY 4 TIMEOUT 600s;
STREAM over = MATCH scored AGAINST limits AS l WHERE scored.user = l.user AND scored.amount >= l.max_amount;
SINK over TO PARQUET 'out/over';
"""

# rows whose id ends in '-hold' wait while the file HOLD exists (the task stays in the middle of its work)
LOOKUP = """
import asyncio
import os

HOLD = {hold!r}

async def score(row):
    while row["id"].endswith("-hold") and os.path.exists(HOLD):
        await asyncio.sleep(0.05)
    return {{"score": row["amount"] / 10}}
"""

SCHEMA = "id STRING, grp STRING, user STRING, amount DOUBLE, score DOUBLE, max_amount DOUBLE"
SIZE = 30


def _group(grp: str, n: int = SIZE, hold: bool = False) -> list[dict]:
    rows = [{"id": f"{grp}-{i:03d}", "grp": grp, "user": "ab"[i % 2], "amount": float(i)} for i in range(n)]
    if hold:
        rows[-1]["id"] += "-hold"
    return rows


class _Reader:
    """Spark's streaming file source on a sink folder, in the test's own session: what every
    reader micro-batch saw, as (id, grp) rows."""

    def __init__(self, spark, folder: Path, checkpoint: Path):
        self.batches: list[list[tuple[str, str]]] = []
        stream = spark.readStream.format("parquet").schema(SCHEMA).load(str(folder))
        self.query = (stream.writeStream.trigger(processingTime="200 milliseconds")
                      .option("checkpointLocation", str(checkpoint))
                      .foreachBatch(lambda df, _id: self.batches.append([(r.id, r.grp) for r in df.collect()]))
                      .start())

    def rows(self) -> list[tuple[str, str]]:
        return [row for batch in list(self.batches) for row in batch]

    def groups(self) -> Counter:
        return Counter(grp for _, grp in self.rows())


def _assert_whole_batches(reader: _Reader, sizes: dict[str, int]) -> None:
    """Each reader micro-batch holds every group it touches whole; no row is seen twice."""
    for batch in list(reader.batches):
        seen = Counter(grp for _, grp in batch)
        assert all(seen[g] == sizes[g] for g in seen), f"a partial group in one reader micro-batch: {dict(seen)}"
    ids = Counter(i for i, _ in reader.rows())
    assert not [i for i, c in ids.items() if c > 1], "a row was read twice"


def test_streaming_file_source_on_a_sink_never_sees_a_partial_micro_batch(spark, tmp_path):
    hold = tmp_path / "HOLD"
    (tmp_path / "lookup.py").write_text(LOOKUP.format(hold=str(hold)))
    (tmp_path / "pipeline.flow").write_text(APPEND_FLOW)
    job = compile_job(tmp_path / "pipeline.flow", tmp_path / "job.py")
    job_once = compile_job(tmp_path / "pipeline.flow", tmp_path / "job_once.py", trigger="available-now")
    sink = tmp_path / "out" / "over"
    sink.mkdir(parents=True)
    write_jsonl(tmp_path / "in/limits/1.json", [{"user": "a", "op": "set", "max_amount": 0.0},
                                                {"user": "b", "op": "set", "max_amount": 0.0}])
    sizes = {g: SIZE for g in ("g0", "g1", "g2", "g3")} | {"k": 2 * SIZE}
    reader = _Reader(spark, sink, tmp_path / "reader_chk")
    writer = JobProcess(job, tmp_path / "run1.log")
    restart = None
    try:
        # several micro-batches while the reader runs: one group per file, one file at a time
        for grp in ("g0", "g1", "g2", "g3"):
            write_jsonl(tmp_path / f"in/events/{grp}.json", _group(grp))
            wait_for(lambda grp=grp: reader.groups()[grp] == SIZE, 180, f"the reader sees {grp}", writer)
            _assert_whole_batches(reader, sizes)

        # one micro-batch of two files (two tasks); one row of the second waits: kill mid-batch
        hold.touch()
        committed_before = set(committed_files(sink))
        for part in ("k1", "k2"):      # hidden names first, so both files arrive in one listing
            rows = [dict(r, grp="k", id=f"{part}-{r['id']}") for r in _group("g", hold=part == "k2")]
            write_jsonl(tmp_path / f"in/events/.{part}.json", rows)
        for part in ("k1", "k2"):
            os.replace(tmp_path / f"in/events/.{part}.json", tmp_path / f"in/events/{part}.json")
        written = lambda: [p for p in sink.glob("part-*") if p not in committed_before]   # noqa: E731
        wait_for(written, 180, "the first task of the micro-batch wrote its part file", writer)
        writer.kill()
        assert set(committed_files(sink)) == committed_before, "the killed micro-batch was committed"
        assert written(), "no partial micro-batch on disk: the test would prove nothing"
        reader.query.processAllAvailable()
        assert reader.groups()["k"] == 0, "the reader saw part of the killed micro-batch"
        _assert_whole_batches(reader, sizes)

        # restart on the same checkpoint: the batch is replayed and committed once
        hold.unlink()
        restart = JobProcess(job_once, tmp_path / "run2.log")
        assert restart.wait(240) == 0, restart.output()[-4000:]
        reader.query.processAllAvailable()
    finally:
        for process in (writer, restart):
            if process is not None:
                process.kill()
        reader.query.stop()
    _assert_whole_batches(reader, sizes)
    assert reader.groups() == Counter(sizes)
    assert len(spark.read.parquet(str(sink)).collect()) == sum(sizes.values())   # the batch reader agrees


COMPLETE_FLOW = """PIPELINE totals MODE STREAMING CHECKPOINT 'chk' TRIGGER EVERY 300ms;
SET spark.ui.enabled = 'false';
SET spark.sql.shuffle.partitions = 2;
SOURCE events FROM JSON 'in/events/' SCHEMA (id STRING, grp STRING, user STRING, amount DOUBLE);
STREAM per_group = SELECT grp, count(*) AS n FROM events GROUP BY grp;
SINK per_group TO PARQUET 'out/per_group' MODE COMPLETE;
"""


def test_a_complete_sink_read_through_its_link_is_always_one_whole_result(spark, tmp_path):
    (tmp_path / "pipeline.flow").write_text(COMPLETE_FLOW)
    job = compile_job(tmp_path / "pipeline.flow", tmp_path / "job.py")
    link = tmp_path / "out" / "per_group"
    groups = [f"g{i}" for i in range(6)]
    results: list[dict[str, int]] = []

    def read() -> dict[str, int]:
        """What docs/streaming.md tells a reader to do: resolve the link once, read that version."""
        if not link.is_symlink():
            return {}
        rows = spark.read.parquet(os.path.realpath(link)).collect()
        assert len(rows) == len({r.grp for r in rows}), "a group twice: increments, not one result"
        results.append({r.grp: r.n for r in rows})
        return results[-1]

    writer = JobProcess(job, tmp_path / "run.log")
    try:
        for n, grp in enumerate(groups):     # one micro-batch per group; read while each one runs
            write_jsonl(tmp_path / f"in/events/{grp}.json", _group(grp))
            wait_for(lambda n=n: len(read()) == n + 1, 180, f"the result with {grp}", writer)
    finally:
        writer.kill()
    whole = [{g: SIZE for g in groups[:m]} for m in range(len(groups) + 1)]
    assert [r for r in results if r not in whole] == [], "a read saw half of a result"
    assert results[-1] == whole[-1]
    assert len({tuple(sorted(r)) for r in results}) == len(groups)   # every version was read at least once
