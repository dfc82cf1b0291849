"""A warm rerun's stored answers matched to their rows before the operator
(runtime/spark/stored_join.py: looked up in the chain's pass on a local master, joined by Spark
elsewhere), on Spark (local[2]) with a real HTTP service that counts its calls: the rows are
exactly the cold run's in BATCH and STREAMING, ORDERED and UNORDERED, nothing is called again,
and the rows matched are counted (`store_joined`); answers that cannot be joined (a miss, two
results) still come from the store through the operator; a changed request (another URL) joins
nothing and pays again."""
from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path

import pytest
from aiohttp import web
from jobs import run_flow

pytestmark = pytest.mark.spark

FLOW = """PIPELINE warm MODE {mode} ANSWERS 'answers.db';
SOURCE orders FROM JSON 'in/' SCHEMA (order_id STRING, customer_id STRING, region INT, amount DOUBLE);
STREAM enriched = ENRICH orders WITH HTTP GET 'http://127.0.0.1:{port}/{path}/{{region}}/{{customer_id}}'
  RETURNS (tier STRING, score DOUBLE, visits BIGINT, vip BOOLEAN)
  ASYNC {order} CAPACITY 8 TIMEOUT 5s ON MISS NULL
  STORE TTL 1h;
STREAM big = SELECT order_id, customer_id, tier, score, visits, vip FROM enriched WHERE amount > 2;
SINK big TO JSON 'out/big';
"""


def _service(serve_app, calls: Counter):
    async def customer(request):
        key = request.match_info["id"]
        calls[key] += 1
        number = int(key[1:])
        if number % 7 == 3:
            return web.json_response({}, status=404)                    # a miss: not joined
        if number % 7 == 5:                                             # two results: not joined
            return web.json_response([{"tier": "a", "score": 1, "visits": 1, "vip": True},
                                      {"tier": "b", "score": 2.5, "visits": 2, "vip": False}])
        return web.json_response({"tier": f"t-{key}", "score": number / 4, "visits": number * 10 ** 10,
                                  "vip": number % 2 == 0, "other": "ignored"} if number % 7 else
                                 {"tier": None, "score": 3})            # missing fields: NULL, joined
    app = web.Application()
    app.router.add_get("/{path}/{region}/{id}", customer)
    return serve_app(app)


def _run(folder: Path, port: int, mode: str, order: str, path: str = "customers") -> list[dict]:
    pipeline = mode if mode == "BATCH" else "STREAMING CHECKPOINT 'chk' TRIGGER AVAILABLE NOW"
    flow = folder / "pipeline.flow"
    flow.write_text(FLOW.format(mode=pipeline, port=port, order=order, path=path))
    for old in (folder / "chk", folder / "out"):     # each run reads every file again
        if old.exists():
            import shutil
            shutil.rmtree(old)
    metrics = folder / "metrics.json"
    run_flow(flow)
    rows = [json.loads(line) for p in sorted((folder / "out/big").glob("*.json")) for line in p.read_text().splitlines()]
    figures = json.loads(metrics.read_text())["operators"]["enriched"]
    return sorted(rows, key=lambda r: (r["order_id"], json.dumps(r, sort_keys=True))), figures


@pytest.mark.parametrize("mode, order", [("BATCH", "UNORDERED"), ("BATCH", "ORDERED"),
                                         ("STREAMING", "UNORDERED"), ("STREAMING", "ORDERED")])
