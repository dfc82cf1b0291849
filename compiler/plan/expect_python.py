"""A constraint's condition as a Python expression, so that it can run inside a chain's Python
pass between two operators (runtime/core/expect_operator.py) with the meaning Spark gives it.

Only a small part of Spark SQL is translated, the part whose meaning Python keeps exactly:
columns, literals, comparisons within one kind of value (numbers, strings, booleans; dates and
timestamps column against column), IN lists, BETWEEN, IS [NOT] NULL, AND / OR / NOT with SQL's
three values (None is NULL), +, - and * on numbers, length, lower, upper, trim, abs, coalesce
and LIKE. Spark's NaN (equal to itself, above every number) is kept for DOUBLE and FLOAT. Anything
else (a cast, a division, a regular expression, a function not listed) has no Python form: the
chain then ends at the checked operator and the constraint runs in Spark (`Translation.why_not`
says why, for `dslc explain`).

The expression reads the row as `r` (a dict) and may call the helpers the runtime puts beside it
(`_like`, `_fcmp`, `Decimal`).
"""
from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from sqlglot import exp

NUMBERS = frozenset({"TINYINT", "SMALLINT", "INT", "BIGINT", "FLOAT", "DOUBLE", "DECIMAL"})
FLOATING = frozenset({"FLOAT", "DOUBLE"})
STRINGS = frozenset({"STRING", "VARCHAR", "CHAR"})
_COMPARISONS = {exp.EQ: "==", exp.NEQ: "!=", exp.GT: ">", exp.GTE: ">=", exp.LT: "<", exp.LTE: "<="}
_ARITHMETIC = {exp.Add: "+", exp.Sub: "-", exp.Mul: "*"}
_STRING_FUNCTIONS = {"lower": "{}.lower()", "lcase": "{}.lower()", "upper": "{}.upper()", "ucase": "{}.upper()",
                     "trim": "{}.strip(' ')", "ltrim": "{}.lstrip(' ')", "rtrim": "{}.rstrip(' ')"}
_LENGTHS = frozenset({"length", "char_length", "character_length", "len"})


@dataclass(frozen=True, slots=True)
class Translation:
    """The Python form of a condition, or why there is none."""

    python: str | None
    why_not: str = ""


class _NoForm(Exception):
    """The condition holds something without an exact Python form (the message says what)."""


@dataclass(frozen=True, slots=True)
class _Value:
    code: str       # a Python expression
    kind: str       # 'number', 'string', 'boolean', a temporal type, or 'null'
    spark: str      # the Spark type (for numbers: DECIMAL, DOUBLE, ... ; '' for literals of no column)
    const: bool = False


def translate(condition: exp.Expression, columns: dict[str, tuple[str, str]]) -> Translation:
    """`condition` (a checked boolean condition) over `columns` (lower-case name → (spelling,
    Spark type)) as a Python expression over the row `r`."""
    try:
        value = _Translator(columns).value(condition)
    except _NoForm as exc:
        return Translation(None, str(exc))
    if value.kind not in ("boolean", "null"):
        return Translation(None, "the condition is not a boolean")
    return Translation(value.code)


def _kind(spark_type: str) -> str:
    base = spark_type.split("(")[0].split("<")[0].strip().upper()
    if base in NUMBERS:
        return "number"
    if base in STRINGS:
        return "string"
    if base == "BOOLEAN":
        return "boolean"
    return base.lower()


def _arithmetic_type(left: str, right: str) -> str:
    """The type Spark computes `left op right` in: DOUBLE with a floating side, else DECIMAL with a
    DECIMAL side, else the integral type."""
    if FLOATING & {left, right}:
        return "DOUBLE"
    if left.startswith("DECIMAL") or right.startswith("DECIMAL"):
        return "DECIMAL"
    return left or right


def _folded(left: _Value, right: _Value, node_type: type, spark: str) -> _Value:
    """Two number literals' sum, difference or product, as Spark computes it in `spark`."""
    kind = Decimal if spark == "DECIMAL" else float if spark in FLOATING else int
    a, b = kind(str(left.code)), kind(str(right.code))
    result = a + b if node_type is exp.Add else a - b if node_type is exp.Sub else a * b
    return _Value(str(result), "number", spark, const=True)


