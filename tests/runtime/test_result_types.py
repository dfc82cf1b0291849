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
    assert checker((Column("s", "STRING"), Column("b", "BINARY"))) is None


def test_iso_text_becomes_a_time_and_a_string_is_no_array() -> None:
    """#33 item 4: ISO 8601 text for TIMESTAMP/DATE is parsed in place; other text, and a string
    for an ARRAY, is a mismatch naming the column."""
    import datetime as dt

    check = checker((Column("at", "TIMESTAMP"), Column("day", "DATE"), Column("tags", "ARRAY<STRING>"),
                     Column("ats", "ARRAY<TIMESTAMP_NTZ>")))
    row = {"at": "2026-11-01T14:30:00+02:00", "day": "2026-11-01", "tags": ["vip"], "ats": ["2026-11-01T01:02:03Z"]}
    assert check(row) is None
    assert row["at"] == dt.datetime(2026, 11, 1, 12, 30, tzinfo=dt.timezone.utc)
    assert row["day"] == dt.date(2026, 11, 1) and row["ats"] == [dt.datetime(2026, 11, 1, 1, 2, 3)]
    assert check({"tags": "vip"}) == "field 'tags' is declared ARRAY<STRING> but got str 'vip'"
    assert check({"at": "soon"}) == "field 'at' is declared TIMESTAMP but got str 'soon'"
    assert check({"ats": ["2026-13-01"]}) == "field 'ats' is declared ARRAY<TIMESTAMP_NTZ> but got list ['2026-13-01']"
