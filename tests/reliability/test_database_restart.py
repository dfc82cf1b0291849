"""SIGKILL of a STREAMING job that writes into PostgreSQL, in the middle of a micro-batch, then a
restart on the same checkpoint: every row is in the table once (issue #43). The job runs as
`python job.py` in its own process group; its micro-batches are slow on purpose (each row looked
up WITH SQL in a query that sleeps), so the kill lands while one is under way. The replayed
micro-batch is staged again and committed in one transaction with its batch id; a micro-batch the
database had committed before the kill is not written again."""
from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pytest
from reliability_support import JobProcess, compile_job, wait_for, write_jsonl

pytestmark = [pytest.mark.spark, pytest.mark.slow]

FLOW = """PIPELINE upserts MODE STREAMING CHECKPOINT 'chk' TRIGGER EVERY 500ms;
SET spark.ui.enabled = 'false';
SET spark.jars = '{jar}';
DATABASE crm AT '{url}';
SOURCE events FROM JSON 'in/' SCHEMA (id STRING, user_id STRING, amount DOUBLE) OPTIONS (maxFilesPerTrigger = 1);
STREAM scored = ENRICH events
  WITH SQL crm 'SELECT tier FROM kill_users, pg_sleep(0.1) WHERE user_id = {{user_id}}'
  RETURNS (tier STRING) ASYNC UNORDERED CAPACITY 2 TIMEOUT 30s;
SINK scored TO DATABASE crm TABLE 'kill_out' {sink};
"""


def _events(prefix: str, n: int) -> list[dict]:
    return [{"id": f"{prefix}{i:03d}", "user_id": f"u{i % 3}", "amount": float(i)} for i in range(n)]


def _batches(folder: Path, kind: str) -> set[int]:
    found = folder / "chk" / "sink0" / kind
    return {int(p.name) for p in found.iterdir() if p.name.isdigit()} if found.is_dir() else set()


def _swap_out(folder: Path) -> Path:
    """Spark's commit log made unwritable (even for root): its folder moved aside and a file put
    in its place, so the micro-batch under way cannot be recorded as done after its sink wrote."""
    commits = folder / "chk" / "sink0" / "commits"
    aside = commits.with_name("commits.aside")
    os.replace(commits, aside)
    commits.write_text("not a folder")
    return aside


@pytest.mark.parametrize("sink", ["KEY (id) MODE UPSERT", "MODE APPEND"])
def test_sigkill_in_the_middle_of_a_micro_batch_then_restart_writes_every_row_once(postgres, tmp_path,
                                                                                    monkeypatch, sink):
    """Run 1 is killed while micro-batch 1 looks its rows up (the sink has staged part of them).
    With APPEND, run 2 is killed after micro-batch 2 was committed in the database but before
    Spark recorded it (its commit log cannot be written): the restart replays it and must find
    its batch id in dslc_batches. The last run (AVAILABLE NOW) finishes the input."""
    monkeypatch.setenv("CRM_PASSWORD", postgres.password)
    url = f"postgresql://{postgres.user}:${{CRM_PASSWORD}}@127.0.0.1:{postgres.port}/{postgres.database}"
    postgres.execute("DROP TABLE IF EXISTS kill_out; DROP TABLE IF EXISTS kill_users")
    postgres.execute("CREATE TABLE kill_users (user_id TEXT PRIMARY KEY, tier TEXT)")
    postgres.execute("INSERT INTO kill_users VALUES ('u0', 'gold'), ('u1', 'silver'), ('u2', 'bronze')")
    jar = os.environ.get("DSLC_JDBC_JAR", "/usr/share/java/postgresql.jar")
    (tmp_path / "pipeline.flow").write_text(FLOW.format(jar=jar, url=url, sink=sink))
    job = compile_job(tmp_path / "pipeline.flow", tmp_path / "job.py")
    job_once = compile_job(tmp_path / "pipeline.flow", tmp_path / "job_once.py", trigger="available-now")
    files = [_events("a", 20), _events("b", 40), _events("c", 30), _events("d", 10)]

    def stored() -> list[tuple]:
        try:
            return [(r["id"], r["tier"]) for r in postgres.query("SELECT id, tier FROM kill_out")]
        except Exception:      # noqa: BLE001 - the table is created by the first micro-batch
            return []

    def looking_up() -> bool:
        return postgres.query("SELECT count(*)::int AS n FROM pg_stat_activity "
                              "WHERE query LIKE '%pg_sleep%' AND state = 'active'")[0]["n"] > 0

    def committed_in_database(batch: int) -> bool:
        return bool(postgres.query("SELECT 1 FROM dslc_batches WHERE sink = $1 AND batch_id = $2",
                                   f"sink0 {tmp_path / 'chk' / 'sink0'}", batch))

    write_jsonl(tmp_path / "in/1.json", files[0])
    run = JobProcess(job, tmp_path / "run1.log")
    wait_for(lambda: len(stored()) == len(files[0]), 240, "the first micro-batch in the table", run)
    write_jsonl(tmp_path / "in/2.json", files[1])           # 40 lookups of 0.1 s, two at a time: ~2 s
    wait_for(lambda: 1 in _batches(tmp_path, "offsets"), 60, "micro-batch 1 started", run)
    wait_for(looking_up, 60, "micro-batch 1's lookups", run)
    run.kill()
    assert 1 not in _batches(tmp_path, "commits"), "the kill came after the micro-batch had finished"
    assert not any(i.startswith("b") for i, _ in stored()), "micro-batch 1 reached the table before the kill"
    last = 2
    if "APPEND" in sink:
        run = JobProcess(job, tmp_path / "run2.log")
        wait_for(lambda: 1 in _batches(tmp_path, "commits"), 240, "micro-batch 1 replayed", run)
        write_jsonl(tmp_path / "in/3.json", files[2])
        wait_for(lambda: 2 in _batches(tmp_path, "offsets"), 60, "micro-batch 2 started", run)
        aside = _swap_out(tmp_path)
        wait_for(lambda: committed_in_database(2), 120, "micro-batch 2 committed in the database", run)
        run.kill()
        (tmp_path / "chk/sink0/commits").unlink()
        os.replace(aside, tmp_path / "chk/sink0/commits")
        assert 2 not in _batches(tmp_path, "commits")
        last = 3
    for n in range(last, len(files)):
        write_jsonl(tmp_path / f"in/{n + 1}.json", files[n])
    restart = JobProcess(job_once, tmp_path / "run3.log")
    assert restart.wait(300) == 0, restart.output()[-4000:]
    rows = stored()
    assert [r for r, n in Counter(rows).items() if n > 1] == []
    tiers = {"u0": "gold", "u1": "silver", "u2": "bronze"}
    assert sorted(rows) == sorted((e["id"], tiers[e["user_id"]]) for f in files for e in f)
    ids = postgres.query("SELECT batch_id FROM dslc_batches WHERE sink = $1 ORDER BY batch_id",
                         f"sink0 {tmp_path / 'chk' / 'sink0'}")
    assert [r["batch_id"] for r in ids] == list(range(len(files)))
