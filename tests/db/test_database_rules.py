"""BROADCAST ... FROM DATABASE ... KEY col [REFRESH EVERY d]: rules kept in a real PostgreSQL, read
by Spark's JDBC reader. BATCH reads the table once; STREAMING reads it when the job starts and,
with REFRESH under a continuous trigger, again every d, applying the difference (upserts and
deletes) so that a micro-batch sees every change read before it started."""
from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

from dslc.runtime.spark.refreshed_state import difference

pytestmark = pytest.mark.spark

RULES = """
PIPELINE rules_db MODE {mode} CHECKPOINT 'chk' {trigger};
DATABASE crm AT '{url}';
SOURCE orders FROM JSON 'in/' SCHEMA (id STRING, country STRING, amount DOUBLE);
BROADCAST rules FROM DATABASE crm TABLE '{table}' KEY rule_id {refresh};
STREAM flagged = MATCH orders AGAINST rules AS r
  WHERE orders.country = r.country AND orders.amount > r.max_amount;
SINK flagged TO PARQUET 'out/flagged';
"""


def _rules_table(crm, table: str, rows: list[tuple]) -> None:
    crm.execute(f"DROP TABLE IF EXISTS {table}")
    crm.execute(f"CREATE TABLE {table} (rule_id TEXT PRIMARY KEY, country TEXT, max_amount DOUBLE PRECISION, "
                "round INTEGER)")
    if rows:
        crm.copy_rows(table, ["rule_id", "country", "max_amount", "round"], rows)


def _orders(folder: Path, name: str, rows: list[dict]) -> None:
    """A file written beside the input folder, then moved in: it arrives whole."""
    staged = folder / "staging" / name
    staged.parent.mkdir(parents=True, exist_ok=True)
    staged.write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "in").mkdir(exist_ok=True)
    os.replace(staged, folder / "in" / name)


def _flagged(spark, folder: Path) -> list[tuple]:
    """The sink's committed rows so far (none while its micro-batches committed no file)."""
    try:
        rows = spark.read.parquet(str(folder / "out/flagged")).collect()
    except Exception:          # noqa: BLE001 - UNABLE_TO_INFER_SCHEMA / PATH_NOT_FOUND: nothing committed yet
        return []
    return sorted((r["id"], r["rule_id"], r["round"]) for r in rows)


def test_the_difference_is_upserts_of_new_and_changed_rows_and_deletes_of_missing_keys():
    current = {"r1": {"k": "r1", "v": 1}, "r2": {"k": "r2", "v": 2}, "r3": {"k": "r3", "v": 3}}
    rows = [{"k": "r1", "v": 1}, {"k": "r2", "v": 20}, {"k": "r4", "v": 4}]
    assert difference(current, rows, "k") == [
        {"k": "r2", "v": 20, "__dslc_op": "upsert"}, {"k": "r4", "v": 4, "__dslc_op": "upsert"},
        {"k": "r3", "__dslc_op": "delete"}]
    assert difference(current, list(current.values()), "k") == []
    with pytest.raises(ValueError, match="KEY column 'k' is NULL"):
        difference({}, [{"k": None, "v": 1}], "k")


@pytest.mark.parametrize("mode", ["BATCH", "STREAMING"])
def test_rules_read_from_a_table_without_schema_judge_the_orders(spark, crm, run_flow, tmp_path, mode):
    """No SCHEMA clause: the columns and types are read from the table when the pipeline is
    compiled. BATCH and STREAMING (AVAILABLE NOW) give the same rows."""
    table = f"rules_{mode.lower()}"
    _rules_table(crm, table, [("fr", "FR", 100.0, 1), ("de", "DE", 500.0, 1)])
    _orders(tmp_path, "1.json", [{"id": "o1", "country": "FR", "amount": 150.0},
                                 {"id": "o2", "country": "FR", "amount": 50.0},
                                 {"id": "o3", "country": "DE", "amount": 600.0},
                                 {"id": "o4", "country": "NL", "amount": 900.0}])
    flow = tmp_path / "pipeline.flow"
    trigger = "TRIGGER AVAILABLE NOW" if mode == "STREAMING" else ""
    flow.write_text(RULES.format(mode=mode, trigger=trigger, url=crm.flow_url, table=table, refresh=""))
    job = run_flow(flow)
    assert _flagged(spark, tmp_path) == [("o1", "fr", 1), ("o3", "de", 1)]
    assert "'round', 'INT'" in job.read_text()          # the table's integer column, read at compile time


def test_a_rule_changed_in_the_database_between_micro_batches_reaches_the_next_one(spark, crm, run_flow, tmp_path):
    """STREAMING with REFRESH EVERY 1s under TRIGGER EVERY 1s: each round changes the only rule in
    the database (orders above `round` are flagged, the rule's round says which version judged),
    waits until the job has read the change, then moves in an order of amount round + 0.5: it must
    be judged by that round's rule. A deleted rule flags nothing after it is read."""
    table = "rules_every"
    _rules_table(crm, table, [("only", "NL", 0.0, 0)])
    flow = tmp_path / "pipeline.flow"
    flow.write_text(RULES.format(mode="STREAMING", trigger="TRIGGER EVERY 1s", url=crm.flow_url, table=table,
                                 refresh="REFRESH EVERY 1s"))
    applied = tmp_path / "chk/state/rules/applied.json"
    (tmp_path / "in").mkdir()
    failures: list[BaseException] = []

    def run() -> None:
        try:
            run_flow(flow)
        except BaseException as error:     # noqa: BLE001 - reported by the test below
            failures.append(error)

    def version() -> int:
        return json.loads(applied.read_text())["version"] if applied.is_file() else 0

    def wait(until, what: str) -> None:
        deadline = time.monotonic() + 90
        while not until():
            assert not failures and time.monotonic() < deadline, (what, [str(f) for f in failures])
            time.sleep(0.2)

    job = threading.Thread(target=run, daemon=True)
    job.start()
    try:
        wait(lambda: version() > 0, "the first read")
        rounds = 3
        for r in range(1, rounds + 1):
            before = version()
            crm.execute(f"UPDATE {table} SET max_amount = {r}, round = {r} WHERE rule_id = 'only'")
            wait(lambda before=before: version() > before, f"round {r}'s rule read")
            _orders(tmp_path, f"{r}.json", [{"id": f"o{r}", "country": "NL", "amount": r + 0.5}])
            wait(lambda r=r: len(_flagged(spark, tmp_path)) >= r, f"round {r}'s order judged")
        before = version()
        crm.execute(f"DELETE FROM {table}")
        wait(lambda: version() > before, "the delete read")
        _orders(tmp_path, "4.json", [{"id": "o4", "country": "NL", "amount": 99.0}])
        log = tmp_path / "out/flagged/_spark_metadata"
        wait(lambda: (log / "3").is_file(), "the last order's micro-batch committed")
    finally:
        for query in spark.streams.active:
            query.stop()
        job.join(60)
    assert _flagged(spark, tmp_path) == [("o1", "only", 1), ("o2", "only", 2), ("o3", "only", 3)]
