"""MATCH, as the contract states it, in BATCH and STREAMING."""
from __future__ import annotations

import pytest

from contract.support import by
from dslc.compiler.diagnostics import CompileError
from dslc.compiler.pipeline import check_file

pytestmark = pytest.mark.spark

PIPE = """
SOURCE orders FROM JSON 'in/orders/' SCHEMA (id STRING, country STRING, amount DOUBLE);
SOURCE rule_updates FROM JSON 'in/rules/' SCHEMA (rule_id STRING, op STRING, country STRING, max_amount DOUBLE);
BROADCAST rules FROM rule_updates KEY rule_id OP op;
"""
ORDERS = [{"id": "o1", "country": "NL", "amount": 50.0}, {"id": "o2", "country": "NL", "amount": 5.0},
          {"id": "o3", "country": "DE", "amount": 500.0}, {"id": "o4", "country": "FR", "amount": 1.0}]
RULES = [{"rule_id": "r1", "op": "set", "country": "NL", "max_amount": 10.0},
         {"rule_id": "r2", "op": "set", "country": "NL", "max_amount": 20.0},
         {"rule_id": "r3", "op": "set", "country": "DE", "max_amount": 100.0}]


def test_one_row_per_input_row_and_matching_entry_with_renamed_state_columns(flow, mode):
    """"MATCH emits one row per (input row, matching state entry): every input column, then the
    state's columns (the KEY column included, the OP column left out); a state column whose name
    an input column already has is renamed `<alias>_<column>` (`r_country`)."""
    flow.rows_file("in/orders/1.json", ORDERS)
    flow.rows_file("in/rules/1.json", RULES)
    flow.run(PIPE + """
STREAM flagged = MATCH orders AGAINST rules AS r WHERE orders.country = r.country AND orders.amount > r.max_amount;
SINK flagged TO PARQUET 'out/flagged';""", mode)
    rows = flow.read("out/flagged")
    assert list(rows[0]) == ["id", "country", "amount", "rule_id", "r_country", "max_amount"]
    assert by(rows, "id", "rule_id", "r_country") == [("o1", "r1", "NL"), ("o1", "r2", "NL"), ("o3", "r3", "DE")]


def test_the_alias_defaults_to_the_state_name(flow):
    """docs/language.md: "`AS alias` defaults to the state's name. In the predicate, refer to the
    input by its stream name and to the state by the alias."""
    flow.rows_file("in/orders/1.json", ORDERS)
    flow.rows_file("in/rules/1.json", RULES)
    flow.run(PIPE + """
STREAM flagged = MATCH orders AGAINST rules WHERE orders.country = rules.country AND orders.amount > rules.max_amount;
SINK flagged TO PARQUET 'out/flagged';""", "BATCH")
    assert by(flow.read("out/flagged"), "id", "rules_country") == [("o1", "NL"), ("o1", "NL"), ("o3", "DE")]


def test_a_renamed_column_that_is_taken_is_reported_by_check(flow):
    """docs/language.md: "A renamed name that is still taken (two MATCHes with the same alias over
    states that share a column ...) is E0211 with a hint to pick another alias." (issue #16 item 1)"""
    path = flow.write(PIPE + """
SOURCE owner_updates FROM JSON 'in/owners/' SCHEMA (owner STRING, country STRING);
BROADCAST owners FROM owner_updates KEY owner;
STREAM a = MATCH orders AGAINST rules AS r WHERE orders.country = r.country;
STREAM b = MATCH a AGAINST owners AS r WHERE a.country = r.country;
SINK b TO CONSOLE;""")
    with pytest.raises(CompileError) as failed:
        check_file(path)
    [problem] = failed.value.diagnostics
    assert problem.code == "E0211" and "r_country" in problem.message and "alias" in problem.hint


