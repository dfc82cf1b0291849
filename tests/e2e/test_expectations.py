"""EXPECT run for real: an EXPECT on a source and on a chain's last operator judged by Spark, one
inside a chain judged in its Python pass; BATCH and STREAMING give the same passing rows, the
same quarantined rows and the same counts; WARN never changes the rows; FAIL stops the job with
exit code 4 naming the constraint, its line and the row."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from jobs import run_flow

pytestmark = pytest.mark.spark

UDFS = '''
async def score(row):
    return {"score": (row["amount"] or 0) / 10.0}

def tag(row):
    return {**row, "tag": "big" if (row["score"] or 0) > 5 else "small"}
'''
ORDERS = [(10.0, "FR"), (-5.0, "DE"), (70.0, "US"), (None, "FR"), (30.0, None), (0.0, "XX"), (90.0, "FR"),
          (20.0, "DE"), (-1.0, "ZZ"), (60.0, "US"), (85.0, "DE"), (40.0, "IT")]
FLOW = """PIPELINE checked MODE {mode} CHECKPOINT 'target/chk';
SOURCE orders FROM JSON 'data/' SCHEMA (order_id STRING, amount DOUBLE, country STRING);
EXPECT ON orders
  CONSTRAINT has_id CHECK (order_id IS NOT NULL) ON VIOLATION FAIL
  CONSTRAINT positive CHECK (amount > 0) ON VIOLATION DROP
  CONSTRAINT known_country CHECK (country IN ('FR', 'DE', 'US')) ON VIOLATION QUARANTINE 'target/quarantine/orders';
STREAM scored = ENRICH orders WITH PYTHON 'expectations_udfs:score' RETURNS (score DOUBLE) ASYNC;
EXPECT ON scored
  CONSTRAINT small CHECK (score < 8) ON VIOLATION QUARANTINE 'target/quarantine/scored'
  CONSTRAINT not_fr CHECK (country <> 'FR');
STREAM tagged = PROCESS scored USING PYTHON 'expectations_udfs:tag'
  RETURNS (order_id STRING, amount DOUBLE, country STRING, score DOUBLE, tag STRING);
