"""RETURNS as a JSON schema for structured output (MODEL), and whether a parsed answer fits it.

A model is asked for exactly the RETURNS columns: an object whose properties are the columns,
every one required, no others (`additionalProperties: false`), as OpenAI's strict structured
outputs demand. Types a strict schema cannot hold (dates, timestamps, maps, binary, intervals)
are refused by `dslc check` through `unexpressible`, with a way out.

The compiler imports this module, so it imports nothing else of the runtime but the type names.
"""
from __future__ import annotations

import functools
import re
from typing import Any

from .type_names import BOOLEANS, DECIMALS, FLOAT_BITS, INTEGER_BITS, STRINGS, type_arguments

_NUMBERS = FLOAT_BITS.keys() | DECIMALS
_WHY = {
    "DATE": "ask for a STRING and convert it after the ENRICH: to_date(col)",
    "TIMESTAMP": "ask for a STRING and convert it after the ENRICH: to_timestamp(col)",
    "TIMESTAMP_NTZ": "ask for a STRING and convert it after the ENRICH: to_timestamp_ntz(col)",
    "TIMESTAMP_LTZ": "ask for a STRING and convert it after the ENRICH: to_timestamp_ltz(col)",
    "MAP": "a strict schema lists every key: use ARRAY<STRUCT<key: STRING, value: ...>> or a STRUCT",
    "BINARY": "ask for a STRING (e.g. base64) and convert it after the ENRICH: unbase64(col)",
}


class Unexpressible(ValueError):
    """A Spark type that a strict JSON schema cannot hold; the message says what to do instead."""


_FIELD = re.compile(r"^(`(?:[^`]|``)+`|[A-Za-z_][A-Za-z0-9_]*)\s*:?\s*(.+)$", re.S)


@functools.lru_cache(maxsize=256)
def type_schema(spark_type: str) -> dict[str, Any]:
    """The JSON schema of one Spark SQL type (canonical spelling, as RETURNS holds it)."""
    text = spark_type.strip()
    base = re.match(r"[A-Za-z_]+", text)
    word = base.group(0).upper() if base else text.upper()
    if word in STRINGS:
        return {"type": "string"}
    if word in INTEGER_BITS:
        return {"type": "integer"}
    if word in _NUMBERS:
        return {"type": "number"}
    if word in BOOLEANS:
        return {"type": "boolean"}
    if word == "ARRAY":
        inner = text[text.index("<") + 1:text.rindex(">")]
        return {"type": "array", "items": type_schema(inner)}
    if word == "STRUCT":
        inner = text[text.index("<") + 1:text.rindex(">")]
        properties = {}
        for part in filter(None, type_arguments(inner)):
            match = _FIELD.match(part)
            if match is None:
                raise Unexpressible(f"cannot read the STRUCT field {part!r}")
            name = match.group(1)
            if name.startswith("`"):
                name = name[1:-1].replace("``", "`")
            properties[name] = type_schema(match.group(2))
        return _object(properties)
    raise Unexpressible(_WHY.get(word, f"{word} has no JSON form a model can be held to; ask for a STRING"))


def _object(properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties),
            "additionalProperties": False}


def unexpressible(spark_type: str) -> str | None:
    """Why a RETURNS type cannot be asked of a model (None: it can)."""
    try:
        type_schema(spark_type)
    except Unexpressible as exc:
        return str(exc)
    return None


def returns_schema(columns: tuple, limits: tuple = ()) -> dict[str, Any]:
    """The strict JSON schema of a RETURNS clause (columns with `name` and `type`), with the
    `limits` (column, keyword, value) an EXPECT on the answers asks of them (`enum`, `minimum`,
    `maximum`, ...: compiler/plan/expect_model.py). `mismatch` does not judge them: an answer
    outside them still fits RETURNS, and the EXPECT decides what becomes of it."""
    properties = {c.name: type_schema(c.type) for c in columns}
    for column, keyword, value in limits:
        if column in properties:
            properties[column] = {**properties[column], keyword: list(value) if isinstance(value, tuple) else value}
    return _object(properties)


def mismatch(value: Any, schema: dict[str, Any], where: str = "answer") -> str | None:
    """Why a parsed JSON value does not fit a schema built here (None: it fits)."""
    kind = schema.get("type")
    if kind == "object":
        if not isinstance(value, dict):
            return f"{where} is {_shown(value)}, expected an object"
        missing = [k for k in schema["properties"] if k not in value]
        if missing:
            return f"{where} has no {', '.join(repr(m) for m in missing)}"
        extra = [k for k in value if k not in schema["properties"]]
        if extra:
            return f"{where} has {', '.join(repr(e) for e in extra)}, which RETURNS does not declare"
        for key, prop in schema["properties"].items():
            problem = mismatch(value[key], prop, f"{where}.{key}" if where != "answer" else f"field '{key}'")
            if problem:
                return problem
        return None
    if value is None:
        return None         # a null column: the model found nothing
    if kind == "array":
        if not isinstance(value, list):
            return f"{where} is {_shown(value)}, expected an array"
        for i, item in enumerate(value):
            problem = mismatch(item, schema["items"], f"{where}[{i}]")
            if problem:
                return problem
        return None
    return None if _FITS[kind](value) else \
        f"{where} is {_shown(value)}, expected {'an' if kind == 'integer' else 'a'} {kind}"


# a scalar JSON type's test, made once (mismatch runs for every column of every answer)
_FITS = {"string": lambda v: isinstance(v, str),
         "integer": lambda v: isinstance(v, int) and not isinstance(v, bool) or isinstance(v, float) and v.is_integer(),
         "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
         "boolean": lambda v: isinstance(v, bool)}


def _shown(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 60 else text[:57] + '...'}"
