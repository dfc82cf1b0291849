"""TIER, PRICE, BUDGET n USD and ON BATCH FAILURE as written → the plan and the job: the values
kept, FLEX's default TIMEOUT of 15 minutes, a TIER BATCH ENRICH starting a chain of its own, and
each misuse reported with its code where it is written."""
from __future__ import annotations

from frontend_support import errors_of, marked

from dslc.compiler.optimizer.optimize import optimize
from dslc.compiler.pipeline import check_source, lower_plan
from dslc.compiler.source import SourceFile
from dslc.runtime.config import Budget, Price

SOURCE = "SOURCE tickets FROM JSON 'data/' SCHEMA (id STRING, subject STRING);\n"
MODEL = ("STREAM labelled = ENRICH {input} WITH MODEL 'gpt-4.1-mini' AT 'http://127.0.0.1:9/v1' PROMPT '{{subject}}'\n"
         "  RETURNS (category STRING) {options};\n")


def _flow(options: str, more: str = "", sink: str = "labelled") -> str:
    return SOURCE + MODEL.format(input="tickets", options=options) + more + f"SINK {sink} TO CONSOLE;\n"


def test_the_clauses_reach_the_plan_and_the_job():
    text = _flow("TIER BATCH PRICE 0.20 PER MILLION INPUT TOKENS, 0.80 PER MILLION OUTPUT TOKENS STORE TTL 30d "
                 "BUDGET 2.5 USD ON BATCH FAILURE ONLINE")
    plan = check_source(SourceFile("t.flow", text))
    node = plan.node("labelled")
    assert (node.tier, node.batch_failure) == ("BATCH", "ONLINE")
    assert node.price == Price(input_per_million=0.2, output_per_million=0.8)
    assert node.budget == Budget(2.5, "USD") and node.timeout_s == 30.0
    job = lower_plan(plan, job_folder="/tmp")
    assert "tier='BATCH'" in job and "batch_failure='ONLINE'" in job
    assert "C.Price(input_per_million=0.2, output_per_million=0.8)" in job and "C.Budget(amount=2.5, unit='USD')" in job
    compile(job, "job.py", "exec")


def test_flex_waits_fifteen_minutes_unless_told_and_a_call_price_fits_any_call():
    plan = check_source(SourceFile("t.flow", _flow("TIER FLEX")))
    assert plan.node("labelled").tier == "FLEX" and plan.node("labelled").timeout_s == 900.0
    told = check_source(SourceFile("t.flow", _flow("TIER FLEX TIMEOUT 2m")))
    assert told.node("labelled").timeout_s == 120.0
    http = (SOURCE + "STREAM looked = ENRICH tickets WITH HTTP GET 'http://127.0.0.1:9/{id}' RETURNS (x STRING)\n"
            "  PRICE 0.002 PER CALL STORE BUDGET 1 USD;\nSINK looked TO CONSOLE;\n")
    node = check_source(SourceFile("t.flow", http)).node("looked")
    assert node.price == Price(per_call=0.002) and node.budget == Budget(1.0, "USD") and node.tier == "STANDARD"


def test_a_batch_tier_enrich_starts_a_chain_of_its_own():
    text = (SOURCE + "STREAM first = ENRICH tickets WITH HTTP GET 'http://127.0.0.1:9/{id}' RETURNS (x STRING);\n"
            + MODEL.format(input="first", options="TIER BATCH STORE") + "SINK labelled TO CONSOLE;\n")
    physical = optimize(check_source(SourceFile("t.flow", text)))
    chains = [step for step in physical.steps if hasattr(step, "operators")]
    assert [[op.name for op in c.operators] for c in chains] == [["first"], ["labelled"]]
    assert "TIER BATCH" in chains[1].starts_because
    online = text.replace("TIER BATCH STORE", "STORE")
    chained = [step for step in optimize(check_source(SourceFile("t.flow", online))).steps if hasattr(step, "operators")]
    assert [[op.name for op in c.operators] for c in chained] == [["first", "labelled"]]


def test_misuses_are_reported_where_they_are_written():
    text = _flow("TIER FLEX PRICE 0.20 PER MILLION INPUT TOKENS STORE BUDGET 3 USD",
                 more="STREAM vectors = ENRICH tickets WITH EMBEDDING 'e' AT 'http://127.0.0.1:9/v1' INPUT '{subject}'\n"
                      "  RETURNS (v ARRAY<FLOAT>) TIER FLEX;\nSINK vectors TO CONSOLE;\n"
                      "STREAM looked = ENRICH tickets WITH HTTP GET 'http://127.0.0.1:9/{id}' RETURNS (x STRING) STORE BUDGET 1 USD "
                      "ON BATCH FAILURE ONLINE TIER CHEAP;\nSINK looked TO CONSOLE;\n")
    found = errors_of(text)
    assert ("E0325", *marked(text, "PRICE 0.20 PER MILLION INPUT TOKENS")) in found      # MODEL: output tokens too
    assert ("E0304", *marked(text, "TIER FLEX", 2)) in found                              # no flex embeddings
    assert ("E0325", *marked(text, "BUDGET 1 USD")) in found                              # USD needs PRICE
    assert ("E0325", *marked(text, "ON BATCH FAILURE ONLINE")) in found                   # needs TIER BATCH
    assert ("E0309", *marked(text, "CHEAP")) in found


def test_batch_tier_needs_store_and_batch_mode():
    text = _flow("TIER BATCH")
    assert errors_of(text, None) == [("E0325", *marked(text, "TIER BATCH"))]
    streaming = "PIPELINE p MODE STREAMING CHECKPOINT 'chk';\n" + _flow("TIER BATCH STORE")
    assert errors_of(streaming, None) == [("E0311", *marked(streaming, "TIER BATCH"))]
