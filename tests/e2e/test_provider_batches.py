"""TIER BATCH in whole jobs on Spark (local[2]) against the local service's Batch API: the sinks
hold what the same pipeline's online run writes, with no online request when every line is
answered and output files in shuffled order; failed lines sent once more, then dead letters (or
online with ON BATCH FAILURE ONLINE); a run killed after its batches were created, or while it
downloads their answers, resumed by the next without sending a key twice."""
from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from jobs import run_flow

from dslc.runtime.spark.provider_batches import LINES_CONF
from dslc.testing.openai_api.batches import BATCH_ERROR, BATCH_ERROR_ONCE, BATCH_EXPIRE_ONCE
from dslc.testing.openai_service import OpenAIService, keyword_labeller, serve_in_thread

pytestmark = pytest.mark.spark

LABELS = keyword_labeller({
    "category": [("invoice", "billing"), ("refund", "billing"), ("down", "outage"), ("password", "account"),
                 ("", "other")],
    "urgency": [("down", 5), ("locked", 4), ("refund", 3), ("", 1)]})
SUBJECTS = ["invoice wrong", "site down", "password reset", "refund please", "login locked", "hello there"]

FLOW = """PIPELINE tickets MODE BATCH ANSWERS 'answers.db';
{settings}
SOURCE tickets FROM JSON 'in/' SCHEMA (ticket_id STRING, subject STRING, body STRING);
STREAM spread = SELECT /*+ REPARTITION(3) */ * FROM tickets;
STREAM labelled = ENRICH spread WITH MODEL 'gpt-test' AT '{url}' SYSTEM 'You label tickets.'
    PROMPT 'Subject: {{subject}}\\nBody: {{body}}'
  RETURNS (category STRING, urgency INT)
  ASYNC UNORDERED CAPACITY 8 TIMEOUT 20s {tier} STORE TTL 1d
  PRICE 0.20 PER MILLION INPUT TOKENS, 0.80 PER MILLION OUTPUT TOKENS
  ON ERROR DEAD LETTER 'dlq';
SINK labelled TO JSON 'out/labelled';
"""


def _tickets(n: int, faults: dict[int, str] | None = None) -> list[dict]:
    """`n` tickets over a few hundred distinct prompts (each repeated); `faults`: ticket number ->
    a trigger word put in its body (and in the body of every ticket sharing its prompt)."""
    rng = random.Random(7)
    rows = []
    for i in range(n):
        body = f"order {rng.randrange(80)}"
        rows.append({"ticket_id": f"t{i}", "subject": rng.choice(SUBJECTS), "body": body})
    for i, word in (faults or {}).items():
        rows[i]["body"] = f"{word} {rows[i]['body']} #{i}"
    return rows


def _flow(folder: Path, url: str, rows: list[dict], tier: str = "TIER BATCH", settings: str = "") -> Path:
    (folder / "in").mkdir(parents=True, exist_ok=True)
    for part in range(2):
        (folder / f"in/{part}.json").write_text("".join(json.dumps(r) + "\n" for r in rows[part::2]))
    flow = folder / "pipeline.flow"
    flow.write_text(FLOW.format(url=url, tier=tier, settings=settings))
    return flow


def _out(folder: Path) -> list[tuple]:
    return sorted((r["ticket_id"], r["category"], r["urgency"]) for p in (folder / "out/labelled").glob("*.json")
                  for r in map(json.loads, p.read_text().splitlines()))


def _letters(folder: Path) -> list[dict]:
    return [json.loads(line) for p in (folder / "dlq").glob("*.txt") for line in p.read_text().splitlines()
            if line.strip()]


def _keys(rows: list[dict]) -> set[tuple[str, str]]:
    return {(r["subject"], r["body"]) for r in rows}


@pytest.fixture(autouse=True)
def _batch_lines_of_this_test_only(spark):
    """A job's SET lands in the session the tests share (a job of its own, under `dslc run`, has
    a session of its own): a test's `SET spark.dslc.batch.lines` would cut the next test's
    batches too, so it is taken back after each test."""
    yield
    spark.conf.unset(LINES_CONF)


