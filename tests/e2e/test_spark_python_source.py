"""SOURCE FROM PYTHON on Spark's Python data source API: one partition per split in BATCH, each
split read exactly once across STREAMING runs on one checkpoint, and failures that name the
source, its DSL line and the split."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from jobs import run_flow

from dslc.compiler.pipeline import compile_file

pytestmark = pytest.mark.spark

# Splits are the files of a folder; a split's rows are the file's JSON lines.
FOLDER_SOURCE = '''
import json, os

class Files:
    def __init__(self, options):
        self.folder = options["folder"]          # option keys arrive lower-cased, values as written

    def splits(self):
        return sorted(name for name in os.listdir(self.folder) if name.endswith(".jsonl"))

    def read(self, split):
        if split == "broken.jsonl":
            raise ValueError("cannot parse")
        with open(os.path.join(self.folder, split)) as handle:
            for line in handle:
                yield dict(json.loads(line), split=split)
'''


def _flow(mode: str, folder: Path) -> str:
    header = ("PIPELINE files MODE STREAMING CHECKPOINT 'chk' TRIGGER AVAILABLE NOW;" if mode == "STREAMING"
              else "PIPELINE files MODE BATCH;")
    return f"""{header}
SOURCE lines FROM PYTHON 'files_source:Files'
  OPTIONS (Folder = {str(folder)!r})
  SCHEMA (id INT, word STRING, split STRING);
STREAM upper = SELECT id, upper(word) AS word, split FROM lines;
SINK upper TO PARQUET 'out/upper' MODE APPEND;
"""


def _write_split(folder: Path, name: str, rows: list[dict]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("".join(json.dumps(r) + "\n" for r in rows))


def _setup(tmp_path: Path, mode: str) -> Path:
    (tmp_path / "files_source.py").write_text(FOLDER_SOURCE)
    flow = tmp_path / "pipeline.flow"
    flow.write_text(_flow(mode, tmp_path / "in"))
    return flow


def test_batch_reads_one_partition_per_split(spark, tmp_path):
    flow = _setup(tmp_path, "BATCH")
    for n in range(3):
        _write_split(tmp_path / "in", f"{n}.jsonl", [{"id": n * 10 + i, "word": f"w{n}{i}"} for i in range(n + 1)])
    run_flow(flow)
    rows = spark.read.parquet(str(tmp_path / "out/upper")).collect()
    assert sorted((r.id, r.word, r.split) for r in rows) == [
        (0, "W00", "0.jsonl"), (10, "W10", "1.jsonl"), (11, "W11", "1.jsonl"),
        (20, "W20", "2.jsonl"), (21, "W21", "2.jsonl"), (22, "W22", "2.jsonl")]

    from dslc.runtime.spark import python_source
    python_source.register(spark)
    df = (spark.read.format("dslc_python").schema("id INT, word STRING, split STRING")
          .options(**{"dslc.ref": "files_source:Files", "dslc.folder": str(tmp_path),
                      "dslc.schema": "id INT, word STRING, split STRING", "folder": str(tmp_path / "in")})
          .load())
    assert df.rdd.getNumPartitions() == 3


def test_streaming_reads_each_split_once_across_runs(spark, tmp_path):
    flow = _setup(tmp_path, "STREAMING")
    _write_split(tmp_path / "in", "a.jsonl", [{"id": 1, "word": "x"}, {"id": 2, "word": "y"}])
    run_flow(flow)
    _write_split(tmp_path / "in", "b.jsonl", [{"id": 3, "word": "z"}])
    run_flow(flow)
    run_flow(flow)    # nothing new: nothing written
    rows = spark.read.parquet(str(tmp_path / "out/upper")).collect()
    assert sorted((r.id, r.word, r.split) for r in rows) == [(1, "X", "a.jsonl"), (2, "Y", "a.jsonl"),
                                                             (3, "Z", "b.jsonl")]


def test_a_failing_split_names_source_line_and_split(spark, tmp_path):
    flow = _setup(tmp_path, "BATCH")
    _write_split(tmp_path / "in", "ok.jsonl", [{"id": 1, "word": "x"}])
    _write_split(tmp_path / "in", "broken.jsonl", [{"id": 2, "word": "y"}])
    with pytest.raises(Exception) as failure:
        run_flow(flow)
    message = str(failure.value)
    assert "SOURCE lines (line 2) FROM PYTHON 'files_source:Files'" in message
    assert 'reading split "broken.jsonl" failed: cannot parse' in message


def test_generated_read_registers_the_format_and_passes_name_and_line(tmp_path):
    flow = _setup(tmp_path, "BATCH")
    code = compile_file(flow, job_folder=str(tmp_path))
    assert "python_source.register(spark)" in code
    assert ".option('dslc.name', 'lines')\n        .option('dslc.line', '2')" in code
