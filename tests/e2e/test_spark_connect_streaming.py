"""STREAMING (AVAILABLE NOW) through Spark Connect, compared with local[2] runs of the same pipelines.

pyspark's bundled server (session fixture) gives the session's artifacts to the Python workers of
batch jobs only, so here the runtime and the user modules travel inside the functions themselves
(runtime/spark/portable.py): a STREAMING BROADCAST's rules query, MODE COMPLETE into files and
SINK TO PYTHON (foreachBatch on the server's driver), and every chain, MATCH and PROCESS of a
streaming query (executors). Rows, dead letters, metrics and the HTTP services' calls are compared.
"""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from jobs import EXAMPLES, run_flow
from jobs import copy_example as _copy

pytestmark = [pytest.mark.spark, pytest.mark.slow]

COUNTS = ("elements_in", "elements_out", "misses", "errors", "dead_letters", "timeouts")


def _run_remote(flow: Path, url: str, *args: str, expect: int = 0) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("DSLC_FLOW_FOLDER", "PYSPARK_PYTHON", "SPARK_REMOTE")}
    result = subprocess.run([sys.executable, "-m", "dslc.compiler.cli", "run", str(flow), *args, "--remote", url],
                            cwd=flow.parent.parent, env=env, capture_output=True, text=True, timeout=500)
    assert result.returncode == expect, result.stdout[-3000:] + result.stderr[-3000:]
    return result


def _table(spark, path: Path, fmt: str, port: int | None = None) -> list[tuple]:
    """The rows as sorted string tuples; the service's port (each run has its own) made neutral."""
    if not path.exists():
        return []
    df = spark.read.format(fmt).load(str(path))
    rows = [tuple(str(v) for v in row) for row in df.select(*sorted(df.columns)).collect()]
    if port is not None:
        rows = [tuple(v.replace(f"127.0.0.1:{port}", "127.0.0.1:SERVICE") for v in row) for row in rows]
    return sorted(rows)


def _metrics(folder: Path, runs: int = 1) -> dict:
    """The metrics file of the last of `runs` runs."""
    files = sorted((folder / "target" / "metrics").glob("*.json"), key=lambda f: f.stat().st_mtime_ns)
    assert len(files) == runs, files
    return json.loads(files[-1].read_text())


def _counts(metrics: dict) -> dict:
    return {name: {c: m[c] for c in COUNTS} for name, m in metrics["operators"].items()}


