"""The per-row RETURNS check: the usual value of a column passes at once, anything else is
looked at closely, and a value that does not fit is named with its column."""
from __future__ import annotations

from typing import Any

import pytest
from dslc.runtime.config import Column
from dslc.runtime.schema.results import checker

RETURNS = (Column("flag", "BOOLEAN"), Column("n", "INT"), Column("x", "DOUBLE"), Column("s", "STRING"))


@pytest.mark.parametrize("row", [
    {"flag": True, "n": 3, "x": 1.5, "s": "a"},
    {"flag": None, "n": None, "x": None, "s": None},
    {"flag": False, "n": 2.0, "x": 2, "s": 7},          # an integral float for an INT, an int for a DOUBLE
    {"flag": True, "n": -2**31, "x": "1.25", "s": []},  # a numeric string for a DOUBLE; STRING is not checked
    {},
])
def test_values_that_fit_pass(row: dict[str, Any]) -> None:
    assert checker(RETURNS)(row) is None


@pytest.mark.parametrize("row, message", [
    ({"flag": 1}, "field 'flag' is declared BOOLEAN but got int 1"),
    ({"flag": "true"}, "field 'flag' is declared BOOLEAN but got str 'true'"),
    ({"n": 2**31}, "field 'n' is declared INT but got int 2147483648"),
    ({"n": True}, "field 'n' is declared INT but got bool True"),
    ({"x": True}, "field 'x' is declared DOUBLE but got bool True"),
    ({"x": "high"}, "field 'x' is declared DOUBLE but got str 'high'"),
])
def test_a_value_that_does_not_fit_is_named_with_its_column(row: dict[str, Any], message: str) -> None:
    assert checker(RETURNS)(row) == message


def test_returns_without_a_checked_type_need_no_check() -> None:
    assert checker((Column("s", "STRING"), Column("a", "ARRAY<INT>"))) is None
