"""What Spark needs to find a stored answer by a join, written beside the answer.

A warm rerun asks the store for every row's answer, and a row costs Python work (its request
key, a lookup, a decoded answer) whatever the store. Spark can do it in the JVM instead, with a
join of the rows on the columns the request is made of against the answers stored for them
(runtime/spark/stored_join.py). For that, an answer is stored with:

- `variant`: a digest of the operator's request with its columns left open (the URL template,
  the method, the prompt...) and of its RETURNS (names and types): answers stored by an
  operator whose request or RETURNS was different are not joined (`output` holds the RETURNS
  columns of its day: a column added since would be NULL, one retyped misread); the operator
  finds them in the store row by row, and checks them against today's RETURNS;
- `args`: the row's request columns, as a JSON object Spark's `from_json` reads back exactly;
- `output`: the RETURNS columns the answer makes, as JSON Spark reads back exactly.

Only what round-trips exactly is written (strings, integers, floating point numbers, booleans
and nulls, one result per answer); anything else (a miss, several results, a date, a value
that only the Python path's coercion or error handling knows what to do with) is not, and
such a row keeps going through the operator, which is the reference. So a joined row is the
row the operator would have made.
"""
from __future__ import annotations

import hashlib
import json
import math
from typing import Any, TypeVar

from dslc.runtime.calls.base import EnrichCall
from dslc.runtime.config import Enrich
from dslc.runtime.schema.type_names import FLOAT_BITS, INTEGER_BITS

#: RETURNS and request column types a join reproduces exactly, and the Python values that fit them.
_INTEGERS = INTEGER_BITS
_FLOATS = FLOAT_BITS.keys()
JOINABLE_TYPES = frozenset({"STRING", "BOOLEAN", *_INTEGERS, *_FLOATS})

T = TypeVar("T", bound=tuple)

_SENTINEL = "\x1fdslc-open-column\x1f"


def fits(value: Any, type_name: str) -> bool:
    """True when the Python path would carry `value` into a column of `type_name` unchanged."""
    if value is None:
        return True
    if type_name == "STRING":
        return type(value) is str
    if type_name == "BOOLEAN":
        return type(value) is bool
    bits = _INTEGERS.get(type_name)
    if bits is not None:
        return type(value) is int and -(1 << (bits - 1)) <= value < (1 << (bits - 1))
    if type_name in _FLOATS:
        return type(value) in (int, float) and math.isfinite(value) and (FLOAT_BITS[type_name] == 64 or abs(value) < 3.4e38)
    return False


def variant_of(call: EnrichCall) -> str | None:
    """A digest of the call's request with its request columns left open, and of its RETURNS;
    None when the call does not say which columns its request reads."""
    columns = call.request_columns()
    if not columns:
        return None
    key = call.request_key({c: f"{_SENTINEL}{c}" for c in columns})
    if key is None:
        return None
    returns = json.dumps([(c.name, c.type.upper()) for c in call.config.returns], separators=(",", ":"))
    return hashlib.sha256(f"{key}\n{returns}".encode("utf-8")).hexdigest()[:24]


def sound(entries: list[T], returns: tuple[tuple[str, str], ...]) -> list[T]:
    """The (args, output, ...) entries that are what `Joinable.entry` writes for these RETURNS (name,
    type): JSON objects, the output's values fitting their columns. A damaged entry (cut, edited)
    is left out: its row goes through the operator, which calls again if the answer is damaged too."""
    names = {name for name, _ in returns}
    kept = []
    for entry in entries:
        args, output = entry[0], entry[1]
        try:
            given, made = json.loads(args), json.loads(output)
        except ValueError:
            continue
        if (isinstance(given, dict) and isinstance(made, dict) and set(made) == names
                and all(fits(made[name], type_name) for name, type_name in returns)):
            kept.append(entry)
    return kept


class Joinable:
    """Writes `args` and `output` for one operator's answers (None when an answer cannot be joined)."""

    def __init__(self, config: Enrich, call: EnrichCall) -> None:
        self.columns = call.request_columns() or ()
        self.returns = tuple((c.name, c.type.upper()) for c in config.returns)
        self.variant = variant_of(call) if all(t in JOINABLE_TYPES for _, t in self.returns) else None

    def entry(self, row: dict[str, Any], value: Any, args_text: str | None = None) -> tuple[str, str] | None:
        """(args, output) of a row's answer, or None; `args_text`: the request columns as JSON
        already written the same way (a provider batch's line), not written again."""
        if isinstance(value, list) and len(value) == 1:
            value = value[0]
        if not isinstance(value, dict):
            return None    # a miss or several results: the operator decides what they make
        args = {}
        for column in self.columns:
            item = row.get(column)
            if item is None or type(item) not in (str, int, bool):
                return None
            args[column] = item
        output = {}
        for name, type_name in self.returns:
            item = value.get(name)
            if not fits(item, type_name):
                return None
            output[name] = float(item) if type_name in _FLOATS and item is not None else item
        return (args_text if args_text is not None else _compact(args), _compact(output))


_compact = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode     # one encoder, not one per call
