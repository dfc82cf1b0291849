"""The spellings of Spark SQL's simple types, by family: one table for the Arrow types of a
chain's batches (arrow.py), the RETURNS check (results.py), a model's JSON schema
(json_schema.py) and what a warm rerun's join reproduces (wrappers/joinable.py).

The compiler imports modules that import this one, so it imports nothing."""
from __future__ import annotations

#: bits of each integer type
INTEGER_BITS: dict[str, int] = {"TINYINT": 8, "BYTE": 8, "SMALLINT": 16, "SHORT": 16, "INT": 32, "INTEGER": 32,
                                "BIGINT": 64, "LONG": 64}
#: bits of each binary floating point type
FLOAT_BITS: dict[str, int] = {"FLOAT": 32, "REAL": 32, "DOUBLE": 64}
DECIMALS = frozenset({"DECIMAL", "DEC", "NUMERIC"})
STRINGS = frozenset({"STRING", "VARCHAR", "CHAR", "CHARACTER"})
BOOLEANS = frozenset({"BOOLEAN", "BOOL"})


def type_arguments(text: str) -> list[str]:
    """The comma-separated parts of a type's arguments (`a: INT, b: MAP<STRING, INT>`), stripped,
    with the commas nested in <...> or (...) left inside their part."""
    parts, depth, start = [], 0, 0
    for index, char in enumerate(text):
        if char in "<(":
            depth += 1
        elif char in ">)":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(text[start:index])
            start = index + 1
    parts.append(text[start:])
    return [part.strip() for part in parts]
