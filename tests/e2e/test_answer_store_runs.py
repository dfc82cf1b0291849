"""ENRICH ... STORE in whole jobs on Spark (local[2]), with a real HTTP service that counts its
calls: keys repeated across 4 partitions paid once, a rerun paying nothing, BUDGET stopping the
job (exit code 3, the rows left) and the reruns completing it with each key paid once, the same
in STREAMING (the replayed micro-batch finds its answers in the store), and a bad store stopping
the job before any call."""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from aiohttp import web
from jobs import run_flow

pytestmark = [pytest.mark.spark, pytest.mark.slow]

FLOW = """PIPELINE paying MODE {mode} {answers};
SOURCE orders FROM JSON 'in/' SCHEMA (order_id STRING, customer_id STRING, amount DOUBLE);
STREAM spread = SELECT /*+ REPARTITION(4) */ * FROM orders WHERE amount > 0;
STREAM enriched = ENRICH spread WITH HTTP GET 'http://127.0.0.1:{port}/customers/{{customer_id}}'
  RETURNS (tier STRING)
  ASYNC UNORDERED CAPACITY 8 TIMEOUT 5s
  STORE TTL 1h {budget};
SINK enriched TO JSON 'out/enriched';
"""


def _service(serve_app, calls: Counter, delay: float = 0.01):
    import asyncio

    async def customer(request):
        key = request.match_info["id"]
        calls[key] += 1
        await asyncio.sleep(delay)
        return web.json_response({"tier": f"t-{key}"})

    app = web.Application()
    app.router.add_get("/customers/{id}", customer)
    return serve_app(app)


def _orders(folder: Path, n: int, customers: int) -> list[dict]:
    rows = [{"order_id": f"o{i}", "customer_id": f"c{i % customers}", "amount": float(i + 1)} for i in range(n)]
    (folder / "in").mkdir(parents=True, exist_ok=True)
    for part in range(2):
        (folder / f"in/{part}.json").write_text("".join(json.dumps(r) + "\n" for r in rows[part::2]))
    return rows


def _out(folder: Path) -> list[dict]:
    return [json.loads(line) for p in sorted((folder / "out/enriched").glob("*.json"))
            for line in p.read_text().splitlines() if line]


def _flow(folder: Path, port: int, mode: str = "BATCH", budget: str = "", answers: str = "") -> Path:
    pipeline = mode if mode == "BATCH" else "STREAMING CHECKPOINT 'chk' TRIGGER AVAILABLE NOW"
    flow = folder / "pipeline.flow"
    flow.write_text(FLOW.format(mode=pipeline, port=port, budget=budget, answers=answers))
    return flow


def test_keys_repeated_across_partitions_are_paid_once_and_a_rerun_pays_nothing(spark, serve_app, tmp_path):
    calls: Counter = Counter()
    server = _service(serve_app, calls)
    rows = _orders(tmp_path, 400, 25)
    flow = _flow(tmp_path, server.port)
    run_flow(flow)
    assert len(calls) == 25 and set(calls.values()) == {1}
    out = _out(tmp_path)
    assert sorted(r["order_id"] for r in out) == sorted(r["order_id"] for r in rows)
    assert all(r["tier"] == f"t-{r['customer_id']}" for r in out)
    assert (tmp_path / "target/answers.db").is_file()          # the default store: under target/
    run_flow(flow)                                              # every answer is in the store
    assert sum(calls.values()) == 25
    assert len(_out(tmp_path)) == 800


def test_a_budget_stops_the_job_and_reruns_complete_it_paying_each_key_once(spark, serve_app, tmp_path, capfd):
    calls: Counter = Counter()
    server = _service(serve_app, calls)
    rows = _orders(tmp_path, 120, 30)
    flow = _flow(tmp_path, server.port, budget="BUDGET 12 CALLS")
    for attempt in (1, 2):
        with pytest.raises(SystemExit) as stopped:
            run_flow(flow)
        assert stopped.value.code == 3
        assert sum(calls.values()) == 12 * attempt
        message = capfd.readouterr().err
        assert "BUDGET 12 CALLS of 'enriched' (line 4) is spent:" in message
        left = 120 - 4 * 12 * attempt                          # each customer has 4 orders
        assert f"{left} rows still unanswered" in message
        assert not (tmp_path / "out/enriched").exists()         # nothing written: the run stopped first
    run_flow(flow)
    assert len(calls) == 30 and set(calls.values()) == {1}
    assert sorted(r["order_id"] for r in _out(tmp_path)) == sorted(r["order_id"] for r in rows)


