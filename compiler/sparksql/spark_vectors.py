"""Spark 4.2's vector functions, as Spark's analyzer types and names them.

`vector_l2_distance`, `vector_cosine_similarity` and `vector_inner_product` take two ARRAY<FLOAT>
and give a FLOAT; `vector_norm(v [, degree])` a FLOAT, `vector_normalize(v [, degree])` an
ARRAY<FLOAT> (degree a FLOAT, 2.0 when left out, which Spark writes into the column's name);
`vector_avg` and `vector_sum` aggregate ARRAY<FLOAT> into ARRAY<FLOAT>. Spark accepts no other
element type (an ARRAY<DOUBLE> or `array(1.0, 2.0)`, DECIMAL, is DATATYPE_MISMATCH.
UNEXPECTED_INPUT_TYPE when the job starts): `argument_errors` reports it first. Seen on Spark 4.3
(`DESCRIBE FUNCTION EXTENDED`, `typeof`); the generated tables (spark_calls.py, spark_returns.py)
miss these because the registry's examples always give the degree and return arrays.
"""
from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from dslc.compiler.diagnostics import Diagnostic, error
from dslc.compiler.source import Span

VECTOR_RETURNS = {"vector_normalize": "ARRAY<FLOAT>", "vector_avg": "ARRAY<FLOAT>", "vector_sum": "ARRAY<FLOAT>"}
VECTOR_AGGREGATES = frozenset({"vector_avg", "vector_sum"})
VECTOR_DEFAULT_ARGUMENTS = {("vector_norm", 1): "2.0", ("vector_normalize", 1): "2.0"}

# name -> the type each argument must have, in order
_PARAMETERS = {
    "vector_l2_distance": ("ARRAY<FLOAT>", "ARRAY<FLOAT>"),
    "vector_cosine_similarity": ("ARRAY<FLOAT>", "ARRAY<FLOAT>"),
    "vector_inner_product": ("ARRAY<FLOAT>", "ARRAY<FLOAT>"),
    "vector_norm": ("ARRAY<FLOAT>", "FLOAT"),
    "vector_normalize": ("ARRAY<FLOAT>", "FLOAT"),
    "vector_avg": ("ARRAY<FLOAT>",),
    "vector_sum": ("ARRAY<FLOAT>",),
}
_ORDINALS = ("first", "second")


def _spelled(data_type: exp.DataType | None) -> str | None:
    """Spark's spelling of a known type (None when unknown)."""
    if data_type is None or data_type.is_type(exp.DataType.Type.UNKNOWN):
        return None
    if data_type.is_type(exp.DataType.Type.NULL):
        return "VOID"
    return data_type.sql(dialect="spark").upper().replace(" ", "")


def argument_errors(typed: exp.Expression, where: Callable[[exp.Expression], Span]) -> list[Diagnostic]:
    """E0212 for every vector function argument of a known type Spark refuses."""
    found = []
    for call in typed.find_all(exp.Anonymous):
        wanted = _PARAMETERS.get(call.name.lower())
        for position, (argument, expected) in enumerate(zip(call.expressions, wanted or ())):
            actual = _spelled(argument.type)
            if actual is None or actual == expected:
                continue
            found.append(error(
                "E0212", where(argument), condition="DATATYPE_MISMATCH.UNEXPECTED_INPUT_TYPE",
                detail=f"the {_ORDINALS[position]} argument of {call.name.lower()} must be {expected}, not {actual}",
                hint=f"Spark's vector functions take FLOAT elements only: CAST(... AS {expected})"
                     + (" or a FLOAT literal such as 1.0F" if expected == "FLOAT" else "")))
    return found
