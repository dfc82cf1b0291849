"""Argument counts of Spark's built-in functions, checked by the fast check without a JVM.

Spark's analyzer refuses a call with a number of arguments its function does not take
(WRONG_NUM_ARGS) when the job starts; the counts each function accepts are read from Spark's
registry by tools/make_spark_calls.py (spark_calls.ARITIES), so the fast check reports the same
condition at the call (E0212, as `dslc check --spark` does). Calls written with SQL syntax inside
their parentheses (`substring(x FROM 2)`, `trim(BOTH 'a' FROM s)`, `position('a' IN s)`) are left
to Spark: their arguments are not separated by commas.
"""
from __future__ import annotations

import re

from dslc.compiler.diagnostics import Diagnostic, error
from dslc.compiler.source import Span
from dslc.compiler.sparksql.spark_calls import ARITIES, MAX_PROBED

_SYNTAX_WORDS = re.compile(r"\b(FROM|IN|PLACING|FOR|AS|BOTH|LEADING|TRAILING|DISTINCT|ALL|ORDER|USING)\b", re.I)


def written_arguments(text: str, opening: int) -> list[str] | None:
    """The top-level arguments of the call whose '(' is at `opening`, as written; None when the
    parentheses do not close."""
    parts, depth, quote, start = [], 0, None, opening + 1
    for i in range(opening + 1, len(text)):
        ch = text[i]
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"`":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            if depth == 0:
                parts.append(text[start:i])
                return [] if len(parts) == 1 and not parts[0].strip() else parts
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    return None


def _accepted(counts: tuple[int, ...]) -> str:
    if counts[-1] == MAX_PROBED:
        known = [c for c in counts if c < MAX_PROBED]
        return f"{known[0] if known else MAX_PROBED} or more"
    if len(counts) == 1:
        return str(counts[0])
    if counts == tuple(range(counts[0], counts[-1] + 1)):
        return f"{counts[0]} to {counts[-1]}" if len(counts) > 2 else f"{counts[0]} or {counts[1]}"
    return ", ".join(map(str, counts[:-1])) + f" or {counts[-1]}"


def arity_error(name: str, text: str, opening: int, where: Span) -> Diagnostic | None:
    """E0212 (WRONG_NUM_ARGS) when a call of `name` has a number of arguments Spark refuses."""
    counts = ARITIES.get(name.lower())
    args = written_arguments(text, opening)
    if not counts or args is None or any(_SYNTAX_WORDS.search(_unquoted(a)) for a in args):
        return None
    given = len(args)
    if given in counts or (counts[-1] == MAX_PROBED and given >= MAX_PROBED):
        return None
    plural = "argument" if _accepted(counts) == "1" else "arguments"
    return error("E0212", where, condition="WRONG_NUM_ARGS",
                 detail=f"`{name.lower()}` takes {_accepted(counts)} {plural}, this call gives {given}",
                 hint="dslc's fast check found this (argument counts from Spark's function registry); "
                      "Spark's analyzer refuses it when the job starts")


def _unquoted(text: str) -> str:
    return re.sub(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|`[^`]*`", "''", text)
