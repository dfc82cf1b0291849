"""The REPL's `:test`: the test file beside the loaded pipeline, on the REPL's session."""
from __future__ import annotations

import io

import pytest

from dslc.compiler.cli.repl import Repl
from dslc.compiler.cli.repl_session import Session

pytestmark = pytest.mark.spark

CASE = """
cases:
  - name: gold customer
    sources:
      orders: [{id: o1, customer: c1, amount: 20.0, ts: 2026-11-01 12:00:00}]
    enrich:
      enriched: [{key: c1, answer: {tier: gold}}]
    expect:
      enriched: [{id: o1, tier: gold}]
"""


def _repl(folder) -> tuple[Repl, io.StringIO, io.StringIO]:
    out, err = io.StringIO(), io.StringIO()
    return Repl(Session(folder=folder), out=out, err=err), out, err


def test_test_runs_the_file_beside_the_loaded_pipeline(spark, shop, tmp_path):
    shop(CASE)
    repl, out, err = _repl(tmp_path)
    repl.feed(f":load {tmp_path / 'shop.flow'}")
    repl.feed(":test")
    assert "PASS  gold customer" in out.getvalue()
    assert out.getvalue().rstrip().endswith("1 passed, 0 failed") and repl.errors == 0, err.getvalue()


def test_test_without_a_loaded_pipeline_or_test_file_says_what_to_do(shop, tmp_path):
    repl, out, err = _repl(tmp_path)
    repl.feed(":test")
    assert ":load a .flow file first" in err.getvalue()
    shop("")
    repl.feed(f":load {tmp_path / 'shop.flow'}")
    (tmp_path / "shop.test.yaml").unlink()
    repl.feed(":test")
    assert "no test file" in err.getvalue() and "shop.test.yaml" in err.getvalue() and repl.errors == 2
