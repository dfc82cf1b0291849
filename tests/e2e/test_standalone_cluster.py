"""A pipeline on a real Spark standalone cluster whose executors run a Python WITHOUT dslc.

The master and the worker are started by pyspark's own spark-class (session fixture); the
executors' Python has only pyspark, pyarrow and aiohttp (cluster_support.executor_python), so
the job must ship the dslc runtime and the user module itself. The same pipeline (HTTP ENRICH,
a user-module ENRICH, BROADCAST, MATCH) is run with `dslc run --master spark://...` and with
plain `spark-submit` from another folder, and both write the rows a local[2] run writes.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from aiohttp import web
from jobs import run_flow

pytestmark = [pytest.mark.spark, pytest.mark.slow]

FLOW = """
PIPELINE on_standalone MODE BATCH;
SET spark.sql.shuffle.partitions = 2;
SOURCE events FROM JSON 'in/events/' SCHEMA (id STRING, user STRING, amount DOUBLE);
SOURCE limit_updates FROM CSV 'in/limits/' OPTIONS (header = 'true') SCHEMA (user STRING, op STRING, max_amount DOUBLE);
BROADCAST limits FROM limit_updates KEY user OP op;
STREAM scored = ENRICH events WITH HTTP GET 'http://127.0.0.1:{port}/risk/{{user}}'
    HEADERS ('Authorization' = 'Bearer ${{RISK_TOKEN}}') ANSWER 'data.scores'
  RETURNS (risk DOUBLE PATH 'risk.value')
  ASYNC UNORDERED CAPACITY 8 TIMEOUT 10s ON MISS DROP;
STREAM tagged = ENRICH scored WITH PYTHON 'tagger:tag' RETURNS (tag STRING, runtime_from STRING, python STRING)
  ASYNC UNORDERED CAPACITY 4 TIMEOUT 10s;
STREAM over = MATCH tagged AGAINST limits AS l WHERE tagged.user = l.user AND tagged.amount > l.max_amount;
SINK over TO JSON 'out/over' MODE OVERWRITE;
"""

TAGGER = '''
import sys
import dslc.runtime

async def tag(row):
    """A user module: where the runtime and the Python running it come from."""
    return {"tag": row["user"] + ":" + str(int(row["amount"]) % 7),
            "runtime_from": dslc.runtime.__file__, "python": sys.executable}
'''

RISK = {"a": 0.1, "b": 0.5, "c": 0.9}     # user d is unknown: 404, a miss, dropped
# the secret's journey: read by the process that starts the job (its environment in the local run,
# `--secrets FILE` and DSLC_SECRETS_FILE on the cluster), shipped to executors that have neither;
# the answer is wrapped and read with ANSWER and PATH by executors that have no jmespath installed
RISK_TOKEN = "risk-token-5d1e77"


def _pipeline(folder: Path, port: int) -> Path:
    """The .flow file, its user module and its input files in `folder`."""
    folder.mkdir(parents=True)
    (folder / "pipeline.flow").write_text(FLOW.format(port=port))
    (folder / "tagger.py").write_text(TAGGER)
    events = [{"id": f"e{i}", "user": "abcd"[i % 4], "amount": float(i)} for i in range(160)]
    (folder / "in/events").mkdir(parents=True)
    for part in range(4):
        (folder / f"in/events/{part}.json").write_text("".join(json.dumps(e) + "\n" for e in events[part::4]))
    (folder / "in/limits").mkdir(parents=True)
    (folder / "in/limits/1.csv").write_text("user,op,max_amount\na,set,100\nb,set,10\nc,set,0\nd,set,0\n")
    (folder / "in/limits/2.csv").write_text("user,op,max_amount\nc,delete,\n")
    return folder / "pipeline.flow"


def _rows(folder: Path) -> list[dict]:
    return [json.loads(line) for path in sorted((folder / "out/over").glob("*.json"))
            for line in path.read_text().splitlines()]


def _comparable(rows: list[dict]) -> list[tuple]:
    return sorted((r["id"], r["user"], r["amount"], r["risk"], r["tag"], r["max_amount"]) for r in rows)


@pytest.fixture
def risk_service(serve_app):
    calls = []

    async def risk(request):
        if request.headers.get("Authorization") != f"Bearer {RISK_TOKEN}":
            return web.json_response({"error": "unauthorized"}, status=401)
        calls.append(request.match_info["user"])
        user = request.match_info["user"]
        if user not in RISK:
            return web.json_response({}, status=404)
        return web.json_response({"data": {"scores": {"risk": {"value": RISK[user]}}}})

    app = web.Application()
    app.router.add_get("/risk/{user}", risk)
    server = serve_app(app)
    server.calls = calls
    return server


def _cluster_env() -> dict[str, str]:
    """The caller's environment without the test run's PYSPARK_PYTHON (the executors get theirs by conf)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON",
                                                            "DSLC_FLOW_FOLDER", "RISK_TOKEN")}
    return env


