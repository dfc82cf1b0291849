"""Operand types Spark's analyzer refuses, found by the fast check without a JVM.

Spark (ANSI mode, its default) refuses arithmetic on booleans, binaries, arrays, maps and structs,
and comparisons between kinds it will not coerce (an ARRAY<STRING> with a STRING, a number with a
BOOLEAN or a DATE), with DATATYPE_MISMATCH.BINARY_OP_DIFF_TYPES or BINARY_OP_WRONG_TYPE when the
job starts. Where the fast check knows both operand types it reports the same condition (E0212, as
`dslc check --spark` does), so a user need not know which check finds what. Only the cases whose
answer does not depend on configuration are decided here; everything else stays with Spark.
"""
from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from dslc.compiler.diagnostics import Diagnostic, error
from dslc.compiler.source import Span

T = exp.DataType.Type
_ARITHMETIC = {exp.Add: "+", exp.Sub: "-", exp.Mul: "*", exp.Div: "/", exp.Mod: "%", exp.IntDiv: "div"}
_COMPARISON = {exp.EQ: "=", exp.NEQ: "!=", exp.GT: ">", exp.GTE: ">=", exp.LT: "<", exp.LTE: "<=",
               exp.NullSafeEQ: "<=>"}
_KINDS = {
    "numeric": (T.TINYINT, T.SMALLINT, T.INT, T.BIGINT, T.DECIMAL, T.FLOAT, T.DOUBLE),
    "string": (T.VARCHAR, T.CHAR, T.TEXT),
    "boolean": (T.BOOLEAN,), "binary": (T.BINARY, T.VARBINARY), "date": (T.DATE,),
    "timestamp": (T.TIMESTAMP, T.TIMESTAMPNTZ, T.TIMESTAMPLTZ, T.TIMESTAMPTZ),
    "array": (T.ARRAY,), "map": (T.MAP,), "struct": (T.STRUCT,),
}
_NO_ARITHMETIC = {"boolean", "binary", "array", "map", "struct"}
_COMPLEX = {"array", "map", "struct"}
# Comparisons Spark refuses whatever the values (ANSI coercion has no rule between these kinds).
_INCOMPARABLE = {frozenset(p) for p in (("numeric", "boolean"), ("numeric", "date"), ("numeric", "timestamp"),
                                        ("boolean", "date"), ("boolean", "timestamp"), ("binary", "numeric"),
                                        ("binary", "boolean"), ("binary", "date"), ("binary", "timestamp"))}


def kind(data_type: exp.DataType | None) -> str | None:
    """The kind of a known type (numeric, string, ..., array), None when unknown or NULL."""
    if data_type is None:
        return None
    return next((name for name, types in _KINDS.items() if data_type.this in types), None)


def operand_errors(typed: exp.Expression, where: Callable[[exp.Expression], Span]) -> list[Diagnostic]:
    """E0212 for every binary operator of an annotated query whose operand types Spark refuses."""
    found = []
    for node in typed.walk():
        op = _ARITHMETIC.get(type(node)) or _COMPARISON.get(type(node))
        if op is None or node.left is None or node.right is None:
            continue
        left, right = node.left.type, node.right.type
        lk, rk = kind(left), kind(right)
        if lk is None or rk is None:
            continue
        if type(node) in _ARITHMETIC:
            if lk not in _NO_ARITHMETIC and rk not in _NO_ARITHMETIC:
                continue
            condition = "BINARY_OP_WRONG_TYPE" if left == right else "BINARY_OP_DIFF_TYPES"
        else:
            refused = (lk in _COMPLEX or rk in _COMPLEX) and lk != rk or frozenset((lk, rk)) in _INCOMPARABLE
            if not refused:
                continue
            condition = "BINARY_OP_DIFF_TYPES"
        lt, rt = (t.sql(dialect="spark") for t in (left, right))
        detail = (f"the operator '{op}' does not take {lt}" if condition == "BINARY_OP_WRONG_TYPE"
                  else f"the operands of '{op}' have incompatible types ({lt} and {rt})")
        found.append(error("E0212", where(node), condition=f"DATATYPE_MISMATCH.{condition}", detail=detail,
                           hint="dslc's fast check found this; Spark's analyzer refuses it when the job starts"))
    return found