KEYED = """
SOURCE events FROM JSON 'in/events/' SCHEMA (id STRING, country STRING, tier INT, amount DOUBLE, code STRING);
SOURCE limit_updates FROM JSON 'in/limits/' SCHEMA (limit_id STRING, op STRING, country STRING, tier INT,
  max_amount DOUBLE, code INT);
BROADCAST limits FROM limit_updates KEY limit_id OP op;
"""
EVENTS = [{"id": "e1", "country": "NL", "tier": 1, "amount": 50.0, "code": "7"},
          {"id": "e2", "country": "NL", "tier": 2, "amount": 50.0, "code": "8"},
          {"id": "e3", "country": None, "tier": 1, "amount": 50.0, "code": "7"},     # NULL key: no match
          {"id": "e4", "country": "DE", "tier": None, "amount": 50.0, "code": None},
          {"id": "e5", "country": "DE", "tier": 1, "amount": 1.0, "code": "07"}]
LIMITS = [{"limit_id": "l1", "op": "set", "country": "NL", "tier": 1, "max_amount": 10.0, "code": 7},
          {"limit_id": "l2", "op": "set", "country": "NL", "tier": 1, "max_amount": 20.0, "code": 8},
          {"limit_id": "l3", "op": "set", "country": None, "tier": 1, "max_amount": 0.0, "code": 7},   # NULL never equals
          {"limit_id": "l4", "op": "set", "country": "DE", "tier": None, "max_amount": 0.0, "code": 7},
          {"limit_id": "l5", "op": "set", "country": "DE", "tier": 1, "max_amount": 0.0, "code": 7}]


@pytest.mark.parametrize("where, expected", [
    # two equalities of the same types: STREAMING looks the entries up by (country, tier)
    ("events.country = l.country AND events.tier = l.tier AND events.amount > l.max_amount",
     [("e1", "l1"), ("e1", "l2"), ("e5", "l5")]),
    # STRING = INT is a cast in SQL ('07' = 7): not a key, the entries are scanned
    ("events.code = l.code AND events.country = l.country", [("e1", "l1"), ("e2", "l2"), ("e5", "l4"), ("e5", "l5")]),
    # no equality at all: every entry is a candidate
    ("events.amount > l.max_amount * 4 AND l.tier IS NULL", [("e1", "l4"), ("e2", "l4"), ("e3", "l4"), ("e4", "l4"), ("e5", "l4")]),
])
def test_equality_keys_match_as_sql_equality_in_both_modes(flow, mode, where, expected):
    """MATCH rows are the SQL condition's rows in both modes: a NULL key matches nothing (not even
    a NULL entry), only same-typed equalities become the STREAMING lookup's keys (#12)."""
    flow.rows_file("in/events/1.json", EVENTS)
    flow.rows_file("in/limits/1.json", LIMITS)
    code = flow.run(KEYED + f"""
STREAM hits = MATCH events AGAINST limits AS l WHERE {where};
SINK hits TO PARQUET 'out/hits';""", mode)
    assert by(flow.read("out/hits"), "id", "limit_id") == sorted(expected)
    keyed = "keys=(('country', 'country'), ('tier', 'tier'))," in code
    assert keyed == (mode == "STREAMING" and where.startswith("events.country")), code[-1500:]
    assert ("keys=(('country', 'country'),)," in code) == (mode == "STREAMING" and where.startswith("events.code"))


TIMED = """
SOURCE events FROM JSON 'in/events/' SCHEMA (id STRING, user STRING, amount DOUBLE, ts TIMESTAMP)
  WATERMARK ts DELAY 0s;
SOURCE limit_updates FROM JSON 'in/limits/' SCHEMA (user STRING, max_amount DOUBLE);
BROADCAST limits FROM limit_updates KEY user;
STREAM over = MATCH events AGAINST limits AS l WHERE events.user = l.user AND events.amount > l.max_amount;
STREAM per_minute = SELECT user, window(ts, '1 minute') AS w, count(*) AS n FROM over GROUP BY user, window(ts, '1 minute');
SINK over TO PARQUET 'out/over';
SINK per_minute TO PARQUET 'out/per_minute';
"""


