"""Checked conversion of option values as written (durations, counts, outcomes) to plan values.

Each function returns the value or None, appending a diagnostic that points at the text.
"""
from __future__ import annotations

import re

from . import ast
from .diagnostics import Diagnostic, did_you_mean, error

_DURATION = re.compile(r"^([0-9]+)(ms|s|m|h)$", re.I)
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def duration(num: ast.Num, problems: list[Diagnostic]) -> float | None:
    """Seconds of a duration like `50ms`, `1s`, `5m`, `2h`."""
    match = _DURATION.match(num.text)
    if not match:
        unit = re.sub(r"^[0-9.]+", "", num.text)
        hint = did_you_mean(unit, _UNIT_SECONDS) if unit else "add a unit: ms, s, m or h"
        problems.append(error("E0301", num.span, hint=hint, text=num.text))
        return None
    return int(match.group(1)) * _UNIT_SECONDS[match.group(2).lower()]


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
