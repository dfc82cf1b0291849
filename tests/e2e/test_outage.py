"""ON OUTAGE with a real service that goes down mid-run and comes back on the same port.

PAUSE: every row comes out once and nothing is dead-lettered, in BATCH and STREAMING (AVAILABLE
NOW). FAIL: `dslc run` exits non-zero in bounded time with a message naming the operator, its
line and the last error, and writes no dead letter; in STREAMING the failed run restarted later
loses nothing and repeats no call for what the first run committed.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from aiohttp import web
from jobs import run_flow

pytestmark = [pytest.mark.spark, pytest.mark.slow]

FLOW = """
PIPELINE outage {pipeline};
SOURCE orders FROM JSON 'in/' SCHEMA (order_id STRING, customer_id STRING) {source_options};
STREAM enriched = ENRICH orders
  WITH HTTP GET 'http://127.0.0.1:{port}/customers/{{order_id}}'
  RETURNS (tier STRING)
  ASYNC UNORDERED CAPACITY 4 TIMEOUT 2s RETRY 1 BACKOFF 10ms
  ON OUTAGE {outage}
  ON ERROR DEAD LETTER 'dlq';
SINK enriched TO JSON 'out';
"""


class FlakyService:
    """A customer service on a fixed port that can be stopped and started again; it records
    every order it answered."""

    def __init__(self, serve_app) -> None:
        self.serve_app = serve_app
        self.answered: list[str] = []
        self.server = None
        self.port: int | None = None
        self.restarted = threading.Event()

    def app(self) -> web.Application:
        async def customer(request: web.Request) -> web.Response:
            order = request.match_info["order_id"]
            self.answered.append(order)
            return web.json_response({"tier": "gold" if int(order[1:]) % 2 else "silver"})

        app = web.Application()
        app.router.add_get("/customers/{order_id}", customer)
        return app

    def start(self) -> None:
        self.server = self.serve_app(self.app(), port=self.port)
        self.port = self.server.port

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None

    def outage_after(self, calls: int, down_s: float | None) -> threading.Thread:
        """Stop once `calls` orders were answered, start again `down_s` later (None: stay down)."""
        def run() -> None:
            deadline = time.monotonic() + 300
            while len(self.answered) < calls and time.monotonic() < deadline:
                time.sleep(0.005)
            self.stop()
            if down_s is None:
                return
            time.sleep(down_s)
            self.start()
            self.restarted.set()

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        return thread


ORDERS = [{"order_id": f"o{i}", "customer_id": f"c{i % 7}"} for i in range(120)]


def _input(folder: Path, files: int = 1) -> None:
    (folder / "in").mkdir(parents=True)
    for part in range(files):
        (folder / f"in/{part}.json").write_text("".join(json.dumps(o) + "\n" for o in ORDERS[part::files]))


def _lines(folder: Path) -> list[dict]:
    return [json.loads(line) for path in sorted(folder.glob("part-*")) for line in path.read_text().splitlines()
            if line.strip()]


@pytest.fixture
def flaky(serve_app):
    service = FlakyService(serve_app)
    service.start()
    yield service
    service.stop()


@pytest.mark.parametrize("pipeline", ["MODE BATCH", "MODE STREAMING CHECKPOINT 'chk' TRIGGER AVAILABLE NOW"])
def test_pause_holds_every_row_through_an_outage(spark, tmp_path, flaky, pipeline):
    _input(tmp_path)
    flow = tmp_path / "pipeline.flow"
    flow.write_text(FLOW.format(pipeline=pipeline, port=flaky.port, source_options="", outage="PAUSE 60s"))
    watcher = flaky.outage_after(calls=30, down_s=3.0)
    run_flow(flow)
    watcher.join(10)
    assert flaky.restarted.is_set()     # the service did go down and come back during the run
    rows = spark.read.json(str(tmp_path / "out")).collect()
    assert sorted(r.order_id for r in rows) == sorted(o["order_id"] for o in ORDERS)   # each row once
    assert all(r.tier == ("gold" if int(r.order_id[1:]) % 2 else "silver") for r in rows)
    assert _lines(tmp_path / "dlq") == []
    assert set(flaky.answered) == {o["order_id"] for o in ORDERS}


def _run(folder: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("DSLC_FLOW_FOLDER", "PYSPARK_PYTHON")}
    return subprocess.run([sys.executable, "-m", "dslc.compiler.cli", "run", "pipeline.flow", *args],
                          cwd=folder, env=env, capture_output=True, text=True, timeout=300)


def test_fail_stops_a_batch_job_with_the_operator_line_and_last_error(tmp_path, flaky):
    _input(tmp_path)
    flaky.stop()                        # down from the start: nothing is listening on its port
    (tmp_path / "pipeline.flow").write_text(
        FLOW.format(pipeline="MODE BATCH", port=flaky.port, source_options="", outage="FAIL"))
    started = time.monotonic()
    result = _run(tmp_path)
    output = result.stdout + result.stderr
    assert result.returncode != 0, output[-3000:]
    assert time.monotonic() - started < 240
    assert "ENRICH 'enriched' (line 4): the service is down (ON OUTAGE FAIL): 10 calls in a row failed; " \
           "last error: ClientConnectorError" in output, output[-3000:]
    assert _lines(tmp_path / "dlq") == []


def test_fail_in_streaming_then_a_restart_loses_nothing_and_repeats_nothing_committed(spark, tmp_path, flaky):
    _input(tmp_path, files=6)
    (tmp_path / "pipeline.flow").write_text(FLOW.format(
        pipeline="MODE STREAMING CHECKPOINT 'chk' TRIGGER AVAILABLE NOW", port=flaky.port,
        source_options="OPTIONS (maxFilesPerTrigger = '1')", outage="FAIL"))
    watcher = flaky.outage_after(calls=50, down_s=None)     # down for the rest of the first run
    first = _run(tmp_path)
    watcher.join(10)
    assert first.returncode != 0, (first.stdout + first.stderr)[-3000:]
    assert "the service is down (ON OUTAGE FAIL)" in first.stdout + first.stderr
    # what the first run committed: the ENRICH's own query writes its rows to a stage folder
    # (Spark's file sink: only micro-batches in its _spark_metadata log count) before the sink's
    stages = [p.parent for p in (tmp_path / "chk").rglob("_spark_metadata") if "stage" in str(p)]
    committed = {r.order_id for stage in stages for r in spark.read.parquet(str(stage)).collect()}
    assert 0 < len(committed) < len(ORDERS)      # some micro-batches were committed before the outage

    flaky.start()                       # the service is back: run the same pipeline again
    answered_before = len(flaky.answered)
    second = _run(tmp_path)
    assert second.returncode == 0, (second.stdout + second.stderr)[-3000:]
    rows = spark.read.json(str(tmp_path / "out")).collect()
    assert sorted(r.order_id for r in rows) == sorted(o["order_id"] for o in ORDERS)   # nothing lost, no repeat
    assert not committed & set(flaky.answered[answered_before:])   # committed rows were not called again
    assert _lines(tmp_path / "dlq") == []
