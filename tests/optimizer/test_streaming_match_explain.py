"""`explain --physical` names what a MATCH is in each mode: Spark's broadcast join in BATCH; in
STREAMING a lookup in the snapshot pinned per micro-batch, by the condition's same-typed
equality keys when it has some, else a scan of every entry (compiler/plan/match_keys.py)."""
from __future__ import annotations

import pytest

from dslc.compiler.optimizer.explain import render_physical
from dslc.compiler.pipeline import check_text

FLOW = """PIPELINE p MODE {mode} CHECKPOINT 'chk';
SOURCE orders FROM JSON 'in/' SCHEMA (id STRING, country STRING, tier INT, amount DOUBLE);
SOURCE rule_updates FROM JSON 'rules/' SCHEMA (rule_id STRING, country STRING, tier BIGINT, max_amount DOUBLE);
BROADCAST rules FROM rule_updates KEY rule_id;
STREAM m = MATCH orders AGAINST rules AS r WHERE {where};
SINK m TO PARQUET 'out';
"""


@pytest.mark.parametrize("mode, where, kind", [
    ("BATCH", "orders.country = r.country", "m: broadcast join Match"),
    ("STREAMING", "orders.country = r.country AND orders.amount > r.max_amount",
     "m: pinned-snapshot lookup by (country) per micro-batch Match"),
    ("STREAMING", "r.country = country AND orders.id = r.rule_id", "m: pinned-snapshot lookup by (country, rule_id)"),
    # INT = BIGINT and DOUBLE = DOUBLE are no keys (a cast; NaN = NaN in SQL): every entry is scanned
    ("STREAMING", "orders.tier = r.tier AND orders.amount = r.max_amount", "m: pinned-snapshot scan (every entry) per"),
    ("STREAMING", "orders.country = r.country OR orders.amount > r.max_amount", "m: pinned-snapshot scan"),
])
def test_the_match_step_says_how_it_runs(mode, where, kind):
    text = render_physical(check_text(FLOW.format(mode=mode, where=where), "/tmp/p.flow"))
    assert kind in text, text
