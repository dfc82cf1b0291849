"""The row diff of `dslc test` (no Spark): matching as a multiset, per-row columns, order."""
from __future__ import annotations

from dslc.testing.diff import diff_rows


def test_equal_multisets_in_any_order_pass():
    rows = [{"a": 1, "b": "x"}, {"a": 1, "b": "x"}, {"a": 2, "b": "y"}]
    assert diff_rows("s", rows, list(reversed(rows))).ok


def test_duplicates_count():
    d = diff_rows("s", [{"a": 1}, {"a": 1}], [{"a": 1}])
    assert d.missing == [{"a": 1}] and not d.unexpected and not d.changed


def test_each_expected_row_is_compared_on_its_own_columns():
    actual = [{"id": 1, "x": "p", "y": 0.5}, {"id": 2, "x": "q", "y": None}]
    assert diff_rows("s", [{"id": 1, "y": 0.5}, {"id": 2, "x": "q"}], actual).ok


def test_missing_unexpected_and_changed_rows():
    d = diff_rows("sink out", [{"id": 1, "v": "a"}, {"id": 9, "v": "z"}], [{"id": 1, "v": "b"}, {"id": 5, "v": "q"}])
    assert d.changed == [({"id": 1, "v": "a"}, {"id": 1, "v": "b"})]
    assert d.missing == [{"id": 9, "v": "z"}] and d.unexpected == [{"id": 5, "v": "q"}]
    assert d.render() == [
        "sink out: 1 missing, 1 unexpected, 1 changed (2 expected, 2 actual)",
        "    - missing    {id: 9, v: 'z'}",
        "    + unexpected {id: 5, v: 'q'}",
        "    ~ changed    {id: 1} v: 'a' -> 'b'",
    ]


def test_floats_compare_within_a_relative_tolerance():
    assert diff_rows("s", [{"v": 0.1 + 0.2}], [{"v": 0.3}]).ok
    assert not diff_rows("s", [{"v": 0.3}], [{"v": 0.31}]).ok


def test_ordered_compares_position_by_position():
    rows = [{"a": 1}, {"a": 2}]
    assert diff_rows("s", rows, rows, ordered=True).ok
    d = diff_rows("s", rows, list(reversed(rows)), ordered=True)
    assert len(d.changed) == 2 and diff_rows("s", rows, list(reversed(rows))).ok


def test_long_diffs_are_cut_short():
    d = diff_rows("s", [], [{"a": i} for i in range(25)])
    lines = d.render()
    assert len(lines) == 12 and lines[-1] == "    ... and 15 more"
