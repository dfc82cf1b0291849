"""The examples through Spark Connect: `dslc run FILE --remote sc://...` against pyspark's bundled
Spark Connect server (session fixture; its Python workers have no dslc, so the runtime and the
user modules must arrive as artifacts), compared with local[2] runs of the same pipelines: rows,
dead letters and the metrics file."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from jobs import EXAMPLES, run_flow
from jobs import copy_example as _copy

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def _run_remote(flow: Path, url: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("DSLC_FLOW_FOLDER", "PYSPARK_PYTHON", "SPARK_REMOTE")}
    result = subprocess.run([sys.executable, "-m", "dslc.compiler.cli", "run", str(flow), "--remote", url],
                            cwd=flow.parent.parent, env=env, capture_output=True, text=True, timeout=400)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result


def _table(spark, path: Path, fmt: str) -> list[tuple]:
    df = spark.read.format(fmt).load(str(path))
    return sorted(tuple(str(v) for v in row) for row in df.select(*sorted(df.columns)).collect())


def _metrics(folder: Path) -> dict:
    files = sorted((folder / "target" / "metrics").glob("*.json"))
    assert len(files) == 1, files
    return json.loads(files[0].read_text())


COUNTS = ("elements_in", "elements_out", "misses", "errors", "dead_letters", "timeouts")


def _service():
    spec = importlib.util.spec_from_file_location("fraud_service", EXAMPLES / "fraud" / "service.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_fraud_example_through_spark_connect_matches_local(tmp_path, spark, serve_app, connect_server):
    server = serve_app(_service().app())
    local = _copy("fraud", tmp_path / "local" / "fraud", server.port)
    remote = _copy("fraud", tmp_path / "remote" / "fraud", server.port)
    run_flow(local)
    result = _run_remote(remote, connect_server.url)

    for sink, fmt in (("target/out/flagged", "parquet"), ("target/out/per_customer", "json"),
                      ("target/dlq/enrich", "text")):
        expected = _table(spark, local.parent / sink, fmt) if (local.parent / sink).exists() else []
        got = _table(spark, remote.parent / sink, fmt) if (remote.parent / sink).exists() else []
        assert got == expected, sink
    assert _table(spark, remote.parent / "target/out/flagged", "parquet")          # not trivially empty
    local_metrics, remote_metrics = _metrics(local.parent), _metrics(remote.parent)
    assert remote_metrics["pipeline"] == "fraud_alerts"
    assert set(remote_metrics["operators"]) == set(local_metrics["operators"]) == {"enriched"}
    for name, expected in local_metrics["operators"].items():
        assert {c: remote_metrics["operators"][name][c] for c in COUNTS} == {c: expected[c] for c in COUNTS}
    assert remote_metrics["warnings"] == local_metrics["warnings"] == []
    out = result.stdout + result.stderr
    assert "dslc: per-operator metrics" in out and "dslc: metrics written to " in out


def test_devices_example_through_spark_connect_matches_local(tmp_path, spark, connect_server):
    """A Python data source, PROCESS WITH BROADCAST and a user module, all on the server's workers."""
    local = _copy("devices", tmp_path / "local" / "devices")
    remote = _copy("devices", tmp_path / "remote" / "devices")
    run_flow(local)
    _run_remote(remote, connect_server.url)
    for sink, fmt in (("target/out/alerts", "parquet"), ("target/out/per_device", "json")):
        assert _table(spark, remote.parent / sink, fmt) == _table(spark, local.parent / sink, fmt), sink
    assert _table(spark, remote.parent / "target/out/alerts", "parquet")
    local_ops, remote_ops = _metrics(local.parent)["operators"], _metrics(remote.parent)["operators"]
    assert {n: {c: m[c] for c in COUNTS} for n, m in remote_ops.items()} == \
        {n: {c: m[c] for c in COUNTS} for n, m in local_ops.items()}


