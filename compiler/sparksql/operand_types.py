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
_DATETIME = {"date", "timestamp"}
_NO_ARITHMETIC = {"boolean", "binary", "array", "map", "struct"}
_COMPLEX = {"array", "map", "struct"}
# Comparisons Spark refuses whatever the values (ANSI coercion has no rule between these kinds).
_INCOMPARABLE = {frozenset(p) for p in (("numeric", "boolean"), ("numeric", "date"), ("numeric", "timestamp"),
                                        ("boolean", "date"), ("boolean", "timestamp"), ("binary", "numeric"),
                                        ("binary", "boolean"), ("binary", "date"), ("binary", "timestamp"),
                                        ("interval", "numeric"), ("interval", "string"), ("interval", "boolean"),
                                        ("interval", "date"), ("interval", "timestamp"), ("interval", "binary"))}


def kind(data_type: exp.DataType | None) -> str | None:
    """The kind of a known type (numeric, string, ..., array, interval), None when unknown or NULL."""
    if data_type is None:
        return None
    if data_type.this == T.INTERVAL or isinstance(data_type.this, exp.Interval):
        return "interval"
    return next((name for name, types in _KINDS.items() if data_type.this in types), None)


def _arithmetic_refused(node: exp.Expression, lk: str, rk: str) -> bool:
    """Arithmetic Spark refuses whatever the values: on booleans, binaries and complex types; a
    date or timestamp times, by or modulo anything, a timestamp plus or minus a number; a number
    plus, minus or by an interval, anything but an interval divided by an interval."""
    if lk in _NO_ARITHMETIC or rk in _NO_ARITHMETIC:
        return True
    kinds = {lk, rk}
    if isinstance(node, (exp.Mul, exp.Div, exp.Mod, exp.IntDiv)) and kinds & _DATETIME:
        return True
    if isinstance(node, (exp.Add, exp.Sub)) and "timestamp" in kinds and "numeric" in kinds:
        return True
    if isinstance(node, (exp.Add, exp.Sub)) and kinds == {"numeric", "interval"}:
        return True
    return isinstance(node, (exp.Div, exp.Mod, exp.IntDiv)) and rk == "interval" and lk != "interval"


def _branch_types(node: exp.Expression) -> list[exp.Expression]:
    """The values Spark must bring to one type: IF's and CASE's results, IN's value and list."""
    if isinstance(node, exp.If):
        return [v for v in (node.args.get("true"), node.args.get("false")) if v is not None]
    if isinstance(node, exp.Case):
        return [i.args["true"] for i in node.args.get("ifs") or []] + \
            ([node.args["default"]] if node.args.get("default") is not None else [])
    if isinstance(node, exp.In) and not node.args.get("query"):
        return [node.this] + list(node.expressions)
    return []


def operand_errors(typed: exp.Expression, where: Callable[[exp.Expression], Span]) -> list[Diagnostic]:
    """E0212 for every binary operator of an annotated query whose operand types Spark refuses."""
    found = []
    for node in typed.walk():
        branches = [kind(b.type) for b in _branch_types(node)]
        clash = next(((a, b) for i, a in enumerate(branches) for b in branches[i + 1:]
                      if a and b and frozenset((a, b)) in _INCOMPARABLE), None)
        if clash is not None:
            found.append(error("E0212", where(node), condition="DATATYPE_MISMATCH.DATA_DIFF_TYPES",
                               detail=f"its values have types of no common type ({clash[0]} and {clash[1]})",
                               hint="cast one side; dslc's fast check found this, Spark's analyzer refuses "
                                    "it when the job starts"))
            continue
        op = _ARITHMETIC.get(type(node)) or _COMPARISON.get(type(node))
        if op is None or node.left is None or node.right is None:
            continue
        left, right = node.left.type, node.right.type
        lk, rk = kind(left), kind(right)
        if lk is None or rk is None:
            continue
        if type(node) in _ARITHMETIC:
            if not _arithmetic_refused(node, lk, rk):
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
