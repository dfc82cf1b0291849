"""BROADCAST, as the contract states it, in BATCH and STREAMING."""
from __future__ import annotations

import pytest

from contract.support import by

pytestmark = pytest.mark.spark

PIPE = """
SOURCE orders FROM JSON 'in/orders/' SCHEMA (id STRING, country STRING);
SOURCE rule_updates FROM JSON 'in/rules/' SCHEMA (rule_id STRING, op STRING, country STRING);
"""
ORDERS = [{"id": "o1", "country": "NL"}, {"id": "o2", "country": "DE"}, {"id": "o3", "country": "FR"}]


def test_rows_are_applied_in_order_delete_removes_anything_else_upserts(flow, mode):
    """"BROADCAST: ... the read-write side applies the source's rows in order."; "op = 'delete'
    removes the key, anything else upserts". r1 is set, moved, then deleted; r2 upserted twice."""
    flow.rows_file("in/orders/1.json", ORDERS)
    flow.rows_file("in/rules/1.json", [
        {"rule_id": "r1", "op": "insert", "country": "NL"},
        {"rule_id": "r2", "op": "insert", "country": "NL"},
        {"rule_id": "r1", "op": "update", "country": "DE"},
        {"rule_id": "r2", "op": "whatever", "country": "FR"},
        {"rule_id": "r1", "op": "delete", "country": None},
        {"rule_id": "r3", "op": "insert", "country": "DE"},
    ])
    flow.run(PIPE + """
BROADCAST rules FROM rule_updates KEY rule_id OP op;
STREAM m = MATCH orders AGAINST rules AS r WHERE orders.country = r.country;
SINK m TO PARQUET 'out/m';""", mode)
    assert by(flow.read("out/m"), "id", "rule_id") == [("o2", "r3"), ("o3", "r2")]


def test_using_python_applies_each_row_and_process_reads_the_state(flow, mode):
    """"def apply(row: dict, rules: MutableMapping) -> None -- BROADCAST ... USING PYTHON: the
    read-write side"; "PROCESS ... WITH BROADCAST rules: one argument per named state"."""
    flow.module("rules_fn", """
def apply(row, rules):
    if row["op"] == "drop":
        del rules[row["country"]]
    else:
        rules[row["country"]] = {"n": rules.get(row["country"], {"n": 0})["n"] + 1}

def score(row, rules):
    entry = rules.get(row["country"])
    return {"id": row["id"], "n": None if entry is None else entry["n"]}
""")
    flow.rows_file("in/orders/1.json", ORDERS)
    flow.rows_file("in/rules/1.json", [{"rule_id": "x", "op": "add", "country": c} for c in ["NL", "NL", "DE", "FR"]]
                   + [{"rule_id": "x", "op": "drop", "country": "FR"}])
    flow.run(PIPE + """
BROADCAST counts FROM rule_updates USING PYTHON 'rules_fn:apply';
STREAM s = PROCESS orders WITH BROADCAST counts USING PYTHON 'rules_fn:score' RETURNS (id STRING, n INT);
SINK s TO PARQUET 'out/s';""", mode)
    assert by(flow.read("out/s"), "id", "n") == [("o1", 2), ("o2", 1), ("o3", None)]


def test_the_data_side_sees_a_read_only_view(flow):
    """"the data side sees a read-only view (any mutation raises a clear error)"."""
    flow.module("mutate", """
def score(row, rules):
    rules["hacked"] = {"country": "XX"}
    return {"id": row["id"]}
""")
    flow.rows_file("in/orders/1.json", ORDERS)
    flow.rows_file("in/rules/1.json", [{"rule_id": "r1", "op": "set", "country": "NL"}])
    with pytest.raises(Exception, match="read-only"):
        flow.run(PIPE + """
BROADCAST rules FROM rule_updates KEY rule_id OP op;
STREAM s = PROCESS orders WITH BROADCAST rules USING PYTHON 'mutate:score' RETURNS (id STRING);
SINK s TO PARQUET 'out/s';""", "BATCH")


def test_streaming_state_is_restored_from_the_checkpoint_and_updated_by_new_rules(flow):
    """"In STREAMING mode each data micro-batch sees every rule update that had arrived when that
    micro-batch started ..., and the state is restored from the checkpoint after a restart."
    The second run reads only the new files: old rules come from the checkpoint."""
    text = PIPE + """
BROADCAST rules FROM rule_updates KEY rule_id OP op;
STREAM m = MATCH orders AGAINST rules AS r WHERE orders.country = r.country;
SINK m TO PARQUET 'out/m';"""
    flow.rows_file("in/orders/1.json", ORDERS)
    flow.rows_file("in/rules/1.json", [{"rule_id": "r1", "op": "set", "country": "NL"}])
    flow.run(text, "STREAMING")
    assert by(flow.read("out/m"), "id", "rule_id") == [("o1", "r1")]
    flow.rows_file("in/rules/2.json", [{"rule_id": "r2", "op": "set", "country": "DE"}])
    flow.rows_file("in/orders/2.json", [{"id": "o4", "country": "NL"}, {"id": "o5", "country": "DE"}])
    flow.run(text, "STREAMING")
    assert by(flow.read("out/m"), "id", "rule_id") == [("o1", "r1"), ("o4", "r1"), ("o5", "r2")]