class _Translator:
    def __init__(self, columns: dict[str, tuple[str, str]]):
        self.columns = columns
        self.temps = 0

    def temp(self) -> str:
        self.temps += 1
        return f"_t{self.temps}"

    def value(self, node: exp.Expression) -> _Value:
        if isinstance(node, exp.Paren):
            return self.value(node.this)
        if isinstance(node, exp.Cast):
            raise _NoForm(f"CAST ({node.sql(dialect='spark')}) has no Python form in a chain")
        handler = _HANDLERS.get(type(node))
        if handler is not None:
            return handler(self, node)
        if isinstance(node, tuple(_COMPARISONS)):
            return self.compare(node)
        if isinstance(node, tuple(_ARITHMETIC)):
            return self.arithmetic(node)
        if isinstance(node, exp.Func):
            return self.function(node)
        raise _NoForm(f"{type(node).__name__.upper()} ({node.sql(dialect='spark')}) has no Python form in a chain")

    # ---- leaves
    def column(self, node: exp.Column) -> _Value:
        found = self.columns.get(node.name.lower())
        if found is None or node.table:
            raise _NoForm(f"column {node.sql(dialect='spark')} is not one of the stream's")
        spelling, spark_type = found
        return _Value(f"r[{spelling!r}]", _kind(spark_type), spark_type.upper())

    def literal(self, node: exp.Literal) -> _Value:
        if node.is_string:
            return _Value(repr(node.this), "string", "", const=True)
        text = node.this
        try:
            number = int(text)
        except ValueError:
            number = float(text)
            return _Value(repr(number), "number", "DOUBLE" if "e" in text.lower() else "DECIMAL", const=True)
        return _Value(repr(number), "number", "INT", const=True)

    def boolean(self, node: exp.Boolean) -> _Value:
        return _Value("True" if node.this else "False", "boolean", "BOOLEAN", const=True)

    def null(self, node: exp.Null) -> _Value:
        return _Value("None", "null", "", const=True)

    # ---- operators
    def compare(self, node: exp.Expression) -> _Value:
        left, right = self.value(node.this), self.value(node.expression)
        op = _COMPARISONS[type(node)]
        self.same_kind(left, right, node)
        if left.kind == "null" or right.kind == "null":
            return _Value("None", "boolean", "BOOLEAN")
        if left.const and not right.const:      # 5 < x  =>  x > 5
            left, right, op = right, left, {">": "<", "<": ">", ">=": "<=", "<=": ">="}.get(op, op)
        left_code, right_code = self.exact(left, right), self.exact(right, left)
        a = self.temp()
        if right.const:
            test = self.nan_aware(f"{a} {op} {right_code}", a, op, left)
            return _Value(f"(None if ({a} := {left_code}) is None else {test})", "boolean", "BOOLEAN")
        b = self.temp()
        test = f"_fcmp({a}, {b}, {op!r})" if left.spark in FLOATING or right.spark in FLOATING else f"{a} {op} {b}"
        return _Value(f"(None if ({a} := {left_code}) is None or ({b} := {right_code}) is None else {test})",
                      "boolean", "BOOLEAN")

    @staticmethod
    def nan_aware(test: str, name: str, op: str, value: _Value) -> str:
        """Spark's NaN is above every number: `x > 1` holds for it, `x < 1` does not."""
        if value.spark in FLOATING and op in (">", ">="):
            return f"({test} or {name} != {name})"
        return test

    @staticmethod
    def exact(value: _Value, other: _Value) -> str:
        """A number literal compared with a DECIMAL column as a Decimal (0.1 is not a float there)."""
        if value.const and value.kind == "number" and other.spark.startswith("DECIMAL"):
            return f"Decimal({str(value.code)!r})"
        return value.code

    def same_kind(self, left: _Value, right: _Value, node: exp.Expression) -> None:
        if "null" in (left.kind, right.kind):
            return
        if left.kind != right.kind or left.kind not in ("number", "string", "boolean") and (left.const or right.const):
            raise _NoForm(f"{node.sql(dialect='spark')} compares a {left.kind} with a {right.kind}, which Spark "
                          "casts: it has no Python form in a chain")

    def in_list(self, node: exp.In) -> _Value:
        if node.args.get("query") or node.args.get("unnest") or node.args.get("field"):
            raise _NoForm("IN with a subquery has no Python form")
        subject = self.value(node.this)
        items = [self.value(e) for e in node.expressions]
        if not all(i.const for i in items):
            raise _NoForm("IN with columns in its list has no Python form in a chain")
        for item in items:
            self.same_kind(subject, item, node)
        known = [self.exact(i, subject) for i in items if i.kind != "null"]
        has_null = len(known) < len(items)
        a = self.temp()
        found = f"{a} in {{{', '.join(known)}}}" if known else "False"
        test = f"(True if {found} else None)" if has_null else found
        return _Value(f"(None if ({a} := {subject.code}) is None else {test})", "boolean", "BOOLEAN")

    def between(self, node: exp.Between) -> _Value:
        subject, low, high = self.value(node.this), self.value(node.args["low"]), self.value(node.args["high"])
        for bound in (low, high):
            self.same_kind(subject, bound, node)
        if low.const and high.const and "null" not in (low.kind, high.kind):
            a = self.temp()
            test = f"{self.exact(low, subject)} <= {a} <= {self.exact(high, subject)}"
            return _Value(f"(None if ({a} := {subject.code}) is None else {test})", "boolean", "BOOLEAN")
        return self.and_(exp.And(this=exp.GTE(this=node.this, expression=node.args["low"]),
                                 expression=exp.LTE(this=node.this, expression=node.args["high"])))

    def is_(self, node: exp.Is) -> _Value:
        if not isinstance(node.expression, exp.Null):
            raise _NoForm(f"{node.sql(dialect='spark')} has no Python form in a chain")
        return _Value(f"({self.value(node.this).code} is None)", "boolean", "BOOLEAN")

    def not_(self, node: exp.Not) -> _Value:
        inner = node.this.this if isinstance(node.this, exp.Paren) else node.this
        if isinstance(inner, exp.Is) and isinstance(inner.expression, exp.Null):
            return _Value(f"({self.value(inner.this).code} is not None)", "boolean", "BOOLEAN")
        value = self.boolean_of(inner)
        a = self.temp()
        return _Value(f"(None if ({a} := {value.code}) is None else not {a})", "boolean", "BOOLEAN")

    def boolean_of(self, node: exp.Expression) -> _Value:
        value = self.value(node)
        if value.kind not in ("boolean", "null"):
            raise _NoForm(f"{node.sql(dialect='spark')} is not a boolean")
        return value

    def and_(self, node: exp.And) -> _Value:
        left, right = self.boolean_of(node.this), self.boolean_of(node.expression)
        a, b = self.temp(), self.temp()
        return _Value(f"(False if ({a} := {left.code}) is False else False if ({b} := {right.code}) is False "
                      f"else None if {a} is None or {b} is None else True)", "boolean", "BOOLEAN")

    def or_(self, node: exp.Or) -> _Value:
        left, right = self.boolean_of(node.this), self.boolean_of(node.expression)
        a, b = self.temp(), self.temp()
        return _Value(f"(True if ({a} := {left.code}) is True else True if ({b} := {right.code}) is True "
                      f"else None if {a} is None or {b} is None else False)", "boolean", "BOOLEAN")

    def arithmetic(self, node: exp.Expression) -> _Value:
        left, right = self.value(node.this), self.value(node.expression)
        if left.kind != "number" or right.kind != "number":
            raise _NoForm(f"{node.sql(dialect='spark')} has no Python form in a chain")
        spark = _arithmetic_type(left.spark, right.spark)
        if left.const and right.const:      # `2 * 100.0`: computed once, here, not per row
            return _folded(left, right, type(node), spark)
        a, b = self.temp(), self.temp()
        code = f"(None if ({a} := {self.operand(left, spark)}) is None or ({b} := {self.operand(right, spark)}) " \
               f"is None else {a} {_ARITHMETIC[type(node)]} {b})"
        return _Value(code, "number", spark)

    def operand(self, value: _Value, result: str) -> str:
        """An operand in the type Spark computes the operation in: a DECIMAL operation takes its
        number literals as Decimals (`2 * 100.0` is DECIMAL in Spark, and Python refuses a Decimal
        times a float); a DOUBLE one takes a DECIMAL column's values as floats, as Spark casts them."""
        if result.startswith("DECIMAL") and value.const and value.kind == "number":
            return f"Decimal({str(value.code)!r})"
        if result in FLOATING and value.spark.startswith("DECIMAL") and not value.const:
            d = self.temp()
            return f"(None if ({d} := {value.code}) is None else float({d}))"
        return value.code

    def negative(self, node: exp.Neg) -> _Value:
        value = self.value(node.this)
        if value.kind != "number":
            raise _NoForm(f"{node.sql(dialect='spark')} has no Python form in a chain")
        if value.const:     # a negative literal stays a literal (`exact` and folding read its text)
            code = value.code[1:] if value.code.startswith("-") else f"-{value.code}"
            return _Value(code, "number", value.spark, const=True)
        a = self.temp()
        return _Value(f"(None if ({a} := {value.code}) is None else -{a})", "number", value.spark)

    def like(self, node: exp.Like) -> _Value:
        subject, pattern = self.value(node.this), self.value(node.expression)
        if subject.kind != "string" or not pattern.const or pattern.kind != "string" or node.args.get("escape"):
            raise _NoForm(f"{node.sql(dialect='spark')} has no Python form in a chain (LIKE needs a constant pattern)")
        a = self.temp()
        return _Value(f"(None if ({a} := {subject.code}) is None else _like({pattern.code})({a}) is not None)",
                      "boolean", "BOOLEAN")

    def function(self, node: exp.Func) -> _Value:
        name = (node.name if isinstance(node, exp.Anonymous) else node.sql_name()).lower()
        args = [a for a in node.args.values() if isinstance(a, exp.Expression)] + list(node.expressions)
        if name == "coalesce":
            values = [self.value(a) for a in [node.this, *node.expressions]]
            if len({v.kind for v in values} - {"null"}) > 1:
                raise _NoForm("COALESCE of values of different kinds has no Python form in a chain")
            kinds = [v for v in values if v.kind != "null"]
            column = next((v for v in kinds if not v.const), None)
            typed = column or (kinds[0] if kinds else None)
            # a constant takes the column's type: COALESCE(fee, 0.1) with fee DECIMAL is Decimal('0.1')
            codes = [self.exact(v, column) if column is not None else v.code for v in values]
            code = codes[-1]
            for value_code in reversed(codes[:-1]):
                a = self.temp()
                code = f"({a} if ({a} := {value_code}) is not None else {code})"
            return _Value(code, typed.kind if typed else "null", typed.spark if typed else "")
        if len(args) != 1:
            raise _NoForm(f"function {name} has no Python form in a chain")
        value = self.value(args[0])
        a = self.temp()
        if name in _LENGTHS and value.kind == "string":
            return _Value(f"(None if ({a} := {value.code}) is None else len({a}))", "number", "INT")
        if name in _STRING_FUNCTIONS and value.kind == "string" and not isinstance(node, exp.Trim) or \
                isinstance(node, exp.Trim) and not node.args.get("expression") and value.kind == "string":
            method = _STRING_FUNCTIONS.get(name, "{}.strip(' ')").format(a)
            return _Value(f"(None if ({a} := {value.code}) is None else {method})", "string", "STRING")
        if name == "abs" and value.kind == "number":
            return _Value(f"(None if ({a} := {value.code}) is None else abs({a}))", "number", value.spark)
        if name in ("isnull", "isnotnull"):
            return _Value(f"({value.code} is {'not ' if name == 'isnotnull' else ''}None)", "boolean", "BOOLEAN")
        raise _NoForm(f"function {name} has no Python form in a chain")


_HANDLERS = {
    exp.Column: _Translator.column, exp.Literal: _Translator.literal, exp.Boolean: _Translator.boolean,
    exp.Null: _Translator.null, exp.In: _Translator.in_list, exp.Between: _Translator.between,
    exp.Is: _Translator.is_, exp.Not: _Translator.not_, exp.And: _Translator.and_, exp.Or: _Translator.or_,
    exp.Neg: _Translator.negative, exp.Like: _Translator.like,
}