def test_remote_and_master_together_are_refused(tmp_path):
    flow = _copy("devices", tmp_path / "devices")
    result = subprocess.run([sys.executable, "-m", "dslc.compiler.cli", "run", str(flow), "--remote",
                             "sc://127.0.0.1:1", "--master", "local[2]"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "--remote runs the job through Spark Connect: --master and spark-submit arguments" in result.stderr


SECRET_FLOW = """
PIPELINE remote_secret MODE BATCH;
SOURCE orders FROM JSON 'in/' SCHEMA (order_id STRING, customer_id STRING);
STREAM enriched = ENRICH orders
  WITH HTTP GET 'http://127.0.0.1:{port}/v2/customers/{{customer_id}}'
    HEADERS ('Authorization' = 'Bearer ${{REMOTE_TOKEN}}') ANSWER 'data.customer'
  RETURNS (tier STRING, risk DOUBLE PATH 'scores.risk')
  ASYNC UNORDERED CAPACITY 4 TIMEOUT 10s ON ERROR DEAD LETTER 'dlq';
SINK enriched TO JSON 'out';
"""


def test_a_secret_reaches_the_connect_servers_workers_in_the_chain(tmp_path, spark, serve_app, connect_server):
    """The server's workers have no environment of the client's: the value read by `dslc run
    --secrets FILE` travels in the chain, and the server answers every row (none is a 401)."""
    from aiohttp import web

    token, seen = "remote-token-90ab", []

    async def customer(request):
        seen.append(request.headers.get("Authorization"))
        if request.headers.get("Authorization") != f"Bearer {token}":
            return web.json_response({}, status=401)
        n = int(request.match_info["customer_id"][1:])
        return web.json_response({"data": {"customer": {"tier": f"t{n % 3}", "scores": {"risk": n / 10}}}})

    app = web.Application()
    app.router.add_get("/v2/customers/{customer_id}", customer)
    server = serve_app(app)
    folder = tmp_path / "remote"
    (folder / "in").mkdir(parents=True)
    (folder / "in/o.json").write_text("".join(json.dumps({"order_id": f"o{i}", "customer_id": f"c{i}"}) + "\n"
                                              for i in range(12)))
    (folder / "pipeline.flow").write_text(SECRET_FLOW.format(port=server.port))
    (tmp_path / "token.env").write_text(f"REMOTE_TOKEN={token}\n")
    result = subprocess.run(
        [sys.executable, "-m", "dslc.compiler.cli", "run", str(folder / "pipeline.flow"), "--secrets",
         str(tmp_path / "token.env"), "--remote", connect_server.url],
        cwd=folder, env={k: v for k, v in os.environ.items()
                         if k not in ("DSLC_FLOW_FOLDER", "PYSPARK_PYTHON", "SPARK_REMOTE", "REMOTE_TOKEN")},
        capture_output=True, text=True, timeout=400)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert _table(spark, folder / "out", "json") == sorted(
        (f"c{i}", f"o{i}", str(i / 10), f"t{i % 3}") for i in range(12))
    assert seen == [f"Bearer {token}"] * 12
    assert not any(path.read_text().strip() for path in (folder / "dlq").glob("part-*"))   # no dead letter
    assert token not in result.stdout + result.stderr


DATABASE_FLOW = """PIPELINE remote_db MODE {mode} CHECKPOINT 'chk' {trigger};
DATABASE crm AT '{url}';
SOURCE orders FROM JSON 'in/' SCHEMA (order_id STRING, customer_id STRING);
STREAM enriched = ENRICH orders
  WITH SQL crm 'SELECT tier FROM remote_customers WHERE customer_id = {{customer_id}}'
  RETURNS (tier STRING) ASYNC UNORDERED CAPACITY 20 BATCH 5;
SINK enriched TO DATABASE crm TABLE 'remote_out_{name}' KEY (order_id) MODE UPSERT;
"""


@pytest.mark.parametrize("mode", ["BATCH", "STREAMING"])
def test_sql_lookups_and_a_database_sink_through_spark_connect(tmp_path, postgres, connect_server, mode):
    """WITH SQL on the server's Python workers (asyncpg installed there, as docs/operations.md
    says) and a database sink (in STREAMING: foreachBatch on the server, each micro-batch known by
    the query's name, checkpoint location and batch id, nothing read from the checkpoint); run
    twice, the second run writes nothing twice."""
    name = mode.lower()
    postgres.execute(f"DROP TABLE IF EXISTS remote_customers; DROP TABLE IF EXISTS remote_out_{name}")
    postgres.execute("CREATE TABLE remote_customers (customer_id TEXT PRIMARY KEY, tier TEXT)")
    postgres.execute("INSERT INTO remote_customers VALUES ('c0', 'gold'), ('c1', 'silver')")
    folder = tmp_path / name
    (folder / "in").mkdir(parents=True)
    (folder / "in/o.json").write_text("".join(json.dumps({"order_id": f"o{i}", "customer_id": f"c{i % 3}"}) + "\n"
                                              for i in range(12)))
    url = f"postgresql://{postgres.user}:${{CRM_PASSWORD}}@127.0.0.1:{postgres.port}/{postgres.database}"
    trigger = "TRIGGER AVAILABLE NOW" if mode == "STREAMING" else ""
    (folder / "pipeline.flow").write_text(DATABASE_FLOW.format(mode=mode, trigger=trigger, url=url, name=name))
    env = {**{k: v for k, v in os.environ.items() if k not in ("DSLC_FLOW_FOLDER", "PYSPARK_PYTHON", "SPARK_REMOTE")},
           "CRM_PASSWORD": postgres.password}
    for _ in range(2):
        result = subprocess.run([sys.executable, "-m", "dslc.compiler.cli", "run", str(folder / "pipeline.flow"),
                                 "--remote", connect_server.url], cwd=folder, env=env, capture_output=True,
                                text=True, timeout=400)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        assert postgres.password not in result.stdout + result.stderr
    rows = postgres.query(f"SELECT order_id, tier FROM remote_out_{name} ORDER BY order_id")
    tiers = {0: "gold", 1: "silver", 2: None}
    assert sorted((r["order_id"], r["tier"]) for r in rows) == sorted((f"o{i}", tiers[i % 3]) for i in range(12))
