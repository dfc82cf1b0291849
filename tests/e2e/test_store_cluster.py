"""STORE on `local-cluster[2,1,1024]` with a Redis answer store: two executor JVMs in their own
processes, whose Python has neither dslc nor the `redis` client (both come in the shipped runtime
zip), 4 partitions with every key in each of them: the service is paid once per key; a second
run pays nothing; the job-wide RATE holds across both executors."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter

import pytest
from aiohttp import web

pytestmark = [pytest.mark.spark, pytest.mark.slow]

FLOW = """
PIPELINE on_cluster MODE BATCH ANSWERS '{redis}';
SET spark.sql.files.maxPartitionBytes = 512;
SOURCE events FROM JSON 'in/events/' SCHEMA (id STRING, user STRING);
STREAM enriched = ENRICH events WITH HTTP GET 'http://127.0.0.1:{port}/users/{{user}}' RETURNS (name STRING)
  ASYNC UNORDERED CAPACITY 8 TIMEOUT 10s STORE;
SINK enriched TO JSON 'out/enriched' MODE OVERWRITE;
"""


def test_four_partitions_on_two_executors_share_one_redis_store(tmp_path, executor_python, serve_app, redis_server):
    import asyncio

    calls: Counter = Counter()

    async def user(request):
        key = request.match_info["id"]
        calls[key] += 1
        await asyncio.sleep(0.05)        # calls overlap across executors: leases must coalesce them
        return web.json_response({"name": f"n-{key}"})

    app = web.Application()
    app.router.add_get("/users/{id}", user)
    server = serve_app(app)
    users = [f"u{i}" for i in range(30)]
    events = [{"id": f"e{i}", "user": users[i % 30]} for i in range(240)]
    (tmp_path / "in/events").mkdir(parents=True)
    for part in range(4):          # every user in every one of the 4 files (partitions)
        (tmp_path / f"in/events/{part}.json").write_text("".join(json.dumps(e) + "\n" for e in events[part::4]))
    (tmp_path / "pipeline.flow").write_text(FLOW.format(redis=redis_server.url(0), port=server.port))
    env = {k: v for k, v in os.environ.items() if k not in ("DSLC_FLOW_FOLDER", "PYSPARK_PYTHON")}
    command = [sys.executable, "-m", "dslc.compiler.cli", "run", str(tmp_path / "pipeline.flow"),
               "--master", "local-cluster[2,1,1024]", "--", "--conf", f"spark.pyspark.python={executor_python}"]
    check = subprocess.run([str(executor_python), "-c", "import redis"], capture_output=True)
    assert check.returncode != 0, "the executors' Python must not have the redis client for this test"

    for run in (1, 2):
        result = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=400)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        rows = [json.loads(line) for p in sorted((tmp_path / "out/enriched").glob("*.json"))
                for line in p.read_text().splitlines()]
        assert sorted(r["id"] for r in rows) == sorted(e["id"] for e in events)
        assert all(r["name"] == f"n-{r['user']}" for r in rows)
        assert len(calls) == 30 and set(calls.values()) == {1}, (run, calls)   # once per key, over both runs
