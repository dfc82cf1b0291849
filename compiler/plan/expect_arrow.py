"""A constraint's condition as pyarrow.compute calls, so that a chain judges it once per batch of
rows (runtime/core/expect_batch.py) instead of once per row, with the meaning its Python form
(expect_python.py) and Spark give it.

It covers a part of what has a Python form: columns of numbers, strings and booleans, their
literals, comparisons, IN lists, BETWEEN, IS [NOT] NULL, AND / OR / NOT (Kleene's logic is SQL's
three values), +, - and * (floating point in doubles; integers in 64 bits and decimals checked, so
that an overflow of those sends the batch to the Python form instead of wrapping; an INT or SMALLINT
sum beyond its own type is computed in 64 bits, as the Python form computes it), length, trim, abs of a floating
or decimal value, coalesce, isnull and LIKE with a constant pattern without backslashes. Spark's
NaN (equal to itself, above every number) is kept. lower and upper are left to the Python form
(Arrow maps case one code point at a time: `ß` stays `ß`, where Spark and Python write `SS`), and
so are dates and timestamps; a constraint without an Arrow form is judged per row
(`Translation.why_not` says why, for `dslc explain`).

The expression reads a column as `b('name', 'SPARK TYPE')` (an Array built from the batch's rows)
and may call `pc`, `pa`, `Decimal` and the runtime's `_fcmp` and `_in`.
"""
from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from dslc.compiler.plan.expect_python import FLOATING, Translation, _arithmetic_type, _folded, _kind

_COMPARISONS = {exp.EQ: "equal", exp.NEQ: "not_equal", exp.GT: "greater", exp.GTE: "greater_equal",
                exp.LT: "less", exp.LTE: "less_equal"}
_MIRRORED = {"greater": "less", "less": "greater", "greater_equal": "less_equal", "less_equal": "greater_equal"}
_ARITHMETIC = {exp.Add: "add", exp.Sub: "subtract", exp.Mul: "multiply"}
_TRIMS = {"trim": "utf8_trim", "ltrim": "utf8_ltrim", "rtrim": "utf8_rtrim"}
_LENGTHS = frozenset({"length", "char_length", "character_length", "len"})


class _NoForm(Exception):
    """The condition holds something without an exact Arrow form (the message says what)."""


@dataclass(frozen=True, slots=True)
class _Value:
    code: str       # a Python expression: an Array for a column's values, a literal for a constant
    kind: str       # 'number', 'string', 'boolean', or a temporal type
    spark: str      # the Spark type ('DECIMAL', 'DOUBLE', 'INT', ... for number literals too)
    const: bool = False
    text: str = ""  # a number literal as written (its exact value)


def translate(condition: exp.Expression, columns: dict[str, tuple[str, str]]) -> Translation:
    """`condition` (a checked boolean condition with a Python form) over `columns` (lower-case name
    → (spelling, Spark type)) as pyarrow.compute calls giving a BooleanArray (null: SQL's NULL)."""
    try:
        value = _Translator(columns).value(condition)
    except _NoForm as exc:
        return Translation(None, str(exc))
    if value.kind != "boolean" or value.const:
        return Translation(None, "the condition is not a boolean of the row's columns")
    return Translation(value.code)


def _no(node: exp.Expression, why: str = "has no Arrow form") -> _NoForm:
    return _NoForm(f"{node.sql(dialect='spark')} {why}")


