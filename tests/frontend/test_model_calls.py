"""WITH MODEL / WITH EMBEDDING as written → the plan's calls, and the job that rebuilds them:
placeholders respelled as the input spells its columns, HEADERS kept as written (a secret as
`${NAME}`), RATE PER MINUTE and TOKENS PER MINUTE, the call key made of the filled prompt."""
from __future__ import annotations

from dslc.compiler.pipeline import check_source, lower_plan
from dslc.compiler.source import SourceFile
from dslc.runtime.config import EmbeddingCall, ModelCall

FLOW = """
SOURCE tickets FROM JSON 'data/' SCHEMA (id STRING, Subject STRING, body STRING);
STREAM labelled = ENRICH tickets
  WITH MODEL 'gpt-4.1-mini' AT 'https://api.example.com/v1/'
    HEADERS ('Authorization' = 'Bearer ${OPENAI_API_KEY}')
    SYSTEM 'You label tickets.'
    PROMPT 'Subject: {subject}\\nBody: {body}'
  RETURNS (category STRING, urgency INT)
  RATE 600 PER MINUTE, 400000 TOKENS PER MINUTE;
STREAM vectors = ENRICH tickets
  WITH EMBEDDING 'text-embedding-3-small' AT 'http://127.0.0.1:8000/v1' INPUT '{Subject} {body}'
  RETURNS (embedding ARRAY<FLOAT>)
  BATCH 64;
SINK labelled TO CONSOLE;
SINK vectors TO CONSOLE;
"""


def test_model_and_embedding_calls_in_the_plan_and_the_job():
    plan = check_source(SourceFile("t.flow", FLOW))
    labelled, vectors = plan.node("labelled"), plan.node("vectors")
    assert labelled.call == ModelCall("gpt-4.1-mini", "https://api.example.com/v1", "Subject: {Subject}\nBody: {body}",
                                      "You label tickets.",
                                      headers=(("Authorization", "Bearer ${OPENAI_API_KEY}"),))
    assert labelled.rate.per_second == 10 and labelled.rate.tokens_per_minute == 400000
    assert labelled.key_columns == ("Subject", "body")
    assert isinstance(vectors.call, EmbeddingCall) and vectors.batch.size == 64
    assert labelled.call.call_key({"Subject": "Down", "body": "All of it"}) == {"prompt": "Subject: Down\nBody: All of it"}
    assert labelled.call.call_key({"Subject": None, "body": "x"}) == {"prompt": None}
    job = lower_plan(plan, job_folder="/tmp")
    assert "Bearer ${OPENAI_API_KEY}" in job and "C.ModelCall(" in job and "C.EmbeddingCall(" in job
    assert "tokens_per_minute=400000.0" in job
    compile(job, "job.py", "exec")


def test_a_tokens_budget_is_held_on_model_and_embedding_calls_only():
    budgeted = (FLOW.replace("RATE 600 PER MINUTE, 400000 TOKENS PER MINUTE;",
                             "RATE 600 PER MINUTE, 400000 TOKENS PER MINUTE STORE BUDGET 2000000 TOKENS;")
                    .replace("BATCH 64;", "BATCH 64 STORE BUDGET 50000 TOKENS;"))
    plan = check_source(SourceFile("t.flow", budgeted))
    assert plan.node("labelled").budget.amount == 2000000 and plan.node("labelled").budget.unit == "TOKENS"
    assert plan.node("vectors").budget.unit == "TOKENS"
    job = lower_plan(plan, job_folder="/tmp")
    assert job.count("unit='TOKENS'") == 2