def _secrets_file(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "risk.env").write_text(f"# the risk service's token\nRISK_TOKEN={RISK_TOKEN}\n")
    return folder / "risk.env"


def _check_cluster_rows(folder: Path, expected: list[tuple], executor_python: Path) -> None:
    rows = _rows(folder)
    assert _comparable(rows) == expected
    # every row was enriched on an executor running the dslc-less Python, from the shipped zip
    assert {r["python"] for r in rows} == {str(executor_python)}
    assert {re.sub(r".*/", "", r["runtime_from"].split("/dslc/runtime/")[0]) for r in rows} == {"dslc_runtime.zip"}


def test_dslc_run_and_spark_submit_on_a_standalone_cluster_match_local(
        tmp_path, spark, risk_service, standalone_cluster, executor_python, monkeypatch):
    for module in ("dslc", "jmespath"):
        assert subprocess.run([str(executor_python), "-c", f"import {module}"], capture_output=True).returncode == 1

    local = _pipeline(tmp_path / "local", risk_service.port)
    with monkeypatch.context() as env:
        env.setenv("RISK_TOKEN", RISK_TOKEN)
        run_flow(local)
    secrets_file = _secrets_file(tmp_path / "secrets")
    expected = _comparable(_rows(local.parent))
    limits = {"a": 100.0, "b": 10.0, "d": 0.0}
    assert [row[0] for row in expected] == sorted(
        f"e{i}" for i in range(160) if "abcd"[i % 4] in limits and "abcd"[i % 4] in RISK
        and float(i) > limits["abcd"[i % 4]])

    # 1. dslc run FILE --master spark://... with the executors' Python given by conf
    with_run = _pipeline(tmp_path / "with_run", risk_service.port)
    result = subprocess.run(
        [sys.executable, "-m", "dslc.compiler.cli", "run", str(with_run), "--master", standalone_cluster.url,
         "--secrets", str(secrets_file), "--", "--conf", f"spark.pyspark.python={executor_python}"],
        cwd=tmp_path, env=_cluster_env(), capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    _check_cluster_rows(with_run.parent, expected, executor_python)
    # spark-submit merges the driver's stderr into stdout: the table and the metrics file's path
    assert "dslc: per-operator metrics" in result.stdout and "\ntagged " in result.stdout
    metrics_file = with_run.parent / "target" / "metrics"
    assert f"dslc: metrics written to {metrics_file}/on_standalone-" in result.stdout
    # live progress: the executors' datagrams reached the driver (its last line, when the job ends)
    progress = [line for line in result.stdout.splitlines() if line.startswith("dslc: progress ")]
    assert progress and "scored elements_in=160 " in progress[-1] and "tagged elements_in=120 " in progress[-1]

    # 2. compile once, then plain spark-submit from another folder, as docs/operations.md says
    submitted = _pipeline(tmp_path / "submitted", risk_service.port)
    job = tmp_path / "build" / "on_standalone_job.py"
    compiled = subprocess.run([sys.executable, "-m", "dslc.compiler.cli", "compile", str(submitted), "-o", str(job)],
                              capture_output=True, text=True, timeout=120)
    assert compiled.returncode == 0, compiled.stderr
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    from dslc.compiler.cli.commands import spark_submit
    result = subprocess.run(
        [*spark_submit(), "--master", standalone_cluster.url,
         "--conf", f"spark.pyspark.driver.python={sys.executable}",
         "--conf", f"spark.pyspark.python={executor_python}", str(job)],
        cwd=elsewhere, env={**_cluster_env(), "DSLC_SECRETS_FILE": str(secrets_file)},
        capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    _check_cluster_rows(submitted.parent, expected, executor_python)
    assert RISK_TOKEN not in job.read_text() and RISK_TOKEN not in result.stdout + result.stderr
    written = json.loads(next((submitted.parent / "target" / "metrics").glob("on_standalone-*.json")).read_text())
    assert written["operators"]["tagged"]["elements_out"] == 120 and written["warnings"] == []
    assert not (elsewhere / "out").exists()                  # paths resolve against the .flow folder
    shutil.rmtree(standalone_cluster.work_dir, ignore_errors=True)
