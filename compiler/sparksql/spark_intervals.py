"""Spark's ANSI interval literals: their value, their type and the way Spark prints them.

Spark folds an interval literal into one value of a year-month or day-time interval type as it
parses it (`INTERVAL 1 YEAR 2 MONTHS` is `INTERVAL '1-2' YEAR TO MONTH`, `INTERVAL 3 WEEK` is
`INTERVAL '21' DAY`, `INTERVAL -'-1' YEAR` is `INTERVAL '1' YEAR`) and names a column by that value
in its canonical spelling (IntervalUtils.toYearMonthIntervalString / toDayTimeIntervalString,
ANSI style: `INTERVAL '1 02:03:04.001' DAY TO SECOND`, `INTERVAL '02' SECOND`). sqlglot keeps the
literal as written, a multi-unit one as a sum of single-unit intervals; this module computes what
Spark makes of it. A literal that mixes year-month and day-time units (a legacy CalendarInterval)
is left alone (None).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import ROUND_DOWN, Decimal, InvalidOperation

from sqlglot import exp

from dslc.compiler.sparksql.spark_nodes import MULTI_UNIT

MICROS = {"DAY": 86_400_000_000, "HOUR": 3_600_000_000, "MINUTE": 60_000_000, "SECOND": 1_000_000}
_YEAR_MONTH = ("YEAR", "MONTH")
_DAY_TIME = ("DAY", "HOUR", "MINUTE", "SECOND")
_UNIT = {"YEAR": "YEAR", "YEARS": "YEAR", "MONTH": "MONTH", "MONTHS": "MONTH", "WEEK": "WEEK", "WEEKS": "WEEK",
         "DAY": "DAY", "DAYS": "DAY", "HOUR": "HOUR", "HOURS": "HOUR", "MINUTE": "MINUTE", "MINUTES": "MINUTE",
         "SECOND": "SECOND", "SECONDS": "SECOND", "MILLISECOND": "MILLISECOND", "MILLISECONDS": "MILLISECOND",
         "MICROSECOND": "MICROSECOND", "MICROSECONDS": "MICROSECOND"}
_PAIR = re.compile(r"([+-]?\s*\d+(?:\.\d*)?)\s*([A-Za-z]+)")


@dataclass(frozen=True)
class IntervalValue:
    """A year-month (`months`) or day-time (`micros`) interval with its type's start and end field."""

    start: str
    end: str
    amount: int             # months or microseconds

    @property
    def year_month(self) -> bool:
        return self.start in _YEAR_MONTH

    def type_text(self) -> str:
        return f"INTERVAL {self.start}" if self.start == self.end else f"INTERVAL {self.start} TO {self.end}"

    def sql(self) -> str:
        """The literal as Spark prints it in a column name."""
        fields = self.start if self.start == self.end else f"{self.start} TO {self.end}"
        return f"INTERVAL '{self._year_month() if self.year_month else self._day_time()}' {fields}"

    def _year_month(self) -> str:
        sign = "-" if self.amount < 0 else ""
        months = abs(self.amount)
        if self.start == "MONTH":
            return f"{sign}{months}"
        if self.end == "YEAR":
            return f"{sign}{months // 12}"
        return f"{sign}{months // 12}-{months % 12}"

    def _day_time(self) -> str:
        sign = "-" if self.amount < 0 else ""
        rest = abs(self.amount)
        order = _DAY_TIME[_DAY_TIME.index(self.start):_DAY_TIME.index(self.end) + 1]
        if order[0] == "SECOND":
            return sign + _seconds(rest)
        head, rest = divmod(rest, MICROS[order[0]])
        tail = []
        for field in order[1:]:
            if field == "SECOND":
                tail.append(_seconds(rest))
            else:
                whole, rest = divmod(rest, MICROS[field])
                tail.append(f"{whole:02d}")
        if order[0] == "DAY":
            return sign + str(head) + (" " + ":".join(tail) if tail else "")
        return sign + ":".join([f"{head:02d}"] + tail)


def _seconds(micros: int) -> str:
    text = format(Decimal(micros).scaleb(-6).normalize(), "f")
    return ("0" if micros < 10 * MICROS["SECOND"] else "") + text


def _number(node: exp.Expression | None) -> Decimal | None:
    """The signed number of an interval part: `1`, `-1`, `'-1'`, `-'-1'`."""
    sign = 1
    while isinstance(node, (exp.Neg, exp.Paren)):
        sign = -sign if isinstance(node, exp.Neg) else sign
        node = node.this
    if not isinstance(node, exp.Literal):
        return None
    try:
        return sign * Decimal(node.this.strip())
    except InvalidOperation:
        return None