EXPECT ON tagged CONSTRAINT not_big CHECK (tag = 'small' OR amount / 2 > 40) ON VIOLATION DROP;
SINK tagged TO JSON 'target/out';
"""


def _pipeline(folder: Path, mode: str, orders=ORDERS, flow: str = FLOW) -> Path:
    (folder / "data").mkdir(parents=True)
    (folder / "data" / "o.json").write_text("".join(
        json.dumps({"order_id": f"o{i}", "amount": a, "country": c}) + "\n" for i, (a, c) in enumerate(orders)))
    (folder / "expectations_udfs.py").write_text(UDFS)   # a name no other test ships in this session
    path = folder / "pipeline.flow"
    path.write_text(flow.format(mode=mode))
    return path


def _run(flow: Path, monkeypatch, **options) -> dict:
    metrics = flow.parent / "metrics.json"
    monkeypatch.setenv("DSLC_METRICS_FILE", str(metrics))
    run_flow(flow, **options)
    return json.loads(metrics.read_text())


def _lines(folder: Path, key: str = "order_id") -> list[dict]:
    return sorted((json.loads(line) for part in sorted(folder.glob("part-*")) for line in part.read_text().splitlines()),
                  key=lambda row: row[key])


def _outcome(flow: Path, document: dict) -> tuple:
    target = flow.parent / "target"
    rows = sorted((json.loads(line)["order_id"] for part in (target / "out").glob("part-*")
                   for line in part.read_text().splitlines()))
    figures = {name: {k: v for k, v in f.items() if k != "runs"} for name, f in document["expectations"].items()}
    return rows, _lines(target / "quarantine" / "orders"), _lines(target / "quarantine" / "scored"), figures


def test_batch_and_streaming_give_the_same_rows_quarantine_and_counts(spark, tmp_path, monkeypatch):
    batch = _pipeline(tmp_path / "batch", "BATCH")
    streaming = _pipeline(tmp_path / "streaming", "STREAMING")
    found_batch = _outcome(batch, _run(batch, monkeypatch))
    document = _run(streaming, monkeypatch, trigger="available-now")
    found_streaming = _outcome(streaming, document)
    assert found_batch == found_streaming
    # each micro-batch's StreamingQueryProgress.observedMetrics: Spark's EXPECTs and the chain's
    observed = {name: figures for batch in document["micro_batches"] for name, figures in batch["figures"].items()}
    orders_figures = [f for name, f in observed.items() if name.startswith("dslc_expect_orders_")]
    assert orders_figures and max(f["known_country.failed"] for f in orders_figures) == 3
    assert any(f.get("EXPECT scored.failed.small") == 2 for f in observed.values()), observed
    rows, orders, scored, figures = found_batch
    # independent of the job: what each constraint says of each order
    passing, quarantined_orders, quarantined_scored = [], [], []
    for i, (amount, country) in enumerate(ORDERS):
        if country not in ("FR", "DE", "US", None):
            quarantined_orders.append(f"o{i}")
        elif amount is None or amount > 0:
            score = (amount or 0) / 10.0
            if score >= 8:
                quarantined_scored.append(f"o{i}")
            elif score <= 5 or (amount or 0) / 2 > 40:
                passing.append(f"o{i}")
    assert rows == sorted(passing)
    assert [r["order_id"] for r in orders] == sorted(quarantined_orders)
    assert [r["order_id"] for r in scored] == sorted(quarantined_scored)
    assert next(r for r in orders if r["order_id"] == "o5") == {"order_id": "o5", "amount": 0.0, "country": "XX", "_constraints": ["positive", "known_country"],
                         "_operator": "orders", "_line": 3}
    assert next(r for r in scored if r["order_id"] == "o6")["_constraints"] == ["small", "not_fr"]
    assert {r["_line"] for r in scored} == {8} and {r["_operator"] for r in scored} == {"scored"}
    assert figures["orders"]["rows"] == len(ORDERS)
    assert {c["name"]: (c["passed"], c["failed"]) for c in figures["orders"]["constraints"]} == {
        "has_id": (12, 0), "positive": (9, 3), "known_country": (9, 3)}
    assert figures["orders"]["quarantined"] == 3 and figures["orders"]["dropped"] == 1
    assert {c["name"]: c["failed"] for c in figures["scored"]["constraints"]} == {"small": 2, "not_fr": 3}
    assert figures["tagged"]["dropped"] == 2


def test_warn_counts_and_never_changes_the_rows(spark, tmp_path, monkeypatch):
    flow = FLOW.replace("ON VIOLATION FAIL", "").replace("ON VIOLATION DROP", "").replace(
        "ON VIOLATION QUARANTINE 'target/quarantine/orders'", "").replace(
        "ON VIOLATION QUARANTINE 'target/quarantine/scored'", "")
    path = _pipeline(tmp_path / "warn", "BATCH", flow=flow)
    document = _run(path, monkeypatch)
    rows = sorted(json.loads(line)["order_id"] for part in (tmp_path / "warn/target/out").glob("part-*")
                  for line in part.read_text().splitlines())
    assert rows == sorted(f"o{i}" for i in range(len(ORDERS)))
    failed = {(name, c["name"]): c["failed"] for name, f in document["expectations"].items() for c in f["constraints"]}
    assert failed[("orders", "known_country")] == 3 and failed[("scored", "small")] == 2
    assert not (tmp_path / "warn/target/quarantine").exists()


@pytest.mark.parametrize("where", ["spark", "chain"])
def test_fail_stops_with_exit_code_4_naming_the_constraint_its_line_and_the_row(spark, tmp_path, monkeypatch,
                                                                                 capsys, where):
    flow = FLOW
    if where == "chain":      # the FAIL inside the chain's Python pass
        flow = flow.replace("CONSTRAINT not_fr CHECK (country <> 'FR');", "CONSTRAINT not_fr CHECK (country <> 'FR') ON VIOLATION FAIL;")
        expected = "EXPECT ON scored: constraint not_fr (line 10) is broken by row "
    else:
        expected = "EXPECT ON orders: constraint has_id (line 4) is broken by row "
    orders = ORDERS if where == "chain" else ORDERS
    path = _pipeline(tmp_path / where, "BATCH", orders=orders, flow=flow)
    if where == "spark":       # a row without an id
        with (path.parent / "data" / "o.json").open("a") as handle:
            handle.write(json.dumps({"order_id": None, "amount": 5.0, "country": "FR"}) + "\n")
    monkeypatch.delenv("DSLC_RUN_LOG", raising=False)
    with pytest.raises(SystemExit) as stopped:
        run_flow(path)
    assert stopped.value.code == 4
    said = capsys.readouterr().err
    line = next(line for line in said.splitlines() if line.startswith("dslc: error: "))
    assert line.startswith("dslc: error: " + expected), said
    row = json.loads(line[len("dslc: error: " + expected):])
    assert row["country"] == "FR" and (row["order_id"] is None if where == "spark" else row["score"] is not None)
    assert not (path.parent / "target" / "out").exists()
    os.environ.pop("DSLC_METRICS_FILE", None)


def test_a_filter_after_an_expect_never_hides_rows_from_it(spark, tmp_path, monkeypatch):
    """Catalyst would push `WHERE amount > 50` into the source's reader: the EXPECT's observation
    keeps it after the EXPECT, so every row read is judged and counted."""
    flow = """PIPELINE kept MODE BATCH;
