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
