"""A `dslc run` killed with SIGKILL takes its processes with it (#48 item 20): Spark's JVM, the
job's Python driver and Spark's Python daemon and workers (which sit in a process group of their
own) stop, and with them the calls: none is sent once they are gone, and the job does not run to
its end on its own. Only `dslc run`'s own pid is killed, not its group: its children must not
depend on being in it."""
from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from aiohttp import web

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROWS = 400

FLOW = """PIPELINE killed MODE BATCH;
SOURCE orders FROM JSON 'in/' SCHEMA (order_id STRING);
STREAM enriched = ENRICH orders WITH HTTP GET 'http://127.0.0.1:{port}/o/{{order_id}}'
  RETURNS (tier STRING) ASYNC UNORDERED CAPACITY 4 TIMEOUT 30s;
SINK enriched TO JSON 'out/enriched';
"""


def _marked(marker: str) -> list[int]:
    """The processes whose environment holds `marker` (every process `dslc run` started)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if marker.encode() in (entry / "environ").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def test_a_killed_run_leaves_no_process_sending_calls(serve_app, tmp_path):
    calls: list[str] = []

    async def order(request: web.Request) -> web.Response:
        calls.append(request.match_info["id"])
        await asyncio.sleep(0.1)
        return web.json_response({"tier": "gold"})

    app = web.Application()
    app.router.add_get("/o/{id}", order)
    server = serve_app(app)
    (tmp_path / "in").mkdir()
    (tmp_path / "in/o.json").write_text("".join(json.dumps({"order_id": f"o{i}"}) + "\n" for i in range(ROWS)))
    (tmp_path / "pipeline.flow").write_text(FLOW.format(port=server.port))
    marker = f"DSLC_KILL_TEST={uuid.uuid4().hex}"
    env = {k: v for k, v in os.environ.items() if k not in ("DSLC_FLOW_FOLDER", "PYSPARK_PYTHON", "SPARK_REMOTE")}
    env[marker.split("=")[0]] = marker.split("=")[1]
    run = subprocess.Popen([sys.executable, "-m", "dslc.compiler.cli", "run", "pipeline.flow"], cwd=tmp_path,
                           env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 400
        while len(calls) < 10 and run.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(calls) >= 10, "the run made no calls"
        os.kill(run.pid, signal.SIGKILL)
        run.wait()
        deadline = time.monotonic() + 60
        while _marked(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _marked(marker) == [], "processes of the killed run are still alive"
        gone_at = len(calls)
        time.sleep(1.0)
        assert len(calls) == gone_at            # nothing left to send a call
        assert gone_at < ROWS                   # the job did not go on to its end without dslc run
    finally:
        for pid in _marked(marker):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
