"""Which names Spark must see back-quoted: its unquoted identifiers are ASCII words, not keywords."""
from __future__ import annotations

import pytest

from dslc.compiler.plan.names import identifier, sql_name


@pytest.mark.parametrize("name, text", [
    ("orders", "orders"), ("raw_orders_2", "raw_orders_2"),
    ("raw-orders", "`raw-orders`"), ("paid orders", "`paid orders`"), ("select", "`select`"),
    ("order", "`order`"), ("café", "`café`"), ("2024", "`2024`"), ("a`b", "`a``b`"), ("a.b", "`a.b`"),
])
def test_sql_name_quotes_exactly_what_spark_cannot_read_bare(name, text):
    assert sql_name(name) == text
    assert identifier(name).sql(dialect="spark") == text