def _parts_value(parts: list[tuple[Decimal, str]]) -> IntervalValue | None:
    """One value of (amount, unit) pairs (`1 YEAR 2 MONTHS`, `2 weeks 2 days 1 hour`)."""
    units = []
    months, micros = 0, Decimal(0)
    for amount, unit in parts:
        unit = _UNIT.get(unit.upper())
        if unit is None:
            return None
        if unit in _YEAR_MONTH:
            if amount != amount.to_integral_value():
                return None
            months += int(amount) * (12 if unit == "YEAR" else 1)
            units.append(unit)
            continue
        scale = {"WEEK": 7 * MICROS["DAY"], "MILLISECOND": 1000, "MICROSECOND": 1}.get(unit) or MICROS[unit]
        micros += amount * scale
        units.append({"WEEK": "DAY", "MILLISECOND": "SECOND", "MICROSECOND": "SECOND"}.get(unit, unit))
    if not units or (set(units) & set(_YEAR_MONTH) and set(units) & set(_DAY_TIME)):
        return None
    order = _YEAR_MONTH if units[0] in _YEAR_MONTH else _DAY_TIME
    ranked = sorted(set(units), key=order.index)
    amount = months if order is _YEAR_MONTH else int(micros.to_integral_value(rounding=ROUND_DOWN))
    return IntervalValue(ranked[0], ranked[-1], amount)


_SPAN_FORMS = {
    ("YEAR", "MONTH"): r"(\d+)-(\d+)",
    ("DAY", "HOUR"): r"(\d+) (\d+)", ("DAY", "MINUTE"): r"(\d+) (\d+):(\d+)",
    ("DAY", "SECOND"): r"(\d+) (\d+):(\d+):(\d+(?:\.\d*)?)",
    ("HOUR", "MINUTE"): r"(\d+):(\d+)", ("HOUR", "SECOND"): r"(\d+):(\d+):(\d+(?:\.\d*)?)",
    ("MINUTE", "SECOND"): r"(\d+):(\d+(?:\.\d*)?)",
}


def literal_value(node: exp.Interval) -> IntervalValue | None:
    """The value of one sqlglot Interval, None when it is not an ANSI interval Spark folds."""
    unit = node.args.get("unit")
    value = node.this
    if isinstance(unit, exp.IntervalSpan):
        start, end = unit.this.name.upper(), unit.expression.name.upper()
        return _span_value(value, start, end)
    if unit is None:
        text = value.this if isinstance(value, exp.Literal) and value.is_string else None
        if text is None:
            return None
        text = re.sub(r"^\s*interval\s+", "", text, flags=re.I)
        pairs = _PAIR.findall(text)
        if not pairs or _PAIR.sub("", text).strip():
            return None
        return _parts_value([(Decimal(n.replace(" ", "")), u) for n, u in pairs])
    number = _number(value)
    if number is None:
        return None
    return _parts_value([(number, unit.name)])


def _span_value(value: exp.Expression | None, start: str, end: str) -> IntervalValue | None:
    sign = 1
    while isinstance(value, exp.Neg):
        sign, value = -sign, value.this
    if not isinstance(value, exp.Literal) or (start, end) not in _SPAN_FORMS:
        return None
    text = value.this.strip()
    if text[:1] in "+-":
        sign, text = (-sign if text[0] == "-" else sign), text[1:]
    match = re.fullmatch(_SPAN_FORMS[(start, end)], text)
    if match is None:
        return None
    numbers = [Decimal(g) for g in match.groups()]
    if start == "YEAR":
        return IntervalValue(start, end, sign * int(numbers[0] * 12 + numbers[1]))
    fields = _DAY_TIME[_DAY_TIME.index(start):_DAY_TIME.index(end) + 1]
    micros = sum(n * MICROS[f] for n, f in zip(numbers, fields))
    return IntervalValue(start, end, sign * int(micros.to_integral_value(rounding=ROUND_DOWN)))


def multi_unit_parts(node: exp.Expression) -> list[exp.Interval] | None:
    """The intervals of `INTERVAL 1 YEAR 2 MONTHS`, which sqlglot reads as a sum of intervals
    (spark_dialect.py marks the sums that come from one literal)."""
    if not isinstance(node, exp.Add) or not node.meta.get(MULTI_UNIT):
        return None
    parts: list[exp.Interval] = []

    def collect(n: exp.Expression) -> bool:
        if isinstance(n, exp.Interval):
            parts.append(n)
            return True
        return isinstance(n, exp.Add) and collect(n.this) and collect(n.expression)

    return parts if collect(node) else None


def multi_unit_value(parts: list[exp.Interval]) -> IntervalValue | None:
    pairs = []
    for part in parts:
        unit = part.args.get("unit")
        number = _number(part.this)
        if unit is None or isinstance(unit, exp.IntervalSpan) or number is None:
            return None
        pairs.append((number, unit.name))
    return _parts_value(pairs)
