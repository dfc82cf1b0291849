"""Sinks checked before any call (#41, item 5): `dslc run` refuses a SINK or dead-letter path it
could never write before Spark starts (`file:line:col: error[E0340]`, exit 2, the service never
called); a write that still fails at run time is one line naming the SINK, its line, its path and
Spark's cause (never Py4JJavaError), Spark's trace in the run's log; in BATCH and STREAMING."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from aiohttp import web
from jobs import run_flow

from dslc.runtime.spark import failure

pytestmark = pytest.mark.spark

FLOW = """PIPELINE shop {pipeline};
SOURCE products FROM JSON 'in/' SCHEMA (sku STRING, qty INT);
STREAM priced = ENRICH products WITH HTTP GET 'http://127.0.0.1:{port}/price/{{sku}}' RETURNS (price INT)
  ASYNC UNORDERED CAPACITY 4 TIMEOUT 5s ON ERROR DEAD LETTER '{dlq}';
SINK priced TO PARQUET '{out}';
"""
MODES = {"BATCH": "MODE BATCH", "STREAMING": "MODE STREAMING CHECKPOINT 'chk' TRIGGER AVAILABLE NOW"}


def _service(serve_app) -> tuple[object, list[str]]:
    calls: list[str] = []

    async def price(request):
        calls.append(request.match_info["sku"])
        return web.json_response({"price": 3})

    app = web.Application()
    app.router.add_get("/price/{sku}", price)
    return serve_app(app), calls


def _pipeline(folder: Path, port: int, mode: str, out: str = "out", dlq: str = "dlq") -> Path:
    (folder / "in").mkdir(parents=True, exist_ok=True)
    (folder / "in/1.json").write_text("".join(json.dumps({"sku": f"p{i}", "qty": i}) + "\n" for i in range(6)))
    (folder / "blocker").write_text("a file where a folder is wanted\n")
    flow = folder / "pipeline.flow"
    flow.write_text(FLOW.format(pipeline=MODES[mode], port=port, out=out, dlq=dlq))
    return flow


@pytest.mark.parametrize("mode", list(MODES))
def test_dslc_run_refuses_unwritable_paths_before_any_call(tmp_path, serve_app, mode):
    server, calls = _service(serve_app)
    _pipeline(tmp_path, server.port, mode, out="blocker/out", dlq="blocker/dlq")
    done = subprocess.run([sys.executable, "-m", "dslc.compiler.cli", "run", "pipeline.flow"], capture_output=True,
                          text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    errors = [line for line in done.stderr.splitlines() if "error[E0340]" in line]
    assert errors == [
        "pipeline.flow:4:62: error[E0340]: the dead letters of ENRICH priced ('blocker/dlq') cannot be written: "
        f"{tmp_path}/blocker is a file, so the folder {tmp_path}/blocker/dlq cannot be created",
        "pipeline.flow:5:24: error[E0340]: SINK priced TO PARQUET 'blocker/out' cannot be written: "
        f"{tmp_path}/blocker is a file, so the folder {tmp_path}/blocker/out cannot be created"]
    assert calls == []                     # Spark never started: nothing was called, nothing paid
    assert not (tmp_path / "target" / "logs").exists() or not any((tmp_path / "target" / "logs").iterdir())


@pytest.mark.parametrize("mode", list(MODES))
def test_a_write_that_fails_at_run_time_names_its_sink_in_one_line(tmp_path, serve_app, spark, capfd, monkeypatch,
                                                                   mode):
    server, calls = _service(serve_app)
    flow = _pipeline(tmp_path, server.port, mode, out="blocker/out")     # run by hand: no check before
    log = tmp_path / "run.log"
    log.touch()
    monkeypatch.setenv(failure.LOG_ENV, str(log))        # as under `dslc run`
    with pytest.raises(SystemExit) as stopped:
        run_flow(flow)
    assert stopped.value.code == 1
    err = capfd.readouterr().err
    [line] = [text for text in err.splitlines() if text.startswith("dslc: error:")]
    assert line.startswith("dslc: error: SINK priced (line 5) could not write to 'blocker/out': "
                           "org.apache.hadoop.fs.ParentNotDirectoryException: ")
    assert f"{tmp_path}/blocker" in line
    assert "Py4JJavaError" not in err and "Traceback" not in err
    assert "ParentNotDirectoryException" in log.read_text() and "Traceback" in log.read_text()   # the trace is kept


def test_a_failure_upstream_of_a_write_is_not_the_sinks(tmp_path, spark, monkeypatch, capfd):
    """A row that cannot be made (the JSON reader's FAILFAST here) fails the write action, but the
    line says what failed, not that the SINK could not write."""
    (tmp_path / "in").mkdir()
    (tmp_path / "in/1.json").write_text('{"sku": "p1", "qty": 1}\nnot json\n')
    flow = tmp_path / "pipeline.flow"
    flow.write_text("SOURCE products FROM JSON 'in/' SCHEMA (sku STRING, qty INT);\nSINK products TO PARQUET 'out';\n")
    monkeypatch.setenv(failure.LOG_ENV, str(tmp_path / "run.log"))
    with pytest.raises(SystemExit):
        run_flow(flow)
    [line] = [text for text in capfd.readouterr().err.splitlines() if text.startswith("dslc: error:")]
    assert line.startswith("dslc: error: com.fasterxml.jackson.core.JsonParseException: Unrecognized token 'not'")
    assert "SINK" not in line and "Py4JJavaError" not in line


def test_the_writable_check_reads_existing_folders_and_parents(tmp_path):
    from dslc.compiler.plan.writable import problem

    (tmp_path / "folder").mkdir()
    (tmp_path / "file").write_text("x")
    assert problem(tmp_path / "folder") is None and problem(tmp_path / "new" / "deeper") is None
    assert problem(tmp_path / "file") == f"{tmp_path}/file is a file, not a folder"
    if os.geteuid() != 0:     # root may write anywhere
        (tmp_path / "locked").mkdir(mode=0o500)
        assert "not writable" in problem(tmp_path / "locked" / "out")


def test_a_streaming_run_refuses_a_batch_runs_folder_and_a_batch_append_a_streaming_one(tmp_path, serve_app):
    """#41 item 9: Spark's readers list only the files a streaming file sink's _spark_metadata log
    committed, so one folder must not take both modes' files: dslc run says so before any call."""
    server, calls = _service(serve_app)
    flow = _pipeline(tmp_path, server.port, "STREAMING", out="target/out/priced")
    (tmp_path / "target/out/priced").mkdir(parents=True)
    (tmp_path / "target/out/priced/part-00000-batch.snappy.parquet").write_bytes(b"PAR1")
    done = subprocess.run([sys.executable, "-m", "dslc.compiler.cli", "run", "pipeline.flow"], capture_output=True,
                          text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert ("pipeline.flow:5:24: error[E0341]: SINK priced TO PARQUET 'target/out/priced' cannot be written by a "
            "STREAMING run: it holds a BATCH run's files") in done.stderr
    flow.write_text(flow.read_text().replace("MODE STREAMING CHECKPOINT 'chk' TRIGGER AVAILABLE NOW", "MODE BATCH"))
    (tmp_path / "target/out/priced/_spark_metadata").mkdir()
    done = subprocess.run([sys.executable, "-m", "dslc.compiler.cli", "run", "pipeline.flow"], capture_output=True,
                          text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 2 and "cannot be written by a BATCH run: it is a STREAMING run's folder" in done.stderr
    assert calls == []


def test_both_modes_share_one_answer_store_by_default():
    """#41 item 9: without ANSWERS the store is target/answers.db in BATCH and STREAMING alike,
    with or without CHECKPOINT (which only STREAMING needs), so a run of the other mode pays for
    nothing the first one received."""
    from dslc.compiler.pipeline import check_text

    text = ("PIPELINE p MODE BATCH{checkpoint};\nSOURCE s FROM JSON 'in/' SCHEMA (id STRING);\n"
            "STREAM e = ENRICH s WITH HTTP GET 'http://127.0.0.1:1/x/{{id}}' RETURNS (v STRING) STORE;\n"
            "SINK e TO CONSOLE;\n")
    stores = {check_text(text.format(checkpoint=checkpoint).replace("MODE BATCH", mode)).node("e").store.location
              for checkpoint in ("", " CHECKPOINT 'target/chk/p'") for mode in ("MODE BATCH", "MODE STREAMING")}
    assert stores == {"target/answers.db"}
