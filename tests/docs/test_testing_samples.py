"""docs/testing.md's samples (a failing test case, a recording) are what their commands print (tests/docs/sample_outputs.py)."""
from __future__ import annotations

import pytest
from sample_outputs import REPO, run_document

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_the_samples_are_what_the_commands_print():
    mismatches = run_document(REPO / "docs/testing.md")
    assert not mismatches, "\n\n".join(map(str, mismatches))