def test_windows_after_a_match_stage_close_by_every_input_row(flow, mode):
    """The MATCH is read on two paths, so in STREAMING it is a stage; its readers' watermark
    follows every input row of the MATCH (not only the matched ones), as one query's would: the
    last matched minute (12:01) closes because an unmatched event of 12:02 arrived (#12)."""
    events = [{"id": f"e{i}", "user": "a", "amount": 100.0, "ts": f"2026-11-01T12:0{i // 10}:{i % 10:02d}"}
              for i in range(20)]                                     # matched, minutes 0 and 1
    events.append({"id": "late", "user": "b", "amount": 1.0, "ts": "2026-11-01T12:02:30"})   # not matched
    flow.rows_file("in/events/1.json", events)
    flow.rows_file("in/limits/1.json", [{"user": "a", "max_amount": 10.0}, {"user": "b", "max_amount": 10.0}])
    code = flow.run(TIMED, mode)
    counts = sorted((r["user"], r["w"]["start"].strftime("%H:%M"), r["n"]) for r in flow.read("out/per_minute"))
    assert counts == [("a", "12:00", 10), ("a", "12:01", 10)]
    assert sorted(r["id"] for r in flow.read("out/over")) == sorted(f"e{i}" for i in range(20))
    assert ("streaming.with_ticks(" in code) == (mode == "STREAMING")


FILTERED = """
SOURCE orders FROM JSON 'in/orders/' SCHEMA (id STRING, key STRING, amount DOUBLE, ts TIMESTAMP)
  WATERMARK ts DELAY 0s;
SOURCE limit_updates FROM JSON 'in/limits/' SCHEMA (key STRING, max_amount DOUBLE);
BROADCAST limits FROM limit_updates KEY key;
STREAM paid = SELECT id, key, amount, ts FROM orders WHERE amount > 0;
STREAM enriched = ENRICH paid WITH HTTP GET '{url}/kv/{{key}}' RETURNS (value STRING)
  ON ERROR DEAD LETTER 'dlq';
STREAM flagged = MATCH enriched AGAINST limits AS l WHERE enriched.key = l.key AND enriched.amount > l.max_amount;
STREAM per_minute = SELECT key, window(ts, '1 minute') AS w, count(*) AS n FROM flagged GROUP BY key, window(ts, '1 minute');
SINK flagged TO PARQUET 'out/flagged';
SINK per_minute TO PARQUET 'out/per_minute';
"""


def test_windows_after_stages_close_by_the_sources_watermark_before_any_filter(flow, service, mode):
    """docs/streaming.md: a stage's readers declare the WATERMARK on rows that carry the latest
    event time the SOURCE read, before any filter. The last order (12:09, unpaid) is removed by
    the WHERE that dslc pushes below the ENRICH (a stage: it has a DEAD LETTER), yet it moves the
    watermark, so every window BATCH writes is written in STREAMING too (#33 item 1: the windows
    of 12:02 were never written)."""
    orders = [{"id": f"o{i}", "key": "a", "amount": 100.0, "ts": f"2026-11-01T12:0{i // 10}:{i % 10:02d}"}
              for i in range(30)]                                                  # minutes 0, 1, 2
    orders.append({"id": "unpaid", "key": "a", "amount": 0.0, "ts": "2026-11-01T12:09:00"})
    flow.rows_file("in/orders/1.json", orders)
    flow.rows_file("in/limits/1.json", [{"key": "a", "max_amount": 10.0}])
    code = flow.run(FILTERED.format(url=service.url), mode)
    counts = sorted((r["key"], r["w"]["start"].strftime("%H:%M"), r["n"]) for r in flow.read("out/per_minute"))
    assert counts == [("a", "12:00", 10), ("a", "12:01", 10), ("a", "12:02", 10)]
    assert len(flow.read("out/flagged")) == 30
    assert service.calls["a"] == 30                     # one call per paid row, none for the unpaid one
    assert ("streaming.with_ticks(" in code) == (mode == "STREAMING")
