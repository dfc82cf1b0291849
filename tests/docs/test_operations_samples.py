"""docs/operations.md's samples (the fraud example's run and estimate, the Kafka error) are what their commands print (tests/docs/sample_outputs.py)."""
from __future__ import annotations

import pytest
from sample_outputs import REPO, run_document

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_the_samples_are_what_the_commands_print():
    mismatches = run_document(REPO / "docs/operations.md")
    assert not mismatches, "\n\n".join(map(str, mismatches))