def _service(example: str):
    spec = importlib.util.spec_from_file_location(f"{example}_service", EXAMPLES / example / "service.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _counted(app) -> tuple:
    """The service's app with every request counted by path (a real aiohttp middleware)."""
    from aiohttp import web

    calls: Counter = Counter()

    @web.middleware
    async def count(request, handler):
        calls[request.path] += 1
        return await handler(request)

    app.middlewares.append(count)
    return app, calls


def test_fraud_streaming_through_spark_connect_matches_local(tmp_path, spark, serve_app, connect_server):
    """HTTP ENRICH with dead letters, a STREAMING BROADCAST matched per micro-batch, a stage under
    the CHECKPOINT and a windowed count: the same rows, letters, metrics and service calls."""
    local_app, local_calls = _counted(_service("fraud").app())
    remote_app, remote_calls = _counted(_service("fraud").app())
    local = _copy("fraud", tmp_path / "local" / "fraud", serve_app(local_app).port)
    remote = _copy("fraud", tmp_path / "remote" / "fraud", serve_app(remote_app).port)
    run_flow(local, mode="streaming", trigger="available-now")
    result = _run_remote(remote, connect_server.url, "--mode", "streaming", "--trigger", "available-now")

    for sink, fmt in (("target/out/flagged", "parquet"), ("target/out/per_customer", "json"),
                      ("target/dlq/enrich", "text")):
        assert _table(spark, remote.parent / sink, fmt) == _table(spark, local.parent / sink, fmt), sink
    assert _table(spark, remote.parent / "target/out/flagged", "parquet")          # not trivially empty
    assert (remote.parent / "target/chk/fraud/stages").is_dir()
    local_metrics, remote_metrics = _metrics(local.parent), _metrics(remote.parent)
    assert _counts(remote_metrics) == _counts(local_metrics)
    assert remote_metrics["operators"]["enriched"]["elements_in"] > 0
    assert remote_metrics["operators"]["enriched"]["calls"] == sum(remote_calls.values())
    assert set(remote_calls) == set(local_calls) and sum(remote_calls.values()) > 0
    out = result.stdout + result.stderr
    assert "dslc: per-operator metrics" in out and "dslc: metrics written to " in out


def test_clickstream_through_spark_connect_matches_local(tmp_path, spark, serve_app, connect_server):
    """ENRICH HTTP with retries, a CACHE, timeouts and errors dead-lettered, computed once into a
    stage read by two consumers, windowed counts with a watermark."""
    service = _service("clickstream")
    local_app, remote_app = service.app(), service.app()
    local_port, remote_port = serve_app(local_app).port, serve_app(remote_app).port
    local = _copy("clickstream", tmp_path / "local" / "clickstream", local_port)
    remote = _copy("clickstream", tmp_path / "remote" / "clickstream", remote_port)
    run_flow(local)
    _run_remote(remote, connect_server.url)

    for sink, fmt in (("target/out/engaged", "parquet"), ("target/out/views_per_minute", "json"),
                      ("target/out/views_per_country", "json"), ("target/dlq/geo", "text")):
        assert _table(spark, remote.parent / sink, fmt, remote_port) == \
            _table(spark, local.parent / sink, fmt, local_port), sink
    assert _table(spark, remote.parent / "target/out/engaged", "parquet")
    assert _table(spark, remote.parent / "target/dlq/geo", "text")                  # failing IPs were lettered
    local_metrics, remote_metrics = _metrics(local.parent), _metrics(remote.parent)
    assert _counts(remote_metrics) == _counts(local_metrics)
    local_called, remote_called = local_app[service.CALLS], remote_app[service.CALLS]
    assert set(remote_called) == set(local_called)
    assert remote_metrics["operators"]["located"]["calls"] == sum(remote_called.values())


DEVICES_STREAM = """\
PIPELINE devices_stream MODE STREAMING CHECKPOINT 'target/chk' TRIGGER AVAILABLE NOW;
SET spark.sql.shuffle.partitions = 2;
SOURCE readings FROM JSON 'data/readings/'
  SCHEMA (device STRING, kind STRING, ts TIMESTAMP, temperature DOUBLE);
SOURCE threshold_updates FROM CSV 'data/thresholds/' OPTIONS (header = 'true')
  SCHEMA (kind STRING, op STRING, max_temperature DOUBLE);
BROADCAST thresholds FROM threshold_updates KEY kind OP op;
STREAM checked = PROCESS readings WITH BROADCAST thresholds USING PYTHON 'devices:check'
  RETURNS (device STRING, ts TIMESTAMP, temperature DOUBLE, max_temperature DOUBLE, status STRING);
STREAM alerts = SELECT device, ts, temperature, max_temperature FROM checked WHERE status = 'alert';
STREAM per_device = SELECT device, count(*) AS readings,
  sum(CASE WHEN status = 'alert' THEN 1 ELSE 0 END) AS alerts FROM checked GROUP BY device;
STREAM labelled = ENRICH alerts WITH PYTHON 'labels:label' RETURNS (label STRING)
  ON ERROR DEAD LETTER 'target/dlq/labels';
SINK alerts TO PARQUET 'target/out/alerts';
SINK labelled TO PYTHON 'recorder:write';
SINK per_device TO JSON 'target/out/per_device' MODE COMPLETE;
"""

LABELS = """\
def label(row):
    if row["device"] == "dev5":
        raise ValueError("no label for dev5")
    return {"label": row["device"] + "-hot"}
"""

RECORDER = """\
import json, uuid
from pathlib import Path

OUT = Path({out!r})


def write(rows):
    rows = list(rows)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"{{uuid.uuid4().hex}}.jsonl").write_text("".join(json.dumps(r, default=str) + "\\n" for r in rows))
"""


def _devices_stream(folder: Path) -> Path:
    """The devices example's PROCESS WITH BROADCAST in STREAMING over JSON readings, an ENRICH WITH
    PYTHON that dead-letters one device, a PYTHON sink (user modules shipped with the job) and a
    MODE COMPLETE file sink."""
    (folder / "data" / "readings").mkdir(parents=True)
    shutil.copytree(EXAMPLES / "devices" / "data" / "thresholds", folder / "data" / "thresholds")
    shutil.copy(EXAMPLES / "devices" / "devices.py", folder / "devices.py")
    (folder / "labels.py").write_text(LABELS)
    (folder / "recorder.py").write_text(RECORDER.format(out=str(folder / "target" / "recorded")))
    kinds = {"freezer": (-20, -16, -14, -10), "oven": (150, 185, 195, 220), "server": (40, 47, 49, 55)}
    lines = []
    for d in range(6):
        kind = sorted(kinds)[d % 3]
        lines += [json.dumps({"device": f"dev{d}", "kind": kind, "ts": f"2026-01-01T00:{i:02d}:00Z",
                              "temperature": kinds[kind][(i + d) % 4] + 0.5 * d}) for i in range(8)]
    (folder / "data" / "readings" / "1.json").write_text("\n".join(lines) + "\n")
    flow = folder / "pipeline.flow"
    flow.write_text(DEVICES_STREAM)
    return flow


def _recorded(folder: Path) -> list[str]:
    return sorted(line for f in (folder / "target" / "recorded").glob("*.jsonl") for line in f.read_text().splitlines())


def test_streaming_state_process_python_sink_and_complete_mode_through_connect(tmp_path, spark, connect_server):
    """foreachBatch on the server (the rules query, MODE COMPLETE, SINK TO PYTHON) and PROCESS WITH
    a STREAMING BROADCAST pinned per micro-batch, with a user module the server's Python lacks."""
    local, remote = tmp_path / "local", tmp_path / "remote"
    run_flow(_devices_stream(local))
    _run_remote(_devices_stream(remote), connect_server.url)

    assert _table(spark, remote / "target/out/alerts", "parquet") == _table(spark, local / "target/out/alerts", "parquet")
    per_device = _table(spark, remote / "target/out/per_device", "json")
    assert per_device == _table(spark, local / "target/out/per_device", "json")
    assert (remote / "target/out/per_device").is_symlink()          # COMPLETE: switched atomically
    assert {row[1] for row in per_device} == {"dev0", "dev2", "dev3", "dev5"}   # oven deleted by update 2
    recorded = _recorded(remote)
    alerts = _table(spark, remote / "target/out/alerts", "parquet")
    letters = _table(spark, remote / "target/dlq/labels", "text")
    assert letters == _table(spark, local / "target/dlq/labels", "text")
    assert letters and all('"operator": "labelled"' in row[0] and "no label for dev5" in row[0] for row in letters)
    assert recorded == _recorded(local) and len(recorded) + len(letters) == len(alerts) > 0
    assert all('-hot"' in line for line in recorded)
    operators = _counts(_metrics(remote))
    assert operators == _counts(_metrics(local))
    assert operators["checked"]["elements_in"] == 48 and operators["labelled"]["dead_letters"] == len(letters)

    # AVAILABLE NOW again after new readings and a rules update: only the new files are read, and
    # the broadcast state restored from the CHECKPOINT gets the update (ovens are checked again)
    for folder in (local, remote):
        _more_devices_data(folder)
    run_flow(local / "pipeline.flow")
    _run_remote(remote / "pipeline.flow", connect_server.url)
    assert _table(spark, remote / "target/out/alerts", "parquet") == _table(spark, local / "target/out/alerts", "parquet")
    per_device = _table(spark, remote / "target/out/per_device", "json")
    assert per_device == _table(spark, local / "target/out/per_device", "json")
    assert ("1", "dev1", "3") in per_device                      # 3 oven readings, one above 190
    assert _recorded(remote) == _recorded(local)
    operators = _counts(_metrics(remote, runs=2))
    assert operators == _counts(_metrics(local, runs=2))
    assert operators["checked"]["elements_in"] == 5               # the new file only


def _more_devices_data(folder: Path) -> None:
    (folder / "data" / "thresholds" / "thresholds-3.csv").write_text("kind,op,max_temperature\noven,upsert,190.0\n")
    readings = [("dev1", "oven", 0, 150.0), ("dev1", "oven", 1, 230.0), ("dev1", "oven", 2, 185.0),
                ("dev0", "freezer", 9, -30.0), ("dev0", "freezer", 10, -5.0)]
    (folder / "data" / "readings" / "2.json").write_text("".join(
        json.dumps({"device": d, "kind": k, "ts": f"2026-01-01T01:{i:02d}:00Z", "temperature": t}) + "\n"
        for d, k, i, t in readings))


def test_a_streaming_python_source_through_connect_stops_with_a_clear_error(tmp_path, connect_server):
    """Spark unpickles a Python data source's class in the server's workers before dslc could put
    the shipped runtime on their path: a clear error with a way out, not a traceback."""
    flow = _copy("devices", tmp_path / "devices")
    text = flow.read_text().replace("PIPELINE devices MODE BATCH;",
                                    "PIPELINE devices MODE STREAMING CHECKPOINT 'target/chk' TRIGGER AVAILABLE NOW;")
    flow.write_text(text.replace(" MODE OVERWRITE;", ";").replace("'target/out/per_device';",
                                                                   "'target/out/per_device' MODE COMPLETE;"))
    result = _run_remote(flow, connect_server.url, expect=1)
    assert "dslc: error: SOURCE ... FROM PYTHON in a STREAMING pipeline cannot run through Spark Connect" \
        in result.stderr
    assert "hint: run it in BATCH, or with spark-submit (dslc run FILE --master URL)" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (flow.parent / "target" / "chk").exists()       # stopped before starting any query