SOURCE orders FROM JSON 'data/' SCHEMA (order_id STRING, amount DOUBLE, country STRING);
EXPECT ON orders CONSTRAINT known_country CHECK (country IN ('FR', 'DE', 'US'));
STREAM big = SELECT order_id FROM orders WHERE amount > 50;
SINK big TO JSON 'target/out';
"""
    path = _pipeline(tmp_path / "filtered", "BATCH", flow=flow)
    document = _run(path, monkeypatch)
    figures = document["expectations"]["orders"]
    assert figures["rows"] == len(ORDERS)
    assert figures["constraints"][0]["failed"] == sum(1 for _, c in ORDERS if c not in ("FR", "DE", "US", None))
    rows = sorted(json.loads(line)["order_id"] for part in (tmp_path / "filtered/target/out").glob("part-*")
                  for line in part.read_text().splitlines())
    assert rows == sorted(f"o{i}" for i, (a, _) in enumerate(ORDERS) if a is not None and a > 50)


def test_dslc_run_exits_4_when_a_fail_constraint_is_broken(tmp_path):
    """The real command: spark-submit's job stops, `dslc run` passes its exit status on."""
    flow = """PIPELINE strict MODE BATCH;
SOURCE orders FROM JSON 'data/' SCHEMA (order_id STRING, amount DOUBLE, country STRING);
EXPECT ON orders
  CONSTRAINT positive CHECK (amount > 0) ON VIOLATION DROP
  CONSTRAINT known_country CHECK (country IN ('FR', 'DE', 'US', 'XX', 'ZZ', 'IT'))
    ON VIOLATION FAIL;
SINK orders TO JSON 'target/out';
"""
    path = _pipeline(tmp_path / "strict", "BATCH", orders=ORDERS + [(3.0, "BE")], flow=flow)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSLC_")}
    done = subprocess.run([sys.executable, "-m", "dslc.compiler.cli", "run", str(path), "--master", "local[1]"],
                          env=env, capture_output=True, text=True, timeout=600)
    said = done.stdout + done.stderr        # the job's lines come through spark-submit's stdout
    assert done.returncode == 4, said[-3000:]
    assert 'dslc: error: EXPECT ON orders: constraint known_country (line 5) is broken by row ' \
           '{"order_id":"o12","amount":3.0,"country":"BE"}' in said
    assert "dslc: the run ended with exit status 4 (an expectation failed)" in said
    assert not list((tmp_path / "strict/target/out").glob("part-*"))


MODEL_FLOW = """PIPELINE asked MODE {mode};
SOURCE tickets FROM JSON 'in/' SCHEMA (id STRING, subject STRING);
STREAM labelled = ENRICH tickets
  WITH MODEL 'gpt-test' AT '{base}' PROMPT 'Subject: {{subject}}'
  RETURNS (category STRING, urgency INT)
  ASYNC UNORDERED CAPACITY 4 TIMEOUT 10s;
EXPECT ON labelled
  CONSTRAINT known_category CHECK (category IN ('billing', 'account', 'other'))
    ON VIOLATION QUARANTINE 'target/quarantine/labelled'
  CONSTRAINT urgency_range CHECK (urgency BETWEEN 1 AND 5 AND urgency <> 3) ON VIOLATION DROP;
SINK labelled TO JSON 'target/out';
"""


@pytest.mark.parametrize("mode", ["BATCH", "STREAMING"])
def test_the_model_is_asked_to_keep_the_constraints_and_its_answers_are_still_judged(spark, tmp_path, monkeypatch,
                                                                                      mode):
    from dslc.testing.openai_service import OpenAIService, keyword_labeller, serve_in_thread

    # a model that does not always keep to the schema: "refund" gets a category outside the enum
    labels = keyword_labeller({"category": [("invoice", "billing"), ("refund", "refunds"), ("", "other")],
                               "urgency": [("down", 5), ("slow", 3), ("", 2)]})
    subjects = ["invoice twice", "refund please", "site down", "hello", "slow site", "refund again"]
    service = OpenAIService(models=("gpt-test",), labeller=labels)
    folder = tmp_path / mode
    (folder / "in").mkdir(parents=True)
    (folder / "in/1.json").write_text("".join(json.dumps({"id": f"t{i}", "subject": s}) + "\n"
                                              for i, s in enumerate(subjects)))
    header = "BATCH" if mode == "BATCH" else "STREAMING CHECKPOINT 'chk' TRIGGER AVAILABLE NOW"
    with serve_in_thread(service) as running:
        (folder / "pipeline.flow").write_text(MODEL_FLOW.format(mode=header, base=running.base_url))
        document = _run(folder / "pipeline.flow", monkeypatch)
        stats = running.stats
    schemas = stats["schemas"]
    assert len(schemas) == stats["chat_calls"] == len(subjects)       # one request per ticket, each with the schema
    for schema in schemas:
        assert schema["properties"]["category"] == {"type": "string", "enum": ["billing", "account", "other"]}
        assert schema["properties"]["urgency"] == {"type": "integer", "minimum": 1, "maximum": 5}
    out = sorted(json.loads(line)["id"] for p in (folder / "target/out").glob("part-*") for line in p.read_text().splitlines())
    quarantined = _lines(folder / "target/quarantine/labelled", "id")
    assert out == ["t0", "t2", "t3"]                                 # t4: urgency 3, dropped
    assert [(q["id"], q["category"], q["_constraints"]) for q in quarantined] == [
        ("t1", "refunds", ["known_category"]), ("t5", "refunds", ["known_category"])]
    figures = document["expectations"]["labelled"]
    assert (figures["rows"], figures["dropped"], figures["quarantined"]) == (6, 1, 2)
