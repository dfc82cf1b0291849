"""Fixtures of the `dslc test` tests: a small pipeline folder written fresh for each test."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

PIPELINE = """\
PIPELINE shop MODE BATCH;

SOURCE orders FROM JSON 'data/orders/'
  SCHEMA (id STRING, customer STRING, amount DOUBLE, ts TIMESTAMP);

STREAM big = SELECT id, customer, amount, ts FROM orders WHERE amount > 10;

STREAM enriched = ENRICH big
  WITH HTTP GET 'http://127.0.0.1:9/customers/{customer}'
  RETURNS (tier STRING)
  TIMEOUT 1s
  ON TIMEOUT DEAD LETTER 'target/dlq'
  ON ERROR DEAD LETTER 'target/dlq';

SINK enriched TO PARQUET 'target/out/enriched';
"""


@pytest.fixture
def shop(tmp_path: Path):
    """write(test_yaml) -> the test file's path, beside shop.flow in a fresh folder."""
    (tmp_path / "shop.flow").write_text(PIPELINE)

    def write(text: str, name: str = "shop.test.yaml") -> Path:
        path = tmp_path / name
        path.write_text(textwrap.dedent(text))
        return path

    return write
