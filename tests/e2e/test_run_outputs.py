"""What an operator sees at the end of a run: the metrics table, a JSON metrics file per run with
its path printed, a warning when an ENRICH failed on every element; and `dslc run` leaving no
temporary folder behind, after success, failure or Ctrl-C."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cluster_support import free_port
from jobs import run_flow

from dslc.runtime.spark import failure

pytestmark = pytest.mark.spark

SERVICE_DOWN = """
PIPELINE service_down MODE BATCH;
SOURCE orders FROM JSON 'in/' SCHEMA (id STRING, customer STRING);
STREAM enriched = ENRICH orders WITH HTTP GET 'http://127.0.0.1:{port}/c/{{customer}}' RETURNS (tier STRING)
  ASYNC UNORDERED CAPACITY 4 TIMEOUT 5s RETRY 1 BACKOFF 1ms
  ON ERROR DEAD LETTER 'dlq';
SINK enriched TO JSON 'out' MODE OVERWRITE;
"""


def test_a_service_down_from_the_start_stops_the_run_writing_nothing(tmp_path, spark, capsys):
    (tmp_path / "in").mkdir()
    (tmp_path / "in/1.json").write_text("".join(json.dumps({"id": f"o{i}", "customer": f"c{i % 5}"}) + "\n"
                                                for i in range(24)))
    flow = tmp_path / "pipeline.flow"
    flow.write_text(SERVICE_DOWN.format(port=free_port()))      # nothing listens there
    with pytest.raises(Exception) as info:      # run by hand: Spark's failure, as usual
        run_flow(flow)
    code, line = failure.classify(info.value)
    assert code == 1
    assert line.startswith("dslc: error: ENRICH 'enriched' (line 4): the service never answered: ")
    assert "could not connect (ClientConnectorError" in line and "Nothing was dead-lettered" in line
    assert not (tmp_path / "dlq").exists() and not (tmp_path / "out").exists()   # no row was written anywhere


def test_a_healthy_run_writes_no_warning_and_one_file_per_run(tmp_path, spark, capsys, serve_app):
    from aiohttp import web

    async def tier(request):
        return web.json_response({"tier": "gold"})

    app = web.Application()
    app.router.add_get("/c/{customer}", tier)
    server = serve_app(app)
    (tmp_path / "in").mkdir()
    (tmp_path / "in/1.json").write_text(json.dumps({"id": "o1", "customer": "c1"}) + "\n")
    flow = tmp_path / "pipeline.flow"
    flow.write_text(SERVICE_DOWN.format(port=server.port))
    summary = tmp_path / "summary.txt"
    os.environ["DSLC_METRICS_SUMMARY"] = str(summary)
    try:
        run_flow(flow)
        run_flow(flow)
    finally:
        os.environ.pop("DSLC_METRICS_SUMMARY")
    err = capsys.readouterr().err
    assert "dslc: warning" not in err
    assert "dslc: per-operator metrics" not in err           # the table went to the summary file
    assert summary.read_text().count("dslc: per-operator metrics") == 2
    files = sorted((tmp_path / "target" / "metrics").glob("service_down-*.json"))
    assert len(files) == 2
    assert [json.loads(f.read_text())["operators"]["enriched"]["elements_out"] for f in files] == [1, 1]


def _dslc_run(flow: Path, tmp: Path, *args: str, **popen) -> subprocess.Popen:
    env = {**os.environ, "TMPDIR": str(tmp)}
    env.pop("DSLC_FLOW_FOLDER", None)
    return subprocess.Popen([sys.executable, "-m", "dslc.compiler.cli", "run", str(flow), *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **popen)


def test_dslc_run_removes_its_temporary_folder_after_a_failure(tmp_path):
    flow = tmp_path / "pipeline.flow"
    flow.write_text(SERVICE_DOWN.format(port=1))
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    process = _dslc_run(flow, tmp, "--master", "local[1]")      # its input folder in/ does not exist
    out, _ = process.communicate(timeout=120)
    assert process.returncode != 0, out
    assert "PATH_NOT_FOUND" in out
    assert not list(tmp.glob("dslc-run-*"))


SLOW = """
PIPELINE slow MODE BATCH;
SOURCE orders FROM JSON 'in/' SCHEMA (id STRING);
STREAM waited = ENRICH orders WITH PYTHON 'sleepy:wait' RETURNS (done STRING) ASYNC UNORDERED CAPACITY 1 TIMEOUT 300s;
SINK waited TO JSON 'out' MODE OVERWRITE;
"""

SLEEPY = '''
import asyncio, pathlib

async def wait(row):
    pathlib.Path(__file__).with_name("started").touch()
    await asyncio.sleep(300)
    return {"done": "never"}
'''


@pytest.mark.slow
def test_dslc_run_removes_its_temporary_folder_after_ctrl_c(tmp_path):
    (tmp_path / "in").mkdir()
    (tmp_path / "in/1.json").write_text('{"id": "a"}\n')
    (tmp_path / "sleepy.py").write_text(SLEEPY)
    flow = tmp_path / "pipeline.flow"
    flow.write_text(SLOW)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    process = _dslc_run(flow, tmp, "--master", "local[1]", start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not (tmp_path / "started").exists():
            assert process.poll() is None and time.monotonic() < deadline, process.stdout.read()
            time.sleep(0.2)
        assert len(list(tmp.glob("dslc-run-*"))) == 1
        os.killpg(process.pid, signal.SIGINT)      # what Ctrl-C in a terminal does: the whole group
        process.wait(60)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    assert process.returncode == 130
    assert not list(tmp.glob("dslc-run-*"))
