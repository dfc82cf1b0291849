"""`dslc explain --estimate`'s job is a code-generation target (issue #42 item 3), not a
process-wide switch: its chains are `chains.estimate_chain`, which records the rows reaching each
ENRICH in the job's capture and calls nothing; every other job's chains call."""
from __future__ import annotations

import ast

import pytest

from dslc.compiler.pipeline import check_text, lower_plan

FLOW = """\
PIPELINE p MODE BATCH;
SOURCE orders FROM JSON 'data/' SCHEMA (order_id STRING, customer_id STRING, amount DOUBLE);
STREAM paid = SELECT order_id, customer_id, amount FROM orders WHERE amount > 0;
STREAM enriched = ENRICH paid WITH HTTP GET 'http://127.0.0.1:1/c/{customer_id}'
  RETURNS (tier STRING) ON ERROR DEAD LETTER 'target/dlq';
STREAM other = ENRICH orders WITH HTTP GET 'http://127.0.0.1:1/o/{order_id}' RETURNS (x STRING);
SINK enriched TO JSON 'target/out';
SINK other TO JSON 'target/other';
"""


def _chain_calls(code: str) -> list[tuple[str, set[str]]]:
    """(function, keywords) of each `chains.*_chain(...)` call of the job."""
    found = []
    for node in ast.walk(ast.parse(code)):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "chains"
                and node.func.attr.endswith("_chain")):
            found.append((node.func.attr, {k.arg for k in node.keywords}))
    return found


def test_the_estimate_job_records_each_chain_and_calls_none(tmp_path):
    code = lower_plan(check_text(FLOW), job_folder=str(tmp_path), writes=False, estimate=True)
    calls = _chain_calls(code)
    assert len(calls) == 2
    assert all(fn == "estimate_chain" and "chain_inputs" in kw for fn, kw in calls)
    assert "captured.chain_inputs" in code and "return captured" in code


@pytest.mark.parametrize("writes", [True, False])
def test_every_other_job_calls(tmp_path, writes):
    code = lower_plan(check_text(FLOW), job_folder=str(tmp_path), writes=writes)
    calls = _chain_calls(code)
    assert len(calls) == 2
    assert all(fn == "run_chain" and "chain_inputs" not in kw for fn, kw in calls)


def test_an_estimate_writes_nothing(tmp_path):
    with pytest.raises(ValueError, match="writes nothing"):
        lower_plan(check_text(FLOW), job_folder=str(tmp_path), writes=True, estimate=True)


def test_the_runtime_has_no_process_wide_estimate_switch():
    from dslc.runtime.spark import chains, estimate

    assert not hasattr(estimate, "ESTIMATING")
    assert callable(chains.estimate_chain)