class _Translator:
    def __init__(self, columns: dict[str, tuple[str, str]]):
        self.columns = columns

    def value(self, node: exp.Expression) -> _Value:
        if isinstance(node, exp.Paren):
            return self.value(node.this)
        handler = _HANDLERS.get(type(node))
        if handler is not None:
            return handler(self, node)
        if isinstance(node, tuple(_COMPARISONS)):
            return self.compare(node, _COMPARISONS[type(node)], self.value(node.this), self.value(node.expression))
        if isinstance(node, tuple(_ARITHMETIC)):
            return self.arithmetic(node)
        if isinstance(node, exp.Func):
            return self.function(node)
        raise _no(node)

    # ---- leaves
    def column(self, node: exp.Column) -> _Value:
        found = self.columns.get(node.name.lower())
        if found is None or node.table:
            raise _no(node, "is not one of the stream's columns")
        spelling, spark_type = found
        kind = _kind(spark_type)
        if kind not in ("number", "string", "boolean"):
            raise _no(node, f"is a {kind}: it is judged per row")
        return _Value(f"b({spelling!r}, {spark_type.upper()!r})", kind, spark_type.upper())

    def literal(self, node: exp.Literal) -> _Value:
        if node.is_string:
            return _Value(repr(node.this), "string", "STRING", const=True)
        text = node.this
        try:
            int(text)
        except ValueError:
            return _Value(text, "number", "DOUBLE" if "e" in text.lower() else "DECIMAL", const=True, text=text)
        return _Value(text, "number", "INT", const=True, text=text)

    def boolean(self, node: exp.Boolean) -> _Value:
        return _Value("True" if node.this else "False", "boolean", "BOOLEAN", const=True)

    def null(self, node: exp.Null) -> _Value:
        raise _no(node, "(a NULL literal) is judged per row")

    # ---- constants in the type of what they meet
    @staticmethod
    def scalar(value: _Value, other: _Value) -> str:
        """A constant as the value it is compared with or computed in: a float beside a floating
        column, a Decimal beside a DECIMAL one or for a decimal literal (exact), else itself."""
        if value.kind != "number":
            return value.code
        if other.spark in FLOATING or value.spark in FLOATING:
            return repr(float(value.text))
        if other.spark.startswith("DECIMAL") or value.spark.startswith("DECIMAL"):
            return f"Decimal({value.text!r})"
        return value.text

    @staticmethod
    def as_double(value: _Value) -> str:
        """A column's values as Spark computes them beside a floating value: doubles."""
        if value.spark in FLOATING:
            return value.code
        return f"pc.cast({value.code}, pa.float64())"

    # ---- operators
    def compare(self, node: exp.Expression, op: str, left: _Value, right: _Value) -> _Value:
        if left.kind != right.kind:
            raise _no(node, f"compares a {left.kind} with a {right.kind}")
        if left.const and right.const:
            raise _no(node, "compares two constants")
        if left.const:      # 5 < x  =>  x > 5
            left, right, op = right, left, _MIRRORED.get(op, op)
        floating = left.spark in FLOATING or right.spark in FLOATING
        if right.const:
            test = f"pc.{op}({self.as_double(left) if floating else left.code}, {self.scalar(right, left)})"
            if floating and op in ("greater", "greater_equal"):      # NaN is above every number
                test = f"pc.or_({test}, pc.is_nan({self.as_double(left)}))"
            return _Value(test, "boolean", "BOOLEAN")
        if floating:
            return _Value(f"_fcmp({self.as_double(left)}, {self.as_double(right)}, {op!r})", "boolean", "BOOLEAN")
        return _Value(f"pc.{op}({left.code}, {right.code})", "boolean", "BOOLEAN")

    def in_list(self, node: exp.In) -> _Value:
        if node.args.get("query") or node.args.get("unnest") or node.args.get("field"):
            raise _no(node, "(a subquery) has no Arrow form")
        subject = self.value(node.this)
        if subject.const:
            raise _no(node, "tests a constant")
        has_null = any(isinstance(e, exp.Null) for e in node.expressions)
        items = [self.value(e) for e in node.expressions if not isinstance(e, exp.Null)]
        if not items or not all(i.const and i.kind == subject.kind for i in items):
            raise _no(node, "needs constants of the subject's kind in its list")
        values = ", ".join(self.scalar(i, subject) for i in items)
        return _Value(f"_in({subject.code}, [{values}], {has_null})", "boolean", "BOOLEAN")

    def between(self, node: exp.Between) -> _Value:
        subject, low, high = self.value(node.this), self.value(node.args["low"]), self.value(node.args["high"])
        lower = self.compare(node, "greater_equal", subject, low)
        upper = self.compare(node, "less_equal", subject, high)
        return _Value(f"pc.and_kleene({lower.code}, {upper.code})", "boolean", "BOOLEAN")

    def is_(self, node: exp.Is) -> _Value:
        if not isinstance(node.expression, exp.Null):
            raise _no(node)
        return _Value(f"pc.is_null({self.subject(node.this).code})", "boolean", "BOOLEAN")

    def subject(self, node: exp.Expression) -> _Value:
        value = self.value(node)
        if value.const:
            raise _no(node, "is a constant")
        return value

    def not_(self, node: exp.Not) -> _Value:
        inner = node.this.this if isinstance(node.this, exp.Paren) else node.this
        if isinstance(inner, exp.Is) and isinstance(inner.expression, exp.Null):
            return _Value(f"pc.is_valid({self.subject(inner.this).code})", "boolean", "BOOLEAN")
        return _Value(f"pc.invert({self.boolean_of(inner).code})", "boolean", "BOOLEAN")

    def boolean_of(self, node: exp.Expression) -> _Value:
        value = self.value(node)
        if value.kind != "boolean" or value.const:
            raise _no(node, "is not a boolean of the row's columns")
        return value

    def and_(self, node: exp.And) -> _Value:
        left, right = self.boolean_of(node.this), self.boolean_of(node.expression)
        return _Value(f"pc.and_kleene({left.code}, {right.code})", "boolean", "BOOLEAN")

    def or_(self, node: exp.Or) -> _Value:
        left, right = self.boolean_of(node.this), self.boolean_of(node.expression)
        return _Value(f"pc.or_kleene({left.code}, {right.code})", "boolean", "BOOLEAN")

    def arithmetic(self, node: exp.Expression) -> _Value:
        left, right = self.value(node.this), self.value(node.expression)
        if left.kind != "number" or right.kind != "number":
            raise _no(node)
        spark = _arithmetic_type(left.spark, right.spark)
        if left.const and right.const:      # `2 * 100.0`: computed once, here, not per batch
            folded = _folded(left, right, type(node), spark)
            return _Value(folded.code, "number", spark, const=True, text=folded.code)
        name = _ARITHMETIC[type(node)]
        if spark in FLOATING:
            a = self.scalar(left, right) if left.const else self.as_double(left)
            b = self.scalar(right, left) if right.const else self.as_double(right)
            return _Value(f"pc.{name}({a}, {b})", "number", "DOUBLE")
        a = self.scalar(left, right) if left.const else left.code
        b = self.scalar(right, left) if right.const else right.code
        return _Value(f"pc.{name}_checked({a}, {b})", "number", spark)

    def negative(self, node: exp.Neg) -> _Value:
        value = self.value(node.this)
        if value.kind != "number":
            raise _no(node)
        if value.const:     # a negative literal stays a literal
            text = value.text[1:] if value.text.startswith("-") else f"-{value.text}"
            return _Value(text, "number", value.spark, const=True, text=text)
        negate = "negate" if value.spark in FLOATING else "negate_checked"
        return _Value(f"pc.{negate}({value.code})", "number", value.spark)

    def like(self, node: exp.Like) -> _Value:
        subject, pattern = self.value(node.this), self.value(node.expression)
        if subject.kind != "string" or subject.const or not pattern.const or pattern.kind != "string" \
                or node.args.get("escape") or "\\" in pattern.code:
            raise _no(node, "has no Arrow form (LIKE needs a constant pattern without backslashes)")
        return _Value(f"pc.match_like({subject.code}, {pattern.code})", "boolean", "BOOLEAN")

    def function(self, node: exp.Func) -> _Value:
        name = (node.name if isinstance(node, exp.Anonymous) else node.sql_name()).lower()
        if name == "coalesce":
            return self.coalesce(node)
        args = [a for a in node.args.values() if isinstance(a, exp.Expression)] + list(node.expressions)
        if len(args) != 1:
            raise _no(node, f"(function {name}) has no Arrow form")
        value = self.subject(args[0])
        if name in _LENGTHS and value.kind == "string":
            return _Value(f"pc.utf8_length({value.code})", "number", "INT")
        trim = _TRIMS.get("trim" if isinstance(node, exp.Trim) else name)
        if trim and value.kind == "string" and not node.args.get("expression") and not node.args.get("position"):
            return _Value(f"pc.{trim}({value.code}, ' ')", "string", "STRING")
        if name == "abs" and value.kind == "number" and (value.spark in FLOATING or value.spark.startswith("DECIMAL")):
            return _Value(f"pc.abs({value.code})", "number", value.spark)
        if name in ("isnull", "isnotnull"):
            return _Value(f"pc.{'is_valid' if name == 'isnotnull' else 'is_null'}({value.code})", "boolean", "BOOLEAN")
        raise _no(node, f"(function {name}) has no Arrow form")

    def coalesce(self, node: exp.Func) -> _Value:
        values = [self.value(a) for a in [node.this, *node.expressions]]
        columns = [v for v in values if not v.const]
        if not columns or len({v.spark for v in columns}) > 1 or len({v.kind for v in values}) > 1:
            raise _no(node, "(COALESCE of values of different types) has no Arrow form")
        first = columns[0]
        codes = [self.scalar(v, first) if v.const else v.code for v in values]
        return _Value(f"pc.coalesce({', '.join(codes)})", first.kind, first.spark)


_HANDLERS = {
    exp.Column: _Translator.column, exp.Literal: _Translator.literal, exp.Boolean: _Translator.boolean,
    exp.Null: _Translator.null, exp.In: _Translator.in_list, exp.Between: _Translator.between,
    exp.Is: _Translator.is_, exp.Not: _Translator.not_, exp.And: _Translator.and_, exp.Or: _Translator.or_,
    exp.Neg: _Translator.negative, exp.Like: _Translator.like,
}