def test_a_warm_rerun_joins_its_answers_and_makes_the_same_rows(spark, serve_app, tmp_path, monkeypatch, mode, order):
    monkeypatch.setenv("DSLC_METRICS_FILE", str(tmp_path / "metrics.json"))
    calls: Counter = Counter()
    server = _service(serve_app, calls)
    (tmp_path / "in").mkdir()
    orders = [{"order_id": f"o{i}", "customer_id": f"c{i % 40}", "region": i % 3, "amount": float(i % 5)}
              for i in range(600)]
    for part in range(3):
        (tmp_path / f"in/{part}.json").write_text("".join(json.dumps(r) + "\n" for r in orders[part::3]))
    reaching = [r for r in orders if r["amount"] > 2]      # the WHERE is pushed below the ENRICH
    cold, cold_figures = _run(tmp_path, server.port, mode, order)
    paid = sum(calls.values())
    assert paid == len({(r["region"], r["customer_id"]) for r in reaching})    # each request once
    assert cold_figures["store_joined"] == 0                                     # nothing stored yet

    warm, figures = _run(tmp_path, server.port, mode, order)
    assert sum(calls.values()) == paid                                           # nothing paid again
    assert warm == cold
    plain = [r for r in reaching if int(r["customer_id"][1:]) % 7 not in (3, 5)]
    assert figures["store_hits"] == len(reaching)
    if order == "UNORDERED":     # every joinable row passes the operator by
        assert figures["store_joined"] == len(plain)
    else:                        # a batch with a miss or two results goes through the operator whole
        assert 0 <= figures["store_joined"] <= len(plain)
    assert figures["elements_in"] == len(reaching)
    assert figures["elements_out"] == len(reaching) + sum(1 for r in reaching if int(r["customer_id"][1:]) % 7 == 5)


@pytest.mark.parametrize("mode", ["BATCH", "STREAMING"])
def test_answers_looked_up_in_the_pass_and_joined_by_spark_make_the_same_rows(spark, serve_app, tmp_path,
                                                                              monkeypatch, mode):
    """On a local master the chain's pass looks the stored answers up in a file the driver wrote
    (core/stored_answers.py); elsewhere, or with `SET spark.dslc.store.join = spark`, Spark joins
    them. Both make the cold run's rows and call nothing."""
    from dslc.runtime.spark import stored_join

    monkeypatch.setenv("DSLC_METRICS_FILE", str(tmp_path / "metrics.json"))
    calls: Counter = Counter()
    server = _service(serve_app, calls)
    (tmp_path / "in").mkdir()
    orders = [{"order_id": f"o{i}", "customer_id": f"c{i % 30}", "region": i % 2, "amount": 9.0} for i in range(200)]
    for part in range(2):
        (tmp_path / f"in/{part}.json").write_text("".join(json.dumps(r) + "\n" for r in orders[part::2]))
    cold, _ = _run(tmp_path, server.port, mode, "UNORDERED")
    paid = sum(calls.values())
    specs = []
    join = stored_join.join

    def spied(*arguments):
        joined, spec = join(*arguments)
        specs.append(spec)
        return joined, spec

    monkeypatch.setattr(stored_join, "join", spied)
    looked_up, looked_up_figures = _run(tmp_path, server.port, mode, "UNORDERED")
    spark.conf.set("spark.dslc.store.join", "spark")     # what `SET spark.dslc.store.join = spark;` does
    try:
        by_spark, by_spark_figures = _run(tmp_path, server.port, mode, "UNORDERED")
    finally:
        spark.conf.unset("spark.dslc.store.join")
    assert [s.table is not None for s in specs] == [True, False]       # one run each way
    assert looked_up == by_spark == cold
    assert sum(calls.values()) == paid
    plain = sum(1 for r in orders if int(r["customer_id"][1:]) % 7 not in (3, 5))
    assert looked_up_figures["store_joined"] == by_spark_figures["store_joined"] == plain


