"""SOURCE ... FROM TABLE 'name' and SINK ... TO TABLE 'name' [MODE APPEND | OVERWRITE], as the
contract states them: "use the Spark session's catalog (spark.read.table, readStream.table,
saveAsTable, writeStream.toTable) ... Run locally, tables live in Spark's own catalog under the
pipeline's folder and persist between runs; a sink's missing namespace is created there."
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from contract.support import by

pytestmark = pytest.mark.spark

WRITE = """
SOURCE orders FROM JSON 'in/orders/' SCHEMA (id STRING, amount DOUBLE);
SINK orders TO TABLE 'lake.orders' MODE APPEND;
"""
READ = """
SOURCE orders FROM TABLE 'lake.orders';
STREAM big = SELECT id, amount FROM orders WHERE amount > 10;
SINK big TO PARQUET 'out/big';
"""


def test_a_table_written_by_one_pipeline_is_read_by_another_in_both_modes(flow, mode):
    """The sink creates the namespace `lake` and the table under the pipeline's folder; a second
    run appends (BATCH: all rows again; STREAMING: only the new file); the reader declares no
    SCHEMA: the compiler reads the local table's columns."""
    flow.rows_file("in/orders/1.json", [{"id": "o1", "amount": 5.0}, {"id": "o2", "amount": 50.0}])
    flow.run(WRITE, mode)
    assert (flow.folder / "spark-warehouse/lake.db/orders").is_dir()
    flow.rows_file("in/orders/2.json", [{"id": "o3", "amount": 70.0}])
    flow.run(WRITE, mode)
    expected = [("o2", 50.0), ("o3", 70.0)] + ([("o2", 50.0)] if mode == "BATCH" else [])
    flow.run(_own_checkpoint(mode) + READ)
    assert by(flow.read("out/big"), "id", "amount") == sorted(expected, key=repr)


def test_overwrite_replaces_the_rows_of_a_table(flow):
    flow.rows_file("in/orders/1.json", [{"id": "o1", "amount": 5.0}])
    flow.run(WRITE.replace("MODE APPEND", "MODE OVERWRITE"), "BATCH")
    flow.rows_file("in/orders/1.json", [{"id": "o9", "amount": 90.0}])
    flow.run(WRITE.replace("MODE APPEND", "MODE OVERWRITE"), "BATCH")
    flow.run(READ, "BATCH")
    assert by(flow.read("out/big"), "id") == [("o9",)]


def test_a_table_of_another_pipeline_folder_is_not_read_by_this_one(flow, tmp_path_factory, spark):
    """Two pipelines of one session (a test run, the REPL) each see the table of their own folder:
    the catalog's entry is registered again from the folder of the job that uses it."""
    flow.rows_file("in/orders/1.json", [{"id": "o1", "amount": 50.0}])
    flow.run(WRITE, "BATCH")
    from contract.support import PipelineFolder

    other = PipelineFolder(spark, tmp_path_factory.mktemp("other"))
    other.rows_file("in/orders/1.json", [{"id": "x1", "amount": 60.0}])
    other.run(WRITE, "BATCH")
    flow.run(READ, "BATCH")
    assert by(flow.read("out/big"), "id") == [("o1",)]


def test_a_streaming_table_sink_writes_each_micro_batch_once(flow):
    """writeStream.toTable into the table's folder: a restarted query on the same checkpoint
    writes nothing again; the table's readers follow the committed micro-batches."""
    flow.rows_file("in/orders/1.json", [{"id": "o1", "amount": 50.0}])
    flow.run(WRITE, "STREAMING")
    flow.run(WRITE, "STREAMING")
    log = flow.folder / "spark-warehouse/lake.db/orders/_spark_metadata"
    assert sorted(p.name for p in log.iterdir() if p.name.isdigit()) == ["0"]
    flow.run(READ, "BATCH")
    assert by(flow.read("out/big"), "id") == [("o1",)]


def _own_checkpoint(mode: str) -> str:
    """The reader's PIPELINE: in STREAMING a checkpoint apart from the writer's."""
    if mode == "BATCH":
        return "PIPELINE reader MODE BATCH;"
    return "PIPELINE reader MODE STREAMING CHECKPOINT 'chk_reader' TRIGGER AVAILABLE NOW;"


def _dslc_run(folder: Path, flow: str) -> None:
    (folder / "p.flow").write_text(flow)
    done = subprocess.run([sys.executable, "-m", "dslc.compiler.cli", "run", str(folder / "p.flow")],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.mark.slow
def test_tables_persist_between_runs_in_new_sessions(tmp_path):
    """`dslc run` twice, each its own spark-submit and Spark session: the second finds the table
    the first wrote (its catalog entry was gone with the first session)."""
    (tmp_path / "in/orders").mkdir(parents=True)
    (tmp_path / "in/orders/1.json").write_text(json.dumps({"id": "o1", "amount": 50.0}) + "\n")
    _dslc_run(tmp_path, "PIPELINE w MODE BATCH;" + WRITE)
    _dslc_run(tmp_path, "PIPELINE r MODE BATCH;" + READ.replace("PARQUET 'out/big'", "JSON 'out/big'"))
    lines = [json.loads(line) for f in (tmp_path / "out/big").glob("part-*") for line in f.read_text().splitlines()]
    assert lines == [{"id": "o1", "amount": 50.0}]
