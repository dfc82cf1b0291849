"""`dslc.testing` from pytest: run_case inline and from a file, and the snapshot texts."""
from __future__ import annotations

import pytest

from dslc.testing import CaseFileError, job_code, physical_text, plan_text, run_case

pytestmark = pytest.mark.spark

ROW = {"id": "o1", "customer": "c1", "amount": 20.0, "ts": "2026-11-01 12:00:00"}


def test_run_case_inline_passes_and_exposes_rows(spark, shop, tmp_path):
    shop("cases: [{name: unused, expect: {enriched: []}}]")
    result = run_case(tmp_path / "shop.flow", sources={"orders": [ROW]},
                      enrich={"enriched": [{"key": "c1", "answer": {"tier": "gold"}}]},
                      expect={"enriched": [{"id": "o1", "tier": "gold"}]})
    assert result.passed, result.report()
    assert result.rows("enriched") == [{"id": "o1", "customer": "c1", "amount": 20.0,
                                        "ts": "2026-11-01 12:00:00", "tier": "gold"}]
    assert result.rows("dead_letters:enriched") == []
    failing = run_case(tmp_path / "shop.flow", sources={"orders": [ROW]},
                       enrich={"enriched": [{"key": "c1", "answer": {"tier": "gold"}}]},
                       expect={"enriched": [{"id": "o1", "tier": "bronze"}]})
    assert not failing.passed and "tier: 'bronze' -> 'gold'" in failing.report()


def test_run_case_rejects_a_malformed_case(spark, shop, tmp_path):
    shop("cases: [{name: unused, expect: {enriched: []}}]")
    with pytest.raises(CaseFileError, match="unknown sink 'nope'"):
        run_case(tmp_path / "shop.flow", expect={"nope": []})


def test_snapshot_texts_are_what_the_commands_print(shop, tmp_path):
    flow = tmp_path / "shop.flow"
    shop("cases: [{name: unused, expect: {enriched: []}}]")
    assert plan_text(flow).startswith("pipeline shop mode=BATCH\n")
    assert "chain#" in physical_text(flow)
    code = job_code(flow)
    assert code == job_code(flow)                       # deterministic: fit for a snapshot
    assert "FOLDER = flow_folder(__file__, '.')" in code   # as if written beside the .flow file


def test_a_case_run_leaves_no_live_progress_behind(spark, shop, tmp_path):
    """A job that writes nothing (dslc test, the REPL's :show) has no live progress: no collector
    thread goes on printing after it."""
    import threading

    def collectors() -> set[threading.Thread]:
        return {t for t in threading.enumerate() if t.name.startswith("dslc-progress") and t.is_alive()}

    before = collectors()   # a job of an earlier test in this process may still be stopping its own
    shop("cases: [{name: unused, expect: {enriched: []}}]")
    result = run_case(tmp_path / "shop.flow", sources={"orders": [ROW]},
                      enrich={"enriched": [{"key": "c1", "answer": {"tier": "gold"}}]},
                      expect={"enriched": [{"id": "o1", "tier": "gold"}]})
    assert result.passed, result.report()
    assert not collectors() - before