def test_another_request_joins_nothing_and_pays_again(spark, serve_app, tmp_path, monkeypatch):
    monkeypatch.setenv("DSLC_METRICS_FILE", str(tmp_path / "metrics.json"))
    calls: Counter = Counter()
    server = _service(serve_app, calls)
    (tmp_path / "in").mkdir()
    orders = [{"order_id": f"o{i}", "customer_id": f"c{i % 10}", "region": 1, "amount": 9.0} for i in range(50)]
    (tmp_path / "in/0.json").write_text("".join(json.dumps(r) + "\n" for r in orders))
    _run(tmp_path, server.port, "BATCH", "UNORDERED")
    assert sum(calls.values()) == 10
    rows, figures = _run(tmp_path, server.port, "BATCH", "UNORDERED", path="clients")
    assert figures["store_joined"] == 0
    assert sum(calls.values()) == 20          # another request for each key: paid once more
    assert len(rows) == 55                    # c5 answers two results


CHAINED = """PIPELINE warm MODE BATCH ANSWERS 'answers.db';
SOURCE orders FROM JSON 'in/' SCHEMA (order_id STRING, customer_id STRING, region INT, amount DOUBLE);
STREAM tiers = ENRICH orders WITH HTTP GET 'http://127.0.0.1:{port}/customers/{{region}}/{{customer_id}}'
  RETURNS (tier STRING) ASYNC UNORDERED CAPACITY 8 TIMEOUT 5s STORE;
STREAM scored = ENRICH tiers WITH HTTP GET 'http://127.0.0.1:{port}/tiers/{{region}}/{{tier}}'
  RETURNS (score DOUBLE) ASYNC ORDERED CAPACITY 8 TIMEOUT 5s STORE;
SINK scored TO JSON 'out/big';
"""


def test_chained_enriches_are_joined_each_in_its_own_pass(spark, serve_app, tmp_path, monkeypatch):
    """Two ENRICH ... STORE chained in one pass: a warm rerun joins each (the chain runs in two
    passes) and makes the cold run's rows, calling nothing."""
    monkeypatch.setenv("DSLC_METRICS_FILE", str(tmp_path / "metrics.json"))
    calls: Counter = Counter()

    async def answer(request):
        key = request.match_info["id"]
        calls[(request.match_info["path"], key)] += 1
        return web.json_response({"tier": f"t{int(key[1:]) % 3}"} if request.match_info["path"] == "customers"
                                 else {"score": len(key) * 1.5})

    app = web.Application()
    app.router.add_get("/{path}/{region}/{id}", answer)
    server = serve_app(app)
    (tmp_path / "in").mkdir()
    orders = [{"order_id": f"o{i}", "customer_id": f"c{i % 12}", "region": 7, "amount": 1.0} for i in range(90)]
    (tmp_path / "in/0.json").write_text("".join(json.dumps(r) + "\n" for r in orders))
    flow = tmp_path / "pipeline.flow"
    flow.write_text(CHAINED.format(port=server.port))
    job = run_flow(flow)
    assert job.read_text().count("chains.run_chain(") == 1        # the two ENRICH are one chain

    def read() -> list[dict]:
        return sorted((json.loads(line) for p in (tmp_path / "out/big").glob("*.json")
                       for line in p.read_text().splitlines()), key=lambda r: r["order_id"])

    cold = read()
    paid = sum(calls.values())
    assert paid == 12 + 3
    import shutil
    shutil.rmtree(tmp_path / "out")
    run_flow(flow)
    assert sum(calls.values()) == paid
    assert read() == cold and len(cold) == 90
    figures = json.loads((tmp_path / "metrics.json").read_text())["operators"]
    assert figures["tiers"]["store_joined"] == 90
    assert figures["scored"]["store_joined"] > 0 and figures["scored"]["store_hits"] == 90
    # the join turned off: every row asks the store, with the same rows and no call
    flow.write_text(CHAINED.format(port=server.port).replace("\nSOURCE", "\nSET spark.dslc.store.join = false;\nSOURCE", 1))
    shutil.rmtree(tmp_path / "out")
    try:
        run_flow(flow)
    finally:
        spark.conf.unset("spark.dslc.store.join")     # the suite's session outlives this job's SET
    assert sum(calls.values()) == paid and read() == cold
    figures = json.loads((tmp_path / "metrics.json").read_text())["operators"]
    assert figures["tiers"]["store_joined"] == 0 and figures["tiers"]["store_hits"] == 90