def test_the_sinks_hold_what_the_online_run_writes_with_no_online_request(spark, tmp_path):
    rows = _tickets(1500)
    distinct = len(_keys(rows))
    with serve_in_thread(OpenAIService(labeller=LABELS, batch_delay_s=0.5)) as running:
        run_flow(_flow(tmp_path / "online", running.base_url, rows, tier=""))
        assert running.stats["chat_calls"] == distinct < 1500 / 2
        running.reset()
        # three batches (at most 200 lines each): their output files, each in shuffled order
        run_flow(_flow(tmp_path / "batch", running.base_url, rows, settings="SET spark.dslc.batch.lines = 200;"))
        stats = running.stats
        custom_ids = running.service.stats["batch_custom_ids"]
    assert stats["chat_calls"] == 0 and stats["embedding_calls"] == 0          # no online request
    assert stats["batch_lines"] == distinct and stats["batches_created"] == -(-distinct // 200)
    assert len(custom_ids) == len(set(custom_ids)) == distinct                 # each key sent once
    assert _out(tmp_path / "batch") == _out(tmp_path / "online") and len(_out(tmp_path / "online")) == 1500
    metrics = json.loads(next((tmp_path / "batch/target/metrics").glob("*.json")).read_text())
    figures = metrics["operators"]["labelled"]
    assert figures["batch_lines_done"] == distinct and figures["calls"] == 0 and figures["store_hits"] == 1500
    assert figures["prompt_tokens"] == stats["batch_prompt_tokens"] > 0
    assert figures["cost_usd"] == pytest.approx(
        (stats["batch_prompt_tokens"] * 0.20 + stats["batch_completion_tokens"] * 0.80) / 1e6)
    run_flow(tmp_path / "batch" / "pipeline.flow")                              # every answer is stored now
    assert running.service.stats["batches_created"] == -(-distinct // 200)


def test_failed_lines_are_sent_once_more_then_follow_on_error(spark, tmp_path):
    faults = {0: BATCH_ERROR, 1: BATCH_ERROR_ONCE, 2: BATCH_EXPIRE_ONCE, 3: BATCH_ERROR}
    rows = _tickets(300, faults)
    with serve_in_thread(OpenAIService(labeller=LABELS, batch_delay_s=0.3)) as running:
        run_flow(_flow(tmp_path, running.base_url, rows))
        stats = running.stats
        sent = Counter(running.service.stats["batch_custom_ids"])
    assert stats["chat_calls"] == 0 and stats["batches_created"] == 2        # the first, and one for the failures
    assert sorted(sent.values()).count(2) == 4 and set(sent.values()) == {1, 2}   # each failed line sent again once
    letters = _letters(tmp_path)
    assert sorted(letter["row"]["ticket_id"] for letter in letters) == ["t0", "t3"]   # failed twice: ON ERROR
    assert all("the batch answered HTTP 500" in letter["error"] for letter in letters)
    out = {r[0]: r for r in _out(tmp_path)}
    assert "t1" in out and "t2" in out and len(out) == 298                     # answered when sent again


def test_with_on_batch_failure_online_failed_lines_are_sent_online(spark, tmp_path):
    rows = _tickets(200, {0: BATCH_ERROR, 5: BATCH_EXPIRE_ONCE})
    with serve_in_thread(OpenAIService(labeller=LABELS, batch_delay_s=0.3)) as running:
        run_flow(_flow(tmp_path, running.base_url, rows, tier="TIER BATCH ON BATCH FAILURE ONLINE"))
        stats = running.stats
    assert stats["batches_created"] == 1 and stats["chat_calls"] == 2          # the two failed lines, online
    assert len(_out(tmp_path)) == 200 and not _letters(tmp_path)
    metrics = json.loads(next((tmp_path / "target/metrics").glob("*.json")).read_text())["operators"]["labelled"]
    batch_cost = (stats["batch_prompt_tokens"] * 0.20 + stats["batch_completion_tokens"] * 0.80) / 1e6
    online_cost = (stats["prompt_tokens"] * 0.40 + stats["completion_tokens"] * 1.60) / 1e6   # STANDARD: twice
    assert metrics["cost_usd"] == pytest.approx(batch_cost + online_cost) and metrics["calls"] == 2


def _dslc_run(flow: Path) -> subprocess.Popen:
    env = {**os.environ}
    env.pop("DSLC_FLOW_FOLDER", None)
    return subprocess.Popen([sys.executable, "-m", "dslc.compiler.cli", "run", str(flow), "--master", "local[2]"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)


def _kill_when(process: subprocess.Popen, running, ready) -> None:
    """SIGKILL the run (every process of it) once `ready(stats)` holds."""
    try:
        for _ in range(1200):
            if ready(running.stats):
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(30)
                return
            assert process.poll() is None, process.stdout.read()
            time.sleep(0.1)
        raise AssertionError("the run never got there")
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(30)


def test_a_run_killed_after_creating_its_batches_is_resumed_without_sending_a_key_twice(spark, tmp_path):
    rows = _tickets(600)
    with serve_in_thread(OpenAIService(labeller=LABELS, batch_delay_s=8.0)) as running:
        flow = _flow(tmp_path, running.base_url, rows, settings="SET spark.dslc.batch.lines = 100;")
        _kill_when(_dslc_run(flow), running, lambda s: s["batches_created"] >= 2)
        uploaded, created = running.stats["files_uploaded"], running.stats["batches_created"]
        stored = subprocess.run([sys.executable, "-m", "dslc.compiler.cli", "store", "stats", str(flow)],
                                capture_output=True, text=True, check=True).stdout
        assert "provider batches in flight (TIER BATCH)" in stored
        run_flow(flow)
        stats = running.stats
        sent = Counter(running.service.stats["batch_custom_ids"])
    distinct = len(_keys(rows))
    assert len(sent) == distinct and set(sent.values()) == {1}                  # no key in two batches
    assert stats["batches_created"] - created == -(-distinct // 100) - created  # only the keys not yet submitted
    # each uploaded file became one batch, none twice: a file the killed run uploaded without
    # creating its batch (the kill fell between the two) is created from, not uploaded again
    assert stats["files_uploaded"] == stats["batches_created"] and stats["files_uploaded"] >= uploaded
    assert stats["chat_calls"] == 0 and len(_out(tmp_path)) == 600


def test_a_run_killed_after_uploading_a_file_but_before_hearing_its_id_uses_that_file(spark, tmp_path):
    rows = _tickets(300)
    with serve_in_thread(OpenAIService(labeller=LABELS, batch_delay_s=0.5, upload_delay_s=60.0)) as running:
        flow = _flow(tmp_path, running.base_url, rows, settings="SET spark.dslc.batch.lines = 100;")
        _kill_when(_dslc_run(flow), running, lambda s: s["files_uploaded"] >= 1)
        assert running.stats["batches_created"] == 0
        running.service.upload_delay_s = 0.0
        run_flow(flow)
        stats = running.stats
        sent = Counter(running.service.stats["batch_custom_ids"])
    distinct = len(_keys(rows))
    assert len(sent) == distinct and set(sent.values()) == {1}
    # the file the killed run uploaded became a batch: no file uploaded twice, none left over
    assert stats["files_uploaded"] == stats["batches_created"] == -(-distinct // 100)
    assert stats["chat_calls"] == 0 and len(_out(tmp_path)) == 300


def test_a_run_killed_while_downloading_answers_stores_each_answer_once(spark, tmp_path):
    rows = _tickets(400)
    with serve_in_thread(OpenAIService(labeller=LABELS, batch_delay_s=0.5, download_delay_s=30.0)) as running:
        flow = _flow(tmp_path, running.base_url, rows, settings="SET spark.dslc.batch.lines = 150;")
        _kill_when(_dslc_run(flow), running, lambda s: s["downloads"] >= 1)
        created = running.stats["batches_created"]
        running.service.download_delay_s = 0.0
        run_flow(flow)
        stats = running.stats
        sent = Counter(running.service.stats["batch_custom_ids"])
    distinct = len(_keys(rows))
    assert stats["batches_created"] == created == -(-distinct // 150)          # nothing submitted again
    assert len(sent) == distinct and set(sent.values()) == {1} and stats["chat_calls"] == 0
    assert len(_out(tmp_path)) == 400
    answers = subprocess.run([sys.executable, "-m", "dslc.compiler.cli", "store", "stats", str(flow)],
                             capture_output=True, text=True, check=True).stdout
    assert f"labelled  {distinct:7d}" in answers and "in flight" not in answers


def test_ctrl_c_leaves_the_batches_running_and_says_how_to_cancel_them(tmp_path):
    rows = _tickets(100)
    with serve_in_thread(OpenAIService(labeller=LABELS, batch_delay_s=120.0)) as running:
        flow = _flow(tmp_path, running.base_url, rows)
        process = _dslc_run(flow)
        try:
            for _ in range(1200):
                if running.stats["batches_created"] >= 1:
                    break
                assert process.poll() is None, process.stdout.read()
                time.sleep(0.1)
            time.sleep(1.0)                         # the batch's id is in the store
            os.killpg(process.pid, signal.SIGINT)
            out, _ = process.communicate(timeout=120)
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(30)
        [batch] = running.service.batches.values()
        assert process.returncode != 0 and batch.status in ("validating", "in_progress")     # left running
        assert "keep running at the provider" in out and batch.id in out
        assert f"dslc store cancel {flow}" in out or "dslc store cancel" in out
        cancelled = subprocess.run([sys.executable, "-m", "dslc.compiler.cli", "store", "cancel", str(flow)],
                                   capture_output=True, text=True)
        assert cancelled.returncode == 0, cancelled.stderr
        assert f"labelled: {batch.id} cancelling" in cancelled.stdout
        for _ in range(100):
            if batch.status == "cancelled":
                break
            time.sleep(0.1)
        assert batch.status == "cancelled"
        stats = subprocess.run([sys.executable, "-m", "dslc.compiler.cli", "store", "stats", str(flow)],
                               capture_output=True, text=True, check=True).stdout
        assert "in flight" not in stats                                           # forgotten: a rerun sends anew


def _paid(folder: Path) -> list[float]:
    """The money of each run so far, oldest first (the metrics files)."""
    files = sorted((folder / "target/metrics").glob("*.json"), key=lambda p: p.stat().st_mtime)
    return [json.loads(p.read_text())["operators"]["labelled"]["cost_usd"] for p in files]


def test_the_estimate_is_within_ten_percent_of_what_the_run_pays(spark, tmp_path):
    from dslc.compiler.cli.estimate_command import estimates, render

    rows = _tickets(800)
    with serve_in_thread(OpenAIService(labeller=LABELS, batch_delay_s=0.3)) as running:
        flow = _flow(tmp_path, running.base_url, rows)
        [before] = estimates(str(flow))
        assert running.stats["batches_created"] == 0 and running.stats["chat_calls"] == 0     # nothing sent
        run_flow(flow)
        stats = running.stats
    [paid] = _paid(tmp_path)
    usage = (stats["batch_prompt_tokens"] * 0.20 + stats["batch_completion_tokens"] * 0.80) / 1e6
    assert paid == pytest.approx(usage) and abs(before.money_usd - paid) <= 0.1 * paid, (before, paid)
    assert before.tiers_usd["STANDARD"] == pytest.approx(2 * before.money_usd)
    assert before.tiers_usd["FLEX"] == pytest.approx(before.money_usd) and before.tier == "BATCH"
    shown = render("pipeline.flow", [before])
    assert "money" in shown.splitlines()[1] and "the other tiers: STANDARD $" in shown


def test_a_usd_budget_holds_back_lines_and_reruns_complete_without_paying_twice(spark, tmp_path, capfd):
    rows = _tickets(600)
    budget = 0.0015
    with serve_in_thread(OpenAIService(labeller=LABELS, batch_delay_s=0.3)) as running:
        flow = _flow(tmp_path, running.base_url, rows, tier=f"TIER BATCH BUDGET {budget} USD")
        stops = 0
        for _ in range(6):
            try:
                run_flow(flow)
                break
            except SystemExit as stopped:
                assert stopped.code == 3
                stops += 1
                assert f"BUDGET {budget} USD of 'labelled' (line 5) is spent" in capfd.readouterr().err
                assert not (tmp_path / "out/labelled").exists()          # nothing written: the run stopped first
        sent = Counter(running.service.stats["batch_custom_ids"])
        stats = running.stats
    assert stops >= 2 and len(_out(tmp_path)) == 600 and stats["chat_calls"] == 0
    assert len(sent) == len(_keys(rows)) and set(sent.values()) == {1}          # each key paid once over the runs
    mean = (stats["batch_prompt_tokens"] * 0.20 + stats["batch_completion_tokens"] * 0.80) / 1e6 / stats["batch_lines"]
    assert all(paid <= budget + 2 * mean for paid in _paid(tmp_path))          # over by at most one line (< 2 x the mean)
    assert sum(_paid(tmp_path)) == pytest.approx(mean * stats["batch_lines"])


def test_embeddings_in_a_batch_are_each_inputs_vector(spark, tmp_path):
    from dslc.testing.openai_service import embedding_of

    rows = _tickets(200)
    with serve_in_thread(OpenAIService(labeller=LABELS, batch_delay_s=0.3)) as running:
        (tmp_path / "in").mkdir()
        (tmp_path / "in/0.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
        flow = tmp_path / "pipeline.flow"
        flow.write_text(f"""PIPELINE vectors MODE BATCH;
SOURCE tickets FROM JSON 'in/' SCHEMA (ticket_id STRING, subject STRING, body STRING);
STREAM embedded = ENRICH tickets WITH EMBEDDING 'emb' AT '{running.base_url}' INPUT '{{subject}}: {{body}}'
  RETURNS (vector ARRAY<FLOAT>) BATCH 16 TIER BATCH STORE PRICE 0.01 PER MILLION INPUT TOKENS;
SINK embedded TO JSON 'out';
""")
        run_flow(flow)
        stats = running.stats
    out = [json.loads(line) for p in (tmp_path / "out").glob("*.json") for line in p.read_text().splitlines()]
    assert len(out) == 200 and stats["embedding_calls"] == 0 and stats["batch_lines"] == len(_keys(rows))
    assert all(r["vector"] == pytest.approx(embedding_of(f"{r['subject']}: {r['body']}")) for r in out)


@pytest.mark.parametrize("first, then", [("TIER BATCH", ""), ("", "TIER BATCH")])
def test_online_and_batch_runs_share_the_answer_store_each_sending_nothing_after_the_other(spark, tmp_path,
                                                                                           first, then):
    """The store is keyed by the request as an online run makes it: what one tier answered, the
    other finds (0 online calls after a batch run, 0 batch lines after an online run)."""
    rows = _tickets(120)
    distinct = len(_keys(rows))
    with serve_in_thread(OpenAIService(labeller=LABELS, batch_delay_s=0.2)) as running:
        run_flow(_flow(tmp_path, running.base_url, rows, tier=first))
        sent = running.stats["batch_lines"] + running.stats["chat_calls"]
        written = _out(tmp_path)
        shutil.rmtree(tmp_path / "out")           # the sink appends: the second run's rows alone
        running.reset()
        run_flow(_flow(tmp_path, running.base_url, rows, tier=then))
        stats = running.stats
    assert sent == distinct
    assert stats["chat_calls"] == 0 and stats["batch_lines"] == 0 and stats["batches_created"] == 0
    assert _out(tmp_path) == written and len(written) == 120
