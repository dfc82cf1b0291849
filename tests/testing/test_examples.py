"""`dslc test examples/`: the examples' own test files pass (the README shows the command)."""
from __future__ import annotations

import io
from pathlib import Path

import pytest

from dslc.testing.runner import run_paths

pytestmark = pytest.mark.spark

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_every_example_has_a_test_file_with_three_cases_or_more():
    import yaml

    for flow in sorted(EXAMPLES.glob("*/pipeline.flow")):
        cases = yaml.safe_load(flow.with_name("pipeline.test.yaml").read_text())["cases"]
        assert len(cases) >= 3, flow


def test_dslc_test_examples_passes(spark):
    out = io.StringIO()
    code = run_paths([str(EXAMPLES)], out=out)
    text = out.getvalue()
    assert code == 0, text
    assert text.rstrip().splitlines()[-1] == "21 passed, 0 failed"