def test_answers_parsed_by_arrow_are_the_rows_from_json_makes(spark, monkeypatch):
    """The driver parses the stored answers into typed columns with Arrow; Spark's from_json is
    the reference (and the fallback for a value Arrow cannot read as its type): the same rows for
    every type joinable.py writes, a RETURNS name with a space, text beyond ASCII and nulls."""
    import pyarrow as pa
    from pyspark.sql.types import StructType

    from dslc.runtime.spark import stored_join

    args = StructType.fromDDL("customer_id STRING, region INT, small TINYINT, mid SMALLINT, flag BOOLEAN")
    returns = StructType.fromDDL("`the tier` STRING, score DOUBLE, ratio FLOAT, visits BIGINT, vip BOOLEAN")
    answers = [
        (json.dumps({"customer_id": "c1", "region": 7, "small": -128, "mid": 32767, "flag": True}),
         json.dumps({"the tier": "gold – ü\n€", "score": 0.1, "ratio": 1.5, "visits": 2**62, "vip": False})),
        (json.dumps({"customer_id": "c2", "region": -1, "small": 0, "mid": -5, "flag": False}),
         json.dumps({"the tier": None, "score": 1e300, "ratio": -3.25, "visits": None, "vip": None})),
    ]
    keys = [f"__dslc_k{i}" for i in range(len(args.fields))]
    by_arrow = stored_join._stored(spark, answers, args, returns, keys)

    def refuse(*_):
        raise pa.ArrowInvalid("forced: from_json parses these")

    monkeypatch.setattr(stored_join, "_parsed", refuse)
    by_spark = stored_join._stored(spark, answers, args, returns, keys)
    assert by_arrow.schema == by_spark.schema
    rows = sorted(by_arrow.collect(), key=lambda r: r[0])
    assert rows == sorted(by_spark.collect(), key=lambda r: r[0])
    assert rows[0]["the tier"] == "gold – ü\n€" and rows[0]["visits"] == 2**62 and rows[1]["score"] == 1e300



def test_the_provenance_struct_joined_by_spark_is_the_same_whichever_parses_the_answers(spark, monkeypatch):
    """With PROVENANCE the answers' file also holds each answer's struct (stored_provenance.py),
    named and typed as the chain's output has it, when Arrow parses the answers and when from_json does."""
    import pyarrow as pa
    from pyspark.sql.types import StructType

    from dslc.runtime import config as C
    from dslc.runtime.spark import stored_join
    from dslc.runtime.spark.stored_provenance import Noted

    op = C.Enrich(name="enriched", line=3, call=C.HttpCall("http://h/c/{customer_id}"),
                  returns=(C.Column("tier", "STRING"),), key_columns=("customer_id",), provenance="how")
    args, returns = StructType.fromDDL("customer_id STRING"), StructType.fromDDL("tier STRING")
    stored = [('{"customer_id":"c1"}', '{"tier":"gold"}', '["GET","http://h/c/c1"]',
               '{"status":200,"url":"http://h/c/c1","answered_at":1700000000.1234567}', 1700000001.0),
              ('{"customer_id":"c2"}', '{"tier":null}', '["GET","http://h/c/c2"]', None, 1700000002.5)]
    answers = Noted(op).entries(stored)
    by_arrow = stored_join._stored(spark, answers, args, returns, ["__dslc_k0"], op)

    def refuse(*_):
        raise pa.ArrowInvalid("forced: from_json parses these")

    monkeypatch.setattr(stored_join, "_parsed", refuse)
    by_spark = stored_join._stored(spark, answers, args, returns, ["__dslc_k0"], op)
    assert by_arrow.schema == by_spark.schema and by_arrow.columns == ["__dslc_k0", "tier", "how", stored_join.FLAG]
    rows = sorted(by_arrow.collect(), key=lambda r: r[0])
    assert rows == sorted(by_spark.collect(), key=lambda r: r[0])
    first, second = rows[0]["how"], rows[1]["how"]
    assert (first["source"], first["attempts"], first["latency_ms"], first["status"]) == ("store", 0, None, 200)
    assert first["answered_at"].timestamp() == 1700000000.123457             # the note's time, to the µs
    assert (second["status"], second["answered_at"].timestamp()) == (None, 1700000002.5)   # no note: the stored time
    assert first["key"] == hashlib.sha256(b'["GET","http://h/c/c1"]').hexdigest()

