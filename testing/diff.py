"""A short row diff: missing rows, unexpected rows, and rows whose columns changed.

Rows are dicts of comparable values (see values.py). Only the columns the expected rows name
are compared, so a test states what it cares about. Without order, rows are matched as a
multiset: equal rows first, then each remaining expected row is paired with the remaining
actual row it shares most column values with (at least half of them): that pair is a changed
row, everything left over is missing or unexpected. With order, row i is compared with row i.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .values import same

Row = dict[str, Any]
MAX_SHOWN = 10


@dataclass
class RowDiff:
    """What differs between the expected and the actual rows of one output."""

    output: str
    expected: int
    actual: int
    missing: list[Row] = field(default_factory=list)
    unexpected: list[Row] = field(default_factory=list)
    changed: list[tuple[Row, Row]] = field(default_factory=list)   # (expected, actual)

    @property
    def ok(self) -> bool:
        return not (self.missing or self.unexpected or self.changed)

    def render(self) -> list[str]:
        """Lines of the diff, at most MAX_SHOWN rows of each kind."""
        parts = [f"{len(self.missing)} missing" if self.missing else "",
                 f"{len(self.unexpected)} unexpected" if self.unexpected else "",
                 f"{len(self.changed)} changed" if self.changed else ""]
        head = ", ".join(p for p in parts if p)
        lines = [f"{self.output}: {head} ({self.expected} expected, {self.actual} actual)"]
        lines += _shown("- missing   ", [_row(r) for r in self.missing])
        lines += _shown("+ unexpected", [_row(r) for r in self.unexpected])
        lines += _shown("~ changed   ", [_change(e, a) for e, a in self.changed])
        return lines


def _shown(label: str, texts: list[str]) -> list[str]:
    lines = [f"    {label} {t}" for t in texts[:MAX_SHOWN]]
    if len(texts) > MAX_SHOWN:
        lines.append(f"    ... and {len(texts) - MAX_SHOWN} more")
    return lines


def _value(v: Any) -> str:
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {_value(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    return "null" if v is None else repr(v) if isinstance(v, str) else str(v)


def _row(row: Row) -> str:
    return _value(row)


def _change(expected: Row, actual: Row) -> str:
    kept = [k for k in expected if same(expected[k], actual.get(k))]
    changed = [k for k in expected if not same(expected[k], actual.get(k))]
    where = ", ".join(f"{k}: {_value(expected[k])}" for k in kept[:3])
    what = "; ".join(f"{k}: {_value(expected[k])} -> {_value(actual.get(k))}" for k in changed)
    return f"{{{where}}} {what}" if where else what


def _shared(expected: Row, actual: Row) -> int:
    return sum(1 for k in expected if same(expected[k], actual.get(k)))


def _fits(expected: Row, actual: Row) -> bool:
    """The actual row has the expected row's values in the columns the expected row names."""
    return all(same(v, actual.get(k)) for k, v in expected.items())


def diff_rows(output: str, expected: list[Row], actual: list[Row], *, ordered: bool = False) -> RowDiff:
    """Compare `actual` with `expected`, each expected row on the columns it names (actual rows
    are shown with the columns any expected row names)."""
    columns = list(dict.fromkeys(k for row in expected for k in row))
    shown = [{k: row.get(k) for k in columns} for row in actual] if columns else [dict(r) for r in actual]
    result = RowDiff(output, len(expected), len(actual))
    if ordered:
        for e, a in zip(expected, shown):
            if not _fits(e, a):
                result.changed.append((e, a))
        result.missing = list(expected[len(shown):])
        result.unexpected = shown[len(expected):]
        return result
    left = list(shown)
    unmatched: list[Row] = []
    for e in expected:
        index = next((i for i, a in enumerate(left) if _fits(e, a)), None)
        if index is None:
            unmatched.append(e)
        else:
            left.pop(index)
    for e in unmatched:
        scores = [(_shared(e, a), -i) for i, a in enumerate(left)]
        best = max(scores, default=None)
        if best is not None and best[0] > 0 and best[0] * 2 >= len(e):
            result.changed.append((e, left.pop(-best[1])))
        else:
            result.missing.append(e)
    result.unexpected = left
    return result
