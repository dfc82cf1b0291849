"""EXPECT in `dslc test` cases and `dslc.testing`: the rows each EXPECT quarantines and the counts
of each constraint, compared like sinks; a case naming what the pipeline does not have is refused
before anything runs."""
from __future__ import annotations

import pytest

from dslc.testing import CaseFileError, run_case, run_test_file

pytestmark = pytest.mark.spark

JUDGED = """\
PIPELINE judged MODE BATCH;
SOURCE orders FROM JSON 'data/orders/' SCHEMA (id STRING, customer STRING, amount DOUBLE);
EXPECT ON orders CONSTRAINT positive CHECK (amount > 0) ON VIOLATION DROP;
STREAM enriched = ENRICH orders WITH HTTP GET 'http://127.0.0.1:9/customers/{customer}' RETURNS (tier STRING);
EXPECT ON enriched
  CONSTRAINT known_tier CHECK (tier IN ('gold', 'silver')) ON VIOLATION QUARANTINE 'target/quarantine/enriched'
  CONSTRAINT small CHECK (amount < 100);
SINK enriched TO PARQUET 'target/out/enriched';
"""
ROWS = [{"id": "o1", "customer": "c1", "amount": 20.0}, {"id": "o2", "customer": "c2", "amount": 150.0},
        {"id": "o3", "customer": "c3", "amount": -1.0}, {"id": "o4", "customer": "c4", "amount": 5.0}]
ANSWERS = [{"key": "c1", "answer": {"tier": "gold"}}, {"key": "c2", "answer": {"tier": "silver"}},
           {"key": "c4", "answer": {"tier": "tin"}}]


def test_quarantined_rows_and_counts_pass_and_fail_as_sinks_do(spark, tmp_path):
    flow = tmp_path / "judged.flow"
    flow.write_text(JUDGED)
    result = run_case(flow, sources={"orders": ROWS}, enrich={"enriched": ANSWERS},
                      expect={"enriched": [{"id": "o1"}, {"id": "o2"}]},
                      quarantine={"enriched": [{"id": "o4", "tier": "tin", "_constraints": ["known_tier"],
                                                "_operator": "enriched", "_line": 5}]},
                      constraints={"orders": {"positive": 1},
                                   "enriched": {"known_tier": {"passed": 2, "failed": 1}, "small": 1}})
    assert result.passed, result.report()
    assert result.rows("constraints:enriched") == [{"constraint": "known_tier", "passed": 2, "failed": 1},
                                                    {"constraint": "small", "passed": 2, "failed": 1}]
    assert [r["id"] for r in result.rows("quarantine:enriched")] == ["o4"]
    failing = run_case(flow, sources={"orders": ROWS}, enrich={"enriched": ANSWERS},
                       quarantine={"enriched": [{"id": "o2", "_constraints": ["small"]}]},
                       constraints={"enriched": {"small": 0}})
    assert not failing.passed
    report = failing.report()
    assert "quarantine of enriched" in report and "constraints of enriched" in report and "failed: 0 -> 1" in report


def test_a_test_file_lists_quarantine_and_constraints(spark, tmp_path):
    (tmp_path / "judged.flow").write_text(JUDGED)
    (tmp_path / "judged.test.yaml").write_text("""\
cases:
  - name: a tier outside the list is quarantined
    sources:
      orders: [{id: o4, customer: c4, amount: 5.0}]
    enrich:
      enriched: [{key: c4, answer: {tier: tin}}]
    quarantine:
      enriched: [{id: o4, _constraints: [known_tier]}]
    constraints:
      enriched: {known_tier: 1, small: {passed: 1, failed: 0}}
""")
    [result] = run_test_file(tmp_path / "judged.test.yaml", spark=spark)
    assert result.passed, result.report()


@pytest.mark.parametrize("pieces, message", [
    ({"quarantine": {"orders": [{"id": "o1"}]}}, "its EXPECT (line 3) quarantines nothing"),
    ({"quarantine": {"nope": []}}, "no EXPECT ON 'nope' (the pipeline has EXPECT ON: orders, enriched)"),
    ({"quarantine": {"enriched": [{"idd": "o1"}]}}, "unknown column 'idd'"),
    ({"constraints": {"enriched": {"tiny": 1}}}, "no constraint 'tiny' (it has: known_tier, small)"),
    ({"constraints": {"enriched": {"small": "many"}}}, "expected the rows it failed"),
])
def test_a_case_naming_what_the_pipeline_lacks_is_refused(spark, tmp_path, pieces, message):
    flow = tmp_path / "judged.flow"
    flow.write_text(JUDGED)
    with pytest.raises(CaseFileError, match=message.replace("(", r"\(").replace(")", r"\)")):
        run_case(flow, sources={"orders": ROWS}, **pieces)