def test_streaming_a_replayed_micro_batch_finds_its_answers_in_the_store(spark, serve_app, tmp_path):
    calls: Counter = Counter()
    server = _service(serve_app, calls)
    rows = _orders(tmp_path, 80, 20)
    flow = _flow(tmp_path, server.port, mode="STREAMING", budget="BUDGET 8 CALLS",
                 answers="ANSWERS 'answers/store.db'")
    failures = 0
    for _ in range(5):
        try:
            run_flow(flow)
            break
        except SystemExit as stop:      # the query stops with the task's BudgetSpent: exit code 3
            assert stop.code == 3
            failures += 1
    assert failures >= 2
    assert len(calls) == 20 and set(calls.values()) == {1}      # each key paid once over every run
    # Spark's reader lists only the files in the sink's _spark_metadata log: a micro-batch that a
    # BudgetSpent stopped may have left the files of its finished tasks, never committed
    out = spark.read.json(str(tmp_path / "out/enriched")).collect()
    assert sorted(r.order_id for r in out) == sorted(r["order_id"] for r in rows)   # each row once
    assert (tmp_path / "answers/store.db").is_file()


def test_a_damaged_store_stops_the_job_before_any_call(spark, serve_app, tmp_path, capfd):
    calls: Counter = Counter()
    server = _service(serve_app, calls)
    _orders(tmp_path, 10, 5)
    (tmp_path / "target").mkdir()
    (tmp_path / "target/answers.db").write_bytes(b"\x00garbage" * 500)
    with pytest.raises(SystemExit) as stopped:
        run_flow(_flow(tmp_path, server.port))
    assert stopped.value.code == 1 and not calls
    err = capfd.readouterr().err
    assert f"dslc: error: answer store {tmp_path / 'target/answers.db'} is damaged" in err
    assert "Traceback" not in err


def test_an_unreachable_redis_stops_the_job_before_any_call(spark, serve_app, tmp_path, capfd):
    import socket
    calls: Counter = Counter()
    server = _service(serve_app, calls)
    _orders(tmp_path, 10, 5)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(SystemExit) as stopped:
        run_flow(_flow(tmp_path, server.port, answers=f"ANSWERS 'redis://127.0.0.1:{port}/0'"))
    assert stopped.value.code == 1 and not calls
    assert f"answer store redis://127.0.0.1:{port}/0 is unreachable" in capfd.readouterr().err


def test_dslc_run_exits_with_code_3_when_the_budget_is_spent(tmp_path):
    import os
    import subprocess
    import sys

    (tmp_path / "labels.py").write_text("def label(row):\n    return {'label': 'l-' + row['id']}\n")
    (tmp_path / "in").mkdir()
    (tmp_path / "in/1.json").write_text("".join(json.dumps({"id": f"k{i % 6}"}) + "\n" for i in range(18)))
    (tmp_path / "pipeline.flow").write_text(
        "SOURCE rows FROM JSON 'in/' SCHEMA (id STRING);\n"
        "STREAM labelled = ENRICH rows WITH PYTHON 'labels:label' RETURNS (label STRING) STORE BUDGET 4 CALLS;\n"
        "SINK labelled TO JSON 'out/';\n")
    env = {k: v for k, v in os.environ.items() if k not in ("DSLC_FLOW_FOLDER", "PYSPARK_PYTHON")}
    command = [sys.executable, "-m", "dslc.compiler.cli", "run", str(tmp_path / "pipeline.flow"), "--master", "local[1]"]
    first = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    output = first.stdout + first.stderr        # spark-submit passes the driver's stderr on as its stdout
    assert first.returncode == 3, output[-3000:]
    assert "BUDGET 4 CALLS of 'labelled' (line 2) is spent: 6 rows still unanswered" in output
    assert "Traceback" not in output and not (tmp_path / "out").exists()
    second = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert second.returncode == 0, second.stderr[-3000:]
    out = [json.loads(line) for p in (tmp_path / "out").glob("*.json") for line in p.read_text().splitlines()]
    assert sorted(r["label"] for r in out) == sorted(f"l-k{i % 6}" for i in range(18))


def test_a_redis_password_given_as_a_secret_is_filled_and_never_shown(spark, serve_app, tmp_path, capfd,
                                                                       monkeypatch):
    """#48 item 19: `ANSWERS 'redis://:${REDIS_PASSWORD}@...'` is filled on the driver and the
    executors (the answers are stored: a rerun pays nothing), and the password shows nowhere."""
    import shutil
    import socket
    import subprocess
    import time

    password = "pw-e2e-71c4-never-shown"
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    redis = subprocess.Popen([shutil.which("redis-server"), "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                              "--appendonly", "no", "--dir", str(tmp_path), "--requirepass", password],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(400):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                time.sleep(0.05)
        monkeypatch.setenv("REDIS_PASSWORD", password)
        calls: Counter = Counter()
        server = _service(serve_app, calls)
        _orders(tmp_path, 20, 5)
        flow = _flow(tmp_path, server.port, answers=f"ANSWERS 'redis://:${{REDIS_PASSWORD}}@127.0.0.1:{port}/0'")
        run_flow(flow)
        assert sorted(calls) == [f"c{i}" for i in range(5)] and set(calls.values()) == {1}
        run_flow(flow)
        assert set(calls.values()) == {1}                    # every answer came from the store
        out = capfd.readouterr()
        assert password not in out.out + out.err + (tmp_path / "job.py").read_text()
    finally:
        redis.kill()
        redis.wait()
