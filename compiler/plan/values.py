"""Checked conversion of option values as written (durations, counts, outcomes) to plan values.

Each function returns the value or None, appending a diagnostic that points at the text.
"""
from __future__ import annotations

import re

from dslc.compiler.diagnostics import Diagnostic, did_you_mean, error
from dslc.compiler.frontend import ast

_DURATION = re.compile(r"^([0-9]+)(ms|s|m|h|d)$", re.I)
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}   # d: STORE TTL 30d
# Units people write out of habit, and the unit meant.
_UNIT_WORDS = {"sec": "s", "secs": "s", "second": "s", "seconds": "s", "min": "m", "mins": "m",
               "minute": "m", "minutes": "m", "hr": "h", "hrs": "h", "hour": "h", "hours": "h",
               "msec": "ms", "millis": "ms", "milliseconds": "ms", "day": "d", "days": "d"}
_SMALLER = {"d": "h", "h": "m", "m": "s", "s": "ms"}


def duration(num: ast.Num, problems: list[Diagnostic]) -> float | None:
    """Seconds of a duration like `50ms`, `1s`, `5m`, `2h`, `30d`."""
    match = _DURATION.match(num.text)
    if not match:
        problems.append(error("E0301", num.span, hint=_duration_hint(num.text), text=num.text))
        return None
    return int(match.group(1)) * _UNIT_SECONDS[match.group(2).lower()]


def _duration_hint(text: str) -> str | None:
    """What to write instead of a bad duration: `30sec` → 30s, `1.5m` → 90s."""
    number = re.match(r"^[0-9.]*", text).group(0)
    unit = text[len(number):].lower()
    if not unit:
        return f"add a unit, e.g. {number or '1'}s"
    if unit in _UNIT_WORDS and number.isdigit():
        return f"write {number}{_UNIT_WORDS[unit]}"
    if unit in _SMALLER and number:
        try:
            smaller = float(number) * _UNIT_SECONDS[unit] / _UNIT_SECONDS[_SMALLER[unit]]
        except ValueError:
            return None
        if smaller.is_integer():
            return f"write {int(smaller)}{_SMALLER[unit]}"
        return "use a whole number of a smaller unit"
    return did_you_mean(unit, _UNIT_SECONDS)


def whole(num: ast.Num, option: str, problems: list[Diagnostic], minimum: int = 0) -> int | None:
    """A whole number of at least `minimum`."""
    if not num.text.isdigit() or int(num.text) < minimum:
        rule = f"a whole number >= {minimum}"
        problems.append(error("E0302", num.span, option=option, rule=rule, text=num.text))
        return None
    return int(num.text)


def positive(num: ast.Num, option: str, problems: list[Diagnostic]) -> float | None:
    """A number > 0 (e.g. RATE)."""
    try:
        value = float(num.text)
    except ValueError:
        value = -1.0
    if value <= 0:
        problems.append(error("E0302", num.span, option=option, rule="a number > 0", text=num.text))
        return None
    return value


def choice(word: ast.Name | ast.Word, allowed: tuple[str, ...], what: str,
           problems: list[Diagnostic]) -> str | None:
    """One of `allowed` (case-insensitive), upper-cased."""
    value = word.value.upper()
    if value not in allowed:
        hint = did_you_mean(word.value, allowed) or f"expected one of {', '.join(allowed)}"
        problems.append(error("E0309", word.span, hint=hint, text=word.value, what=what))
        return None
    return value


def literal_text(value: ast.Literal) -> str:
    """The value of an OPTIONS/SET literal as the string Spark receives."""
    if isinstance(value, ast.Str):
        return value.value
    if isinstance(value, ast.Num):
        return value.text
    return value.value
