"""`dslc explain FILE --estimate` calls nothing, and its calls are within 10% of what the run then
makes: on the fraud example (the service counts the requests) and on a workload with a filter
before the ENRICH and skewed keys; after the run, the store holds them and the estimate says so.
On the tickets example (MODEL) its tokens are within 10% of the tokens the service then bills,
with the completion assumed and with it read from the run's recording, and a BUDGET n TOKENS
gets its verdict."""
from __future__ import annotations

import importlib.util
import json
import random
import shutil
from collections import Counter
from pathlib import Path

import pytest
from aiohttp import web
from jobs import run_flow

pytestmark = pytest.mark.spark
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _estimate(flow: Path, **kw):
    from dslc.compiler.cli.estimate_command import estimates
    return {e.operator: e for e in estimates(str(flow), **kw)}


def _counting(app: web.Application, calls: Counter) -> web.Application:
    @web.middleware
    async def count(request, handler):
        calls[request.path] += 1
        return await handler(request)

    app.middlewares.append(count)
    return app


def test_fraud_example_estimate_then_run(spark, serve_app, tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("fraud_service", EXAMPLES / "fraud/service.py")
    service = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(service)
    calls: Counter = Counter()
    server = serve_app(_counting(service.app(), calls))
    folder = tmp_path / "fraud"
    shutil.copytree(EXAMPLES / "fraud", folder, ignore=shutil.ignore_patterns("target"))
    flow = folder / "pipeline.flow"
    flow.write_text(flow.read_text().replace("127.0.0.1:8765", f"127.0.0.1:{server.port}"))

    before = _estimate(flow, latency="40ms")["enriched"]
    assert not calls, "the estimate called the service"
    assert before.stored_keys == 0 and before.rows >= before.distinct_keys > 0
    run_flow(flow)
    made = sum(calls.values())
    assert abs(before.calls - made) <= 0.1 * made, (before, made)
    after = _estimate(flow)["enriched"]
    assert after.stored_keys == before.distinct_keys and after.calls == 0
    assert sum(calls.values()) == made


FLOW = """PIPELINE skewed MODE BATCH;
SOURCE events FROM JSON 'in/' SCHEMA (id STRING, user STRING, amount DOUBLE);
STREAM big = SELECT * FROM events WHERE amount > 50;
STREAM scored = ENRICH big WITH HTTP GET 'http://127.0.0.1:{port}/u/{{user}}' RETURNS (score DOUBLE)
  ASYNC UNORDERED CAPACITY 16 TIMEOUT 5s RETRY 2 STORE RATE 2000 PER SECOND BUDGET {budget} CALLS;
SINK scored TO JSON 'out/scored';
"""


def test_a_filtered_skewed_workload_and_the_budget_verdict(spark, serve_app, tmp_path):
    calls: Counter = Counter()

    async def user(request):
        return web.json_response({"score": 1.0})

    app = web.Application()
    app.router.add_get("/u/{id}", user)
    server = serve_app(_counting(app, calls))
    rng = random.Random(3)
    users = [f"u{min(int(rng.paretovariate(1.1)), 400)}" for _ in range(3000)]   # Zipf-like keys
    (tmp_path / "in").mkdir()
    (tmp_path / "in/1.json").write_text("".join(
        json.dumps({"id": f"e{i}", "user": u, "amount": float(rng.randint(0, 100))}) + "\n" for i, u in enumerate(users)))
    flow = tmp_path / "pipeline.flow"
    flow.write_text(FLOW.format(port=server.port, budget=10))
    short = _estimate(flow, sample=50, latency="10ms")["scored"]
    assert short.budget_enough is False and short.seconds >= short.calls / 2000
    flow.write_text(FLOW.format(port=server.port, budget=100000))
    est = _estimate(flow, sample=50)["scored"]
    assert est.budget_enough is True and not calls
    assert est.calls_if_all_retried == 3 * est.calls           # RETRY 2: the most a failing service costs
    assert f"RETRY 2: up to {3 * est.calls} calls if every call fails" in " ".join(est.notes)
    run_flow(flow)
    made = sum(calls.values())
    assert abs(est.calls - made) <= 0.1 * made
    assert est.rows == sum(1 for line in (tmp_path / "in/1.json").read_text().splitlines()
                           if json.loads(line)["amount"] > 50)
    after = _estimate(flow, sample=50)["scored"]               # a sample of the keys is looked up
    assert after.sampled and after.calls <= 0.1 * made


def test_tickets_example_tokens_within_ten_percent_of_the_service_bill(spark, tmp_path, capfd):
    from jobs import copy_example

    from dslc.compiler.cli.estimate_command import render
    from dslc.runtime.wrappers import recording
    from dslc.testing.openai_service import OpenAIService, serve_in_thread

    spec = importlib.util.spec_from_file_location("tickets_service", EXAMPLES / "tickets/service.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with serve_in_thread(OpenAIService(models=("gpt-4.1-mini",), labeller=module.LABELS)) as running:
        flow = copy_example("tickets", tmp_path / "tickets", port=running.port)
        assumed = _estimate(flow)["labelled"]
        assert running.stats["chat_calls"] == 0, "the estimate called the model"
        context = spark.sparkContext
        context.setLocalProperty(recording.RECORD_PROPERTY, recording.setting_json(tmp_path / "rec"))
        try:
            run_flow(flow)
        finally:
            context.setLocalProperty(recording.RECORD_PROPERTY, None)
        stats = running.stats
        billed = stats["total_tokens"]
        assert stats["chat_calls"] == 12 and billed > 0
        assert assumed.calls == 12 and assumed.completion_basis.startswith("assumed")
        assert abs(assumed.tokens - billed) <= 0.1 * billed, (assumed, stats)
        assert abs(assumed.prompt_tokens - stats["prompt_tokens"]) <= 0.1 * stats["prompt_tokens"]
        recorded = _estimate(flow, recording=str(tmp_path / "rec"))["labelled"]
        assert recorded.completion_basis == "the recording's answers"
        assert abs(recorded.completion_tokens - stats["completion_tokens"]) <= 0.1 * stats["completion_tokens"]
        assert abs(recorded.tokens - billed) <= 0.1 * billed, (recorded, stats)

        # with STORE and a BUDGET n TOKENS: the verdict, then only the keys not yet stored cost tokens
        text = flow.read_text()
        assert "ON ERROR DEAD LETTER 'target/dlq/labels' " in text
        text = text.replace("ON ERROR DEAD LETTER 'target/dlq/labels' ",
                            "ON ERROR DEAD LETTER 'target/dlq/labels' STORE BUDGET 500 TOKENS ")
        flow.write_text(text.replace("CHECKPOINT 'target/chk/tickets'", "CHECKPOINT 'target/chk2'"))
        budgeted = _estimate(flow)["labelled"]
        assert budgeted.budget_unit == "TOKENS" and budgeted.budget_enough is False
        assert budgeted.budget_spent == budgeted.tokens > 500 and budgeted.stored_keys == 0
        shown = render("pipeline.flow", [budgeted])
        assert f"500: short by {budgeted.tokens - 500}" in shown
        assert f"BUDGET 500 TOKENS stops the run; {-(-budgeted.tokens // 500)} runs complete it" in shown
        running.reset()
        with pytest.raises(SystemExit) as stopped:
            run_flow(flow)
        assert stopped.value.code == 3 and "BUDGET 500 TOKENS of 'labelled'" in capfd.readouterr().err
        paid = running.stats
        left = _estimate(flow)["labelled"]
        assert left.stored_keys == paid["chat_calls"] > 0 and left.calls == 12 - paid["chat_calls"]
        assert abs(left.tokens - (billed - paid["total_tokens"])) <= 0.1 * billed, (left, paid)


STREAMING = """PIPELINE rated MODE STREAMING CHECKPOINT 'chk';
SOURCE events FROM JSON 'in/' SCHEMA (id STRING, user STRING);
STREAM scored = ENRICH events WITH HTTP GET 'http://127.0.0.1:9/u/{user}'
    HEADERS ('Authorization' = 'Bearer ${SCORE_TOKEN}')
  RETURNS (score DOUBLE) ASYNC UNORDERED CAPACITY 4 TIMEOUT 1s;
STREAM per_user = SELECT user, count(*) AS n FROM scored GROUP BY user;
SINK per_user TO PARQUET 'out' MODE COMPLETE;
"""


def _streaming_flow(tmp_path: Path) -> Path:
    (tmp_path / "in").mkdir()
    (tmp_path / "in/1.json").write_text("".join(json.dumps({"id": f"e{i}", "user": f"u{i % 3}"}) + "\n"
                                                for i in range(7)))
    flow = tmp_path / "pipeline.flow"
    flow.write_text(STREAMING)
    return flow


def test_a_missing_secret_stops_the_estimate_before_spark_starts(tmp_path):
    """Exit 2 naming the secret and where it was looked for; with no Java at hand, so a Spark
    started first would have failed otherwise."""
    import os
    import subprocess
    import sys

    flow = _streaming_flow(tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "SCORE_TOKEN"}
    env.update(JAVA_HOME=str(tmp_path / "no-java"), PATH=str(Path(sys.executable).parent))
    half = tmp_path / "other.env"
    half.write_text("OTHER=1\n")
    for extra, where in (([], "no secrets file: --secrets FILE"), (["--secrets", str(half)], f"secrets file {half}")):
        done = subprocess.run([sys.executable, "-m", "dslc.compiler.cli", "explain", str(flow), "--estimate", *extra],
                              env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 2, done.stderr
        assert done.stderr.startswith("dslc: error: secret SCORE_TOKEN not set: looked in the environment")
        assert where in done.stderr and "Traceback" not in done.stderr and done.stdout == ""


def test_a_streaming_file_in_mode_complete_is_estimated_with_its_secrets_file(spark, tmp_path, capsys):
    from dslc.compiler.cli.main import main

    flow = _streaming_flow(tmp_path)
    secrets_file = tmp_path / "secrets.env"
    secrets_file.write_text("SCORE_TOKEN=tok-4c1d-not-to-be-shown\n")
    assert main(["explain", str(flow), "--estimate", "--secrets", str(secrets_file), "--format", "json"]) == 0
    out = capsys.readouterr()
    [scored] = json.loads(out.out)
    assert (scored["operator"], scored["rows"], scored["distinct_keys"], scored["calls"]) == ("scored", 7, 3, 7)     # no CACHE or STORE: a call per row
    assert "tok-4c1d" not in out.out + out.err