GROWN = """PIPELINE warm MODE BATCH ANSWERS 'answers.db';
SOURCE orders FROM JSON 'in/' SCHEMA (order_id STRING, customer_id STRING, region INT, amount DOUBLE);
STREAM enriched = ENRICH orders WITH HTTP GET 'http://127.0.0.1:{port}/customers/{{region}}/{{customer_id}}'
  RETURNS ({returns}) ASYNC UNORDERED CAPACITY 8 TIMEOUT 5s ON MISS NULL STORE;
SINK enriched TO JSON 'out/big';
"""


def test_answers_stored_under_other_returns_are_not_joined(spark, serve_app, tmp_path, monkeypatch):
    """#48 item 18: after RETURNS gains a column, a warm rerun does not join the answers stored
    with the old RETURNS (that column NULL in every row): the operator finds them in the store,
    where the whole answer holds the new column, and calls nothing again."""
    monkeypatch.setenv("DSLC_METRICS_FILE", str(tmp_path / "metrics.json"))
    calls: Counter = Counter()
    server = _service(serve_app, calls)
    (tmp_path / "in").mkdir()
    orders = [{"order_id": f"o{i}", "customer_id": f"c{i % 10 + 1}", "region": 1, "amount": 9.0} for i in range(30)]
    (tmp_path / "in/0.json").write_text("".join(json.dumps(r) + "\n" for r in orders))

    def run(returns: str) -> tuple[list[dict], dict]:
        flow = tmp_path / "pipeline.flow"
        flow.write_text(GROWN.format(port=server.port, returns=returns))
        import shutil
        shutil.rmtree(tmp_path / "out", ignore_errors=True)
        run_flow(flow)
        rows = [json.loads(line) for p in sorted((tmp_path / "out/big").glob("*.json"))
                for line in p.read_text().splitlines()]
        return rows, json.loads((tmp_path / "metrics.json").read_text())["operators"]["enriched"]

    run("tier STRING")
    paid = sum(calls.values())
    rows, figures = run("tier STRING, score DOUBLE")
    assert sum(calls.values()) == paid and figures["store_joined"] == 0
    expected = {f"c{n}": n / 4 for n in range(1, 11) if n % 7 not in (0, 3, 5)}
    got = {r["customer_id"]: r["score"] for r in rows if r["customer_id"] in expected}
    assert got == expected


def test_a_damaged_joinable_answer_is_left_to_the_operator(spark):
    """A cut or edited `output` is not read by Spark's from_json as a row of NULLs: it is left
    out of the join (its row goes through the operator)."""
    from pyspark.sql.types import StructType

    from dslc.runtime.spark import stored_join

    args = StructType.fromDDL("customer_id STRING")
    returns = StructType.fromDDL("tier STRING, score DOUBLE")
    answers = [(json.dumps({"customer_id": "c1"}), json.dumps({"tier": "gold", "score": 0.5})),
               (json.dumps({"customer_id": "c2"}), '{"tier": "si'),
               (json.dumps({"customer_id": "c3"}), json.dumps({"tier": 12345, "score": "high"}))]
    rows = stored_join._stored(spark, answers, args, returns, ["__dslc_k0"]).collect()
    assert [(r["__dslc_k0"], r["tier"], r["score"]) for r in rows] == [("c1", "gold", 0.5)]
