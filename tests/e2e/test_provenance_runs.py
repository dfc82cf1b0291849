"""PROVENANCE AS col in whole jobs on Spark (local[2]) against a real HTTP service that counts its
calls: a first run's rows say `call` (a retried key 2 attempts), a second run with STORE says
`store` with the first run's times, STREAMING (AVAILABLE NOW) gives the same structs as BATCH,
the struct flows through SQL into a sink, and the secret in the URL never reaches a row."""
from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path

import pytest
from aiohttp import web
from jobs import run_flow

pytestmark = pytest.mark.spark

SECRET = "prov-secret-9f3a"
FLOW = """PIPELINE traced MODE {mode} ANSWERS '{answers}';
SOURCE orders FROM JSON 'in/' SCHEMA (order_id STRING, customer_id STRING);
STREAM spread = SELECT /*+ REPARTITION(3) */ * FROM orders;
STREAM enriched = ENRICH spread WITH HTTP GET 'http://127.0.0.1:{port}/k/${{PROV_KEY}}/customers/{{customer_id}}'
  RETURNS (tier STRING)
  ASYNC UNORDERED CAPACITY 4 TIMEOUT 5s RETRY 2 BACKOFF 10ms
  STORE TTL 1h
  PROVENANCE AS how;
STREAM shown = SELECT order_id, customer_id, tier, how, how.source AS source FROM enriched;
SINK shown TO JSON 'out/{name}';
"""
# what is the same in every run of the same answers (times and latencies are a run's own)
STABLE = ("source", "operator", "line", "key", "attempts", "status", "url")


def _service(serve_app, calls: Counter, busy: set[str]):
    async def customer(request):
        assert request.match_info["secret"] == SECRET       # the secret was filled to call
        key = request.match_info["id"]
        calls[key] += 1
        if key in busy:
            busy.discard(key)
            return web.json_response({"error": "busy"}, status=503)   # retried: 2 attempts
        await asyncio.sleep(0.005)
        return web.json_response({"tier": f"t-{key}"})

    app = web.Application()
    app.router.add_get("/k/{secret}/customers/{id}", customer)
    return serve_app(app)


def _run(folder: Path, port: int, name: str, mode: str, answers: Path | str) -> dict[str, dict]:
    pipeline = "BATCH" if mode == "BATCH" else "STREAMING CHECKPOINT 'chk/{}' TRIGGER AVAILABLE NOW".format(name)
    flow = folder / "pipeline.flow"
    flow.write_text(FLOW.format(mode=pipeline, port=port, name=name, answers=answers))
    run_flow(flow)
    text = "".join(p.read_text() for p in sorted((folder / "out" / name).glob("*.json")))
    assert SECRET not in text
    return {row["order_id"]: row for row in map(json.loads, text.splitlines()) if row}


def test_runs_say_where_each_answer_came_from_in_both_modes(spark, serve_app, tmp_path, monkeypatch):
    monkeypatch.setenv("PROV_KEY", SECRET)
    calls: Counter = Counter()
    busy = {"c1"}
    server = _service(serve_app, calls, busy)
    (tmp_path / "in").mkdir()
    orders = [{"order_id": f"o{i}", "customer_id": f"c{i}"} for i in range(6)]
    (tmp_path / "in/orders.json").write_text("".join(json.dumps(o) + "\n" for o in orders))

    first = _run(tmp_path, server.port, "first", "BATCH", tmp_path / "answers.db")
    assert sum(calls.values()) == 7                            # six keys, one retried
    assert {r["source"] for r in first.values()} == {"call"}
    how = first["o1"]["how"]
    assert (how["operator"], how["line"], how["status"], how["attempts"]) == ("enriched", 4, 200, 2)
    assert how["url"].endswith("/k/${PROV_KEY}/customers/c1")  # as written: the secret is a name
    assert {first[o]["how"]["attempts"] for o in first if o != "o1"} == {1}

    second = _run(tmp_path, server.port, "second", "BATCH", tmp_path / "answers.db")
    assert sum(calls.values()) == 7                            # every answer came from the store
    for order, row in second.items():
        then = first[order]["how"]
        assert (row["how"]["source"], row["how"]["attempts"]) == ("store", 0)
        assert row["how"]["answered_at"] == then["answered_at"]   # its original time
        assert row["how"]["key"] == then["key"] and row["tier"] == first[order]["tier"]

    busy.add("c1")
    streamed = _run(tmp_path, server.port, "streamed", "STREAMING", tmp_path / "fresh.db")
    assert sum(calls.values()) == 14                           # a fresh store: called again (c1 twice)
    assert {o: {k: r["how"][k] for k in STABLE} for o, r in streamed.items()} == \
        {o: {k: r["how"][k] for k in STABLE} for o, r in first.items()}


def _figures(folder: Path) -> dict:
    return json.loads((folder / "metrics.json").read_text())["operators"]["enriched"]


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
@pytest.mark.parametrize("mode", ["BATCH", "STREAMING"])
def test_a_warm_rerun_joins_its_answers_with_the_structs_the_operator_makes(spark, serve_app, tmp_path, request,
                                                                             monkeypatch, mode, backend):
    """With PROVENANCE a warm rerun still matches its stored answers before the operator (looked up
    in the chain's pass, or joined by Spark): the struct made on the driver from the stored note is
    the one the operator makes when each row asks the store (`SET spark.dslc.store.join = false`),
    field for field (source `store`, no attempt, the first run's time). Redis's answers join too
    (their notes read by MGET), not row by row."""
    monkeypatch.setenv("PROV_KEY", SECRET)
    monkeypatch.setenv("DSLC_METRICS_FILE", str(tmp_path / "metrics.json"))
    calls: Counter = Counter()
    server = _service(serve_app, calls, {"c1"})
    (tmp_path / "in").mkdir()
    orders = [{"order_id": f"o{i}", "customer_id": f"c{i % 8}"} for i in range(40)]
    (tmp_path / "in/orders.json").write_text("".join(json.dumps(o) + "\n" for o in orders))
    answers = tmp_path / "answers.db" if backend == "sqlite" else request.getfixturevalue("redis_server").url(0)
    first = _run(tmp_path, server.port, "first", mode, answers)
    paid = sum(calls.values())
    assert paid == 9 and _figures(tmp_path)["store_joined"] == 0          # eight keys, one retried

    warm = {}
    for way in ("false", "true", "spark"):     # row by row; looked up in the pass; Spark's join
        spark.conf.set("spark.dslc.store.join", way)
        try:
            warm[way] = _run(tmp_path, server.port, f"warm-{way}", mode, answers)
        finally:
            spark.conf.unset("spark.dslc.store.join")
        assert _figures(tmp_path)["store_joined"] == (0 if way == "false" else len(orders))
        assert _figures(tmp_path)["store_hits"] == len(orders)
    assert sum(calls.values()) == paid                                    # nothing paid again
    assert warm["true"] == warm["spark"] == warm["false"]                 # every field of every row
    for order, row in warm["true"].items():
        how, then = row["how"], first[order]["how"]
        assert (how["source"], how["attempts"], how.get("latency_ms")) == ("store", 0, None)   # JSON leaves NULL out
        assert {k: how[k] for k in ("answered_at", "key", "status", "url", "operator", "line")} == \
            {k: then[k] for k in ("answered_at", "key", "status", "url", "operator", "line")}
