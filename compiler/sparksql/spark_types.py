"""Spark's typing rules for sqlglot's type annotator: the types Spark's analyzer gives expressions.

sqlglot's Spark dialect knows most function return types but not Spark's arithmetic: decimal
precision and scale (`DecimalPrecision`, with precision loss allowed, Spark's default), integral
and floating promotion under ANSI mode (Spark 4's default), literal types (`0.06` is
DECIMAL(2,2)), date/interval arithmetic, aggregates (`sum` of DECIMAL(p,s) is DECIMAL(p+10,s)),
the wider type of CASE/COALESCE/UNION branches, and lambda variables of higher-order functions.
The conformance corpus in tests/sql/ compares the result with Spark's own analyzer.
"""
from __future__ import annotations

import re

from sqlglot import exp
from sqlglot.optimizer.annotate_types import TypeAnnotator
from sqlglot.typing.spark import EXPRESSION_METADATA

from dslc.compiler.sparksql.spark_intervals import literal_value
from dslc.compiler.sparksql.spark_nodes import UnaryPlus
from dslc.compiler.sparksql.spark_returns import SPARK_RETURNS
from dslc.compiler.sparksql.spark_vectors import VECTOR_RETURNS

T = exp.DataType.Type
MAX_PRECISION = 38
_INTEGRAL = (T.TINYINT, T.SMALLINT, T.INT, T.BIGINT)
_INTEGRAL_DIGITS = {T.TINYINT: 3, T.SMALLINT: 5, T.INT: 10, T.BIGINT: 20}
_NUMERIC_ORDER = (T.TINYINT, T.SMALLINT, T.INT, T.BIGINT, T.FLOAT, T.DOUBLE)
_DATE_UNITS = {"YEAR", "MONTH", "WEEK", "DAY", "QUARTER"}
_YEAR_MONTH_UNITS = ("YEAR", "MONTH", "QUARTER")


def decimal(precision: int, scale: int) -> exp.DataType:
    return exp.DataType.build(f"DECIMAL({precision}, {scale})")


def bounded(precision: int, scale: int) -> exp.DataType:
    return decimal(min(precision, MAX_PRECISION), min(scale, MAX_PRECISION))


def adjusted(precision: int, scale: int) -> exp.DataType:
    """Spark's DecimalType.adjustPrecisionScale: keep the integral digits, give up scale (but
    keep at least 6 digits of it) when the exact result needs more than 38 digits."""
    if precision <= MAX_PRECISION:
        return decimal(precision, scale)
    integral = precision - scale
    min_scale = min(scale, 6)
    return decimal(MAX_PRECISION, max(MAX_PRECISION - integral, min_scale))


def precision_scale(data_type: exp.DataType) -> tuple[int, int]:
    params = [int(p.name) for p in data_type.expressions]
    if not params:
        return 10, 0
    return params[0], params[1] if len(params) > 1 else 0


def _is(data_type: exp.DataType | None, *kinds: T) -> bool:
    if data_type is None:
        return False
    if T.TIMESTAMP in kinds and data_type.this in (T.TIMESTAMPTZ, T.TIMESTAMPLTZ):
        return True                     # sqlglot reads Spark's TIMESTAMP as TIMESTAMPTZ
    if T.INTERVAL in kinds and isinstance(data_type.this, exp.Interval):
        return True                     # INTERVAL DAY and friends
    return data_type.this in kinds


def literal_type(literal: exp.Literal) -> exp.DataType:
    """A numeric literal's type: INT/BIGINT for whole numbers, DECIMAL(p,s) for `1.25`,
    DOUBLE with an exponent."""
    text = literal.this
    if "e" in text.lower():
        return exp.DataType.build("DOUBLE")
    if not text.replace(".", "", 1).isdigit():
        return exp.DataType.build("DOUBLE")
    if "." not in text:
        value = int(text)
        if value <= 2**31 - 1:
            return exp.DataType.build("INT")
        if value <= 2**63 - 1:
            return exp.DataType.build("BIGINT")
        return bounded(len(text), 0)
    whole, fraction = text.split(".")
    digits = (whole + fraction).lstrip("0") or "0"
    return bounded(max(len(digits), len(fraction)), len(fraction))


def _as_decimal(node: exp.Expression, data_type: exp.DataType) -> tuple[int, int] | None:
    """An integral operand of decimal arithmetic as a decimal: a literal by its own digits
    (`1` is DECIMAL(1,0)), a column by its type's range (INT is DECIMAL(10,0))."""
    if _is(data_type, T.DECIMAL):
        return precision_scale(data_type)
    if _is(data_type, *_INTEGRAL):
        literal = node.this if isinstance(node, exp.Neg) else node
        if isinstance(literal, exp.Literal) and not literal.is_string and literal.is_int:
            return max(len(literal.this.lstrip("-")), 1), 0
        return _INTEGRAL_DIGITS[data_type.this], 0
    return None


def wider(left: exp.DataType, right: exp.DataType) -> exp.DataType | None:
    """Spark's wider type of two (CASE branches, COALESCE, UNION columns), None when unknown."""
    if _is(left, T.NULL):
        return right
    if _is(right, T.NULL) or left == right:
        return left
    if _is(left, T.DECIMAL) or _is(right, T.DECIMAL):
        pairs = [_INTEGRAL_DIGITS.get(t.this) for t in (left, right)]
        if all(_is(t, T.DECIMAL, *_INTEGRAL) for t in (left, right)):
            (p1, s1), (p2, s2) = [precision_scale(t) if _is(t, T.DECIMAL) else (d, 0)
                                  for t, d in zip((left, right), pairs)]
            scale = max(s1, s2)
            return bounded(max(p1 - s1, p2 - s2) + scale, scale)
        if any(_is(t, T.FLOAT, T.DOUBLE) for t in (left, right)):
            return exp.DataType.build("DOUBLE")
        return None
    if left.this in _NUMERIC_ORDER and right.this in _NUMERIC_ORDER:
        if T.FLOAT in (left.this, right.this) and {left.this, right.this} & set(_INTEGRAL):
            return exp.DataType.build("DOUBLE")     # ANSI: no integral type widens to FLOAT in CASE/UNION
        return _numeric_wider(left.this, right.this)
    promoted = _string_as_number(left, right) or _string_as_number(right, left)
    if promoted is not None:
        return wider(promoted, right) if _is(left, *_TEXT) else wider(left, promoted)
    for text, other in ((left, right), (right, left)):      # ANSI: a STRING takes the other side's type
        if _is(text, *_TEXT) and _is(other, T.BINARY, T.BOOLEAN, T.DATE, *_TIMESTAMPS):
            return other
    if _is(left, T.DATE) and _is(right, T.TIMESTAMP) or _is(left, T.TIMESTAMP) and _is(right, T.DATE):
        return exp.DataType.build("TIMESTAMP")
    if _is(left, T.INTERVAL) and _is(right, T.INTERVAL):
        return interval_span(left, right)
    if left.this == right.this and left.this in (T.ARRAY, T.MAP) and len(left.expressions) == len(right.expressions):
        inner = [wider(a, b) for a, b in zip(left.expressions, right.expressions)]
        if all(i is not None for i in inner):
            return exp.DataType(this=left.this, expressions=inner, nested=True)
    return None


_TEXT = (T.TEXT, T.VARCHAR, T.CHAR)
_TIMESTAMPS = (T.TIMESTAMP, T.TIMESTAMPNTZ, T.TIMESTAMPLTZ)


def _string_as_number(text: exp.DataType, other: exp.DataType) -> exp.DataType | None:
    """ANSI mode's implicit cast of a STRING met by a number (arithmetic, CASE/IF branches, UNION
    columns): BIGINT beside an integral type, DOUBLE beside a fractional or decimal one."""
    if not _is(text, *_TEXT):
        return None
    if _is(other, *_INTEGRAL):
        return exp.DataType.build("BIGINT")
    if _is(other, T.FLOAT, T.DOUBLE, T.DECIMAL):
        return exp.DataType.build("DOUBLE")
    return None


def _numeric_wider(a: T, b: T) -> exp.DataType:
    order = max(_NUMERIC_ORDER.index(a), _NUMERIC_ORDER.index(b))
    if T.FLOAT in (a, b) and {a, b} & {T.INT, T.BIGINT}:
        return exp.DataType.build("DOUBLE")        # ANSI: INT and BIGINT do not fit a FLOAT
    return exp.DataType(this=_NUMERIC_ORDER[order])


def _interval_units(node: exp.Expression) -> set[str]:
    units: set[str] = set()
    for interval in node.find_all(exp.Interval):
        unit = interval.args.get("unit")
        if isinstance(unit, exp.IntervalSpan):
            units |= {unit.this.name.upper(), unit.expression.name.upper()}
        elif unit is not None:
            units.add(unit.name.upper().rstrip("S"))
    return units


_INTERVAL_FIELDS = ("YEAR", "MONTH", "DAY", "HOUR", "MINUTE", "SECOND")


def interval_span(left: exp.DataType, right: exp.DataType) -> exp.DataType | None:
    """The interval type covering two of one family (YEAR and MONTH: YEAR TO MONTH), None when one
    is year-month and the other day-time."""
    fields = []
    for side in (left, right):
        words = side.sql(dialect="spark").upper().split()
        fields += [w for w in words if w in _INTERVAL_FIELDS]
    if not fields or not words or (set(fields) & {"YEAR", "MONTH"} and set(fields) - {"YEAR", "MONTH"}):
        return None
    ranked = sorted(set(fields), key=_INTERVAL_FIELDS.index)
    text = f"INTERVAL {ranked[0]}" + (f" TO {ranked[-1]}" if len(ranked) > 1 else "")
    return exp.DataType.build(text, dialect="spark")


def interval_type(node: exp.Interval) -> exp.DataType | None:
    value = literal_value(node)
    if value is not None:
        return exp.DataType.build(value.type_text(), dialect="spark")
    unit = node.args.get("unit")
    if isinstance(unit, exp.IntervalSpan):
        text = f"INTERVAL {unit.this.name.upper()} TO {unit.expression.name.upper()}"
    elif unit is not None:
        name = unit.name.upper().rstrip("S")
        name = {"WEEK": "DAY", "QUARTER": "MONTH", "MILLISECOND": "SECOND", "MICROSECOND": "SECOND"}.get(name, name)
        text = f"INTERVAL {name}"
    else:
        return None
    try:
        return exp.DataType.build(text, dialect="spark")
    except Exception:   # noqa: BLE001 - an interval sqlglot cannot spell stays unknown
        return None


def generated_types(generator: exp.Expression) -> list[exp.DataType | None]:
    """The types of the columns a generator (explode, posexplode, inline, ...) adds, in order."""
    if isinstance(generator, exp.Anonymous):
        name, argument = generator.name.lower(), (generator.expressions or [None])[0]
    else:
        name, argument = type(generator).__name__.lower(), generator.this
    arg_type = argument.type if argument is not None else None
    position = [exp.DataType.build("INT")] if "posexplode" in name else []
    if ("explode" in name) and arg_type is not None:
        if _is(arg_type, T.MAP):
            return position + [_element(arg_type, 0), _element(arg_type, 1)]
        if _is(arg_type, T.ARRAY):
            return position + [_element(arg_type)]
    if "inline" in name and _is(_element(arg_type), T.STRUCT):
        return [f.args.get("kind") for f in _element(arg_type).expressions]
    if name == "json_tuple" and isinstance(generator, exp.Anonymous):
        return [exp.DataType.build("STRING")] * (len(generator.expressions) - 1)
    return position + [None]


class SparkTypes(TypeAnnotator):
    """sqlglot's annotator with Spark's rules where they differ from sqlglot's defaults."""

    def _get_scope_source_selects(self, scope, source_name):
        """The columns of a LATERAL VIEW: the generator's, under the names the view gives them."""
        source = scope.sources.get(source_name)
        lateral = getattr(source, "expression", None)
        if isinstance(lateral, exp.Lateral) and isinstance(lateral.this, exp.Func):
            self.annotate_expression(lateral.this, scope)
            names = [c.name for c in lateral.args["alias"].columns] if lateral.args.get("alias") else []
            types = generated_types(lateral.this)
            return {n: t or exp.DataType.build("UNKNOWN") for n, t in zip(names, types)}
        query = lateral.this.unnest() if isinstance(lateral, exp.Lateral) and isinstance(lateral.this, exp.Subquery) \
            else None
        if isinstance(query, exp.Query):            # LATERAL (SELECT ...) [AS s(a, b)]: its select list
            renamed = [c.name for c in lateral.args["alias"].columns] if lateral.args.get("alias") else []
            selects = query.selects
            names = renamed + [s.alias_or_name for s in selects[len(renamed):]]
            return {n: s.type or exp.DataType.build("UNKNOWN") for n, s in zip(names, selects)}
        return super()._get_scope_source_selects(scope, source_name)

    def _maybe_coerce(self, type1, type2):
        left = type1 if isinstance(type1, exp.DataType) else exp.DataType(this=type1)
        right = type2 if isinstance(type2, exp.DataType) else exp.DataType(this=type2)
        if _is(left, T.UNKNOWN) or _is(right, T.UNKNOWN):
            return exp.DataType.build("UNKNOWN")
        result = wider(left, right)
        return result if result is not None else super()._maybe_coerce(type1, type2)

    def _annotate_literal(self, expression: exp.Literal) -> exp.Literal:
        if expression.is_string:
            self._set_type(expression, exp.DataType.build("STRING"))
        else:
            self._set_type(expression, literal_type(expression))
        expression.meta["nonnull"] = True
        return expression

    def _annotate_binary(self, expression):
        left, right = expression.left, expression.right
        if isinstance(expression, (exp.Connector, exp.Predicate)) or left is None or right is None:
            return super()._annotate_binary(expression)
        lt, rt = left.type, right.type
        if lt is None or rt is None or _is(lt, T.UNKNOWN) or _is(rt, T.UNKNOWN):
            return super()._annotate_binary(expression)
        result = self._arithmetic(expression, left, right, lt, rt)
        if result is None:
            return super()._annotate_binary(expression)
        self._set_type(expression, result)
        return expression

    def _arithmetic(self, node, left, right, lt: exp.DataType, rt: exp.DataType) -> exp.DataType | None:
        if isinstance(node, (exp.Add, exp.Sub, exp.Mul, exp.Div)):
            dated = self._date_arithmetic(node, lt, rt)
            if dated is not None:
                return dated
        if isinstance(node, exp.IntDiv):
            return exp.DataType.build("BIGINT")
        if not isinstance(node, (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod)):
            return None
        promoted_left, promoted_right = _string_as_number(lt, rt), _string_as_number(rt, lt)
        if promoted_left is not None or promoted_right is not None:       # 1 + '2' is BIGINT
            return self._arithmetic(node, left, right, promoted_left or lt, promoted_right or rt)
        if _is(lt, T.DECIMAL) or _is(rt, T.DECIMAL):
            if _is(lt, T.FLOAT, T.DOUBLE) or _is(rt, T.FLOAT, T.DOUBLE):
                return exp.DataType.build("DOUBLE")
            a, b = _as_decimal(left, lt), _as_decimal(right, rt)
            if a is None or b is None:
                return None
            return _decimal_result(node, a, b)
        if lt.this in _NUMERIC_ORDER and rt.this in _NUMERIC_ORDER:
            if isinstance(node, exp.Div):
                return exp.DataType.build("DOUBLE")
            return _numeric_wider(lt.this, rt.this)
        return None

    def _date_arithmetic(self, node, lt: exp.DataType, rt: exp.DataType) -> exp.DataType | None:
        interval_left, interval_right = _is(lt, T.INTERVAL), _is(rt, T.INTERVAL)
        if interval_right or interval_left:
            other = lt if interval_right else rt
            units = _interval_units(node.right if interval_right else node.left)
            if isinstance(node, (exp.Mul, exp.Div)) and not (interval_left and interval_right) \
                    and not _is(other, T.UNKNOWN):
                # an interval times or by a number is the whole year-month or day-time interval
                spelt = (lt if interval_left else rt).sql(dialect="spark").upper()
                whole = "INTERVAL YEAR TO MONTH" if "YEAR" in spelt or "MONTH" in spelt else "INTERVAL DAY TO SECOND"
                return exp.DataType.build(whole, dialect="spark")
            if _is(other, T.TEXT, T.VARCHAR) and isinstance(node, (exp.Add, exp.Sub)):
                return exp.DataType.build("STRING")       # '4 11:11' + INTERVAL ...: Spark keeps the text
            if _is(other, T.DATE):
                return exp.DataType.build("DATE" if units <= _DATE_UNITS else "TIMESTAMP")
            if _is(other, T.TIMESTAMP, T.TIMESTAMPNTZ):
                return other
            if _is(other, T.UNKNOWN):
                return None
            if interval_left and interval_right:
                return interval_span(lt, rt) or lt
            return None
        if isinstance(node, (exp.Mul, exp.Div)):
            return None
        loose = (T.TEXT, T.VARCHAR, T.NULL)         # text and NULL take the other side's type
        if isinstance(node, exp.Sub) and (_is(lt, T.DATE) and _is(rt, *loose) or _is(rt, T.DATE) and _is(lt, *loose)):
            return exp.DataType.build("INTERVAL DAY", dialect="spark")
        if isinstance(node, exp.Sub) and (_is(lt, T.TIMESTAMP, T.TIMESTAMPNTZ) and _is(rt, *loose)
                                          or _is(rt, T.TIMESTAMP, T.TIMESTAMPNTZ) and _is(lt, *loose)):
            return exp.DataType.build("INTERVAL DAY TO SECOND", dialect="spark")
        if isinstance(node, exp.Sub) and _is(lt, T.DATE) and _is(rt, T.DATE):
            return exp.DataType.build("INTERVAL DAY", dialect="spark")
        if isinstance(node, exp.Sub) and _is(lt, T.DATE, T.TIMESTAMP) and _is(rt, T.DATE, T.TIMESTAMP):
            return exp.DataType.build("INTERVAL DAY TO SECOND", dialect="spark")
        if _is(lt, T.DATE) and _is(rt, *_INTEGRAL) or _is(rt, T.DATE) and _is(lt, *_INTEGRAL):
            return exp.DataType.build("DATE")
        return None


def _decimal_result(node, a: tuple[int, int], b: tuple[int, int]) -> exp.DataType:
    """DecimalPrecision's result type of `a op b` (precision loss allowed)."""
    (p1, s1), (p2, s2) = a, b
    if isinstance(node, (exp.Add, exp.Sub)):
        scale = max(s1, s2)
        return adjusted(max(p1 - s1, p2 - s2) + scale + 1, scale)
    if isinstance(node, exp.Mul):
        return adjusted(p1 + p2 + 1, s1 + s2)
    if isinstance(node, exp.Div):
        scale = max(6, s1 + p2 + 1)
        return adjusted(p1 - s1 + s2 + scale, scale)
    scale = max(s1, s2)                                 # %
    return adjusted(min(p1 - s1, p2 - s2) + scale, scale)


# ---- functions -------------------------------------------------------------------------------

def _typed(self: SparkTypes, e: exp.Expression, result) -> exp.Expression:
    self._set_type(e, result if result is not None else exp.DataType.build("UNKNOWN"))
    return e


def _negated(self, e):
    """`-2147483648` is an INT (the literal's negative fits), `- '1'` a DOUBLE (ANSI), else the
    operand's type."""
    inner = e.this
    if isinstance(inner, exp.Literal) and not inner.is_string and inner.is_int:
        value = -int(inner.this)
        kind = "INT" if value >= -2**31 else "BIGINT" if value >= -2**63 else None
        if kind is not None:
            return _typed(self, e, exp.DataType.build(kind))
    return _string_as_double(self, e)


def _string_as_double(self, e):
    """A unary numeric operator (`-x`, `+x`, abs(x)): a STRING operand is read as a DOUBLE (ANSI)."""
    kind = e.this.type if e.this is not None else None
    return _typed(self, e, exp.DataType.build("DOUBLE") if _is(kind, *_TEXT) else kind)


def _median(self, e):
    """median(x): DOUBLE of numbers, the whole interval type of intervals."""
    kind = e.this.type if e.this is not None else None
    if _is(kind, T.INTERVAL):
        return _typed(self, e, _whole_interval(kind))
    return _typed(self, e, exp.DataType.build("DOUBLE") if kind is not None and kind.this in _NUMERIC_ORDER
                  or _is(kind, T.DECIMAL) else None)


def _within_group(self, e):
    """percentile_cont/disc(p) WITHIN GROUP (ORDER BY x): the interval type of an interval x, else
    DOUBLE."""
    order = e.expression.expressions if isinstance(e.expression, exp.Order) else []
    if not isinstance(e.this, (exp.PercentileCont, exp.PercentileDisc)) or len(order) != 1:
        return _typed(self, e, e.this.type if e.this is not None else None)
    kind = order[0].this.type
    return _typed(self, e, _whole_interval(kind) if _is(kind, T.INTERVAL) else exp.DataType.build("DOUBLE"))


def _whole_interval(kind: exp.DataType) -> exp.DataType:
    """The whole year-month or day-time interval type an interval of any fields belongs to (a
    percentile of INTERVAL MONTH values is an INTERVAL YEAR TO MONTH)."""
    spelt = kind.sql(dialect="spark").upper()
    return exp.DataType.build("INTERVAL YEAR TO MONTH" if "YEAR" in spelt or "MONTH" in spelt
                              else "INTERVAL DAY TO SECOND", dialect="spark")


def _all_binary(self, e, args):
    """concat / || / elt of BINARY values only is a BINARY; anything else stays sqlglot's STRING."""
    if args and all(_is(a.type, T.BINARY) for a in args):
        return _typed(self, e, exp.DataType.build("BINARY"))
    return None


def _sum(self, e):
    t = e.this.type if e.this is not None else None
    if _is(t, T.DECIMAL):
        p, s = precision_scale(t)
        return _typed(self, e, bounded(p + 10, s))
    if _is(t, *_INTEGRAL):
        return _typed(self, e, exp.DataType.build("BIGINT"))
    if _is(t, T.FLOAT, T.DOUBLE):
        return _typed(self, e, exp.DataType.build("DOUBLE"))
    if _is(t, T.INTERVAL):
        return _typed(self, e, t)
    return _typed(self, e, None)


def _avg(self, e):
    t = e.this.type if e.this is not None else None
    if _is(t, T.DECIMAL):
        p, s = precision_scale(t)
        return _typed(self, e, bounded(p + 4, s + 4))
    if _is(t, T.INTERVAL):
        return _typed(self, e, t)
    if t is None or _is(t, T.UNKNOWN):
        return _typed(self, e, None)
    return _typed(self, e, exp.DataType.build("DOUBLE"))


def _round(self, e):
    t = e.this.type
    digits = e.args.get("decimals")
    wanted = int(digits.name) if isinstance(digits, exp.Literal) and digits.is_int else (
        -int(digits.this.name) if isinstance(digits, exp.Neg) and isinstance(digits.this, exp.Literal) else 0)
    if _is(t, T.DECIMAL):
        p, s = precision_scale(t)
        integral = p - s + 1
        if wanted < 0:
            return _typed(self, e, decimal(min(integral - wanted, MAX_PRECISION), 0))
        scale = min(s, wanted)
        return _typed(self, e, decimal(min(integral + scale, MAX_PRECISION), scale))
    return _typed(self, e, t)


def _ceil_floor(self, e):
    t = e.this.type
    if e.args.get("decimals") is not None:
        return _round(self, e)
    if _is(t, T.DECIMAL):
        p, s = precision_scale(t)
        return _typed(self, e, decimal(min(p - s + 1, MAX_PRECISION), 0))
    if _is(t, *_INTEGRAL, T.FLOAT, T.DOUBLE):
        return _typed(self, e, exp.DataType.build("BIGINT"))
    return _typed(self, e, None)


def _element(data_type: exp.DataType | None, index: int = 0) -> exp.DataType | None:
    if data_type is None or not data_type.expressions or len(data_type.expressions) <= index:
        return None
    inner = data_type.expressions[index]
    return inner if isinstance(inner, exp.DataType) else None


def _array_of(inner: exp.DataType | None) -> exp.DataType | None:
    return exp.DataType(this=T.ARRAY, expressions=[inner], nested=True) if inner is not None else None


def _map_of(key: exp.DataType | None, value: exp.DataType | None) -> exp.DataType | None:
    if key is None or value is None:
        return None
    return exp.DataType(this=T.MAP, expressions=[key, value], nested=True)


def _lambda_body(self: SparkTypes, function: exp.Expression, *variable_types) -> exp.DataType | None:
    """Type a lambda's body with its variables bound to `variable_types`; the body's type."""
    lam = next((a for a in function.iter_expressions() if isinstance(a, exp.Lambda)), None)
    if lam is None:
        return None
    return _type_lambda(self, lam, variable_types)


def _type_lambda(self: SparkTypes, lam: exp.Lambda, variable_types) -> exp.DataType | None:
    bound = {v.name.lower(): t for v, t in zip(lam.expressions, variable_types)}
    if any(t is None for t in bound.values()):
        return None
    for node in lam.this.walk():
        self._visited.pop(id(node), None)
    for node in list(lam.this.walk()):
        if isinstance(node, exp.Column) and not node.table and node.name.lower() in bound:
            self._set_type(node, bound[node.name.lower()])
        elif isinstance(node, exp.Identifier) and not isinstance(node.parent, (exp.Column, exp.Dot)) \
                and node.name.lower() in bound:
            self._set_type(node, bound[node.name.lower()])
        elif isinstance(node, exp.Column) and node.table and node.table.lower() in bound:
            self._set_type(node, _field(bound[node.table.lower()], node.name))
        elif isinstance(node, exp.Dot) and isinstance(node.this, exp.Identifier) and node.this.name.lower() in bound:
            self._set_type(node.this, bound[node.this.name.lower()])
    self.annotate_expression(lam.this)
    return lam.this.type


def _field(struct: exp.DataType | None, name: str) -> exp.DataType | None:
    """The type of a struct's field."""
    if struct is None or not _is(struct, T.STRUCT):
        return None
    field = next((f for f in struct.expressions if isinstance(f, exp.ColumnDef)
                  and f.name.lower() == name.lower()), None)
    kind = field.args.get("kind") if field is not None else None
    return kind if isinstance(kind, exp.DataType) else None


def _bracket(self, e):
    """`a[i]`, `m[k]`, `element_at(...)`, `s['field']`."""
    t = e.this.type
    if _is(t, T.ARRAY):
        return _typed(self, e, _element(t))
    if _is(t, T.MAP):
        return _typed(self, e, _element(t, 1))
    if _is(t, T.STRUCT) and e.expressions and isinstance(e.expressions[0], exp.Literal):
        return _typed(self, e, _field(t, e.expressions[0].this))
    return _typed(self, e, None)


def _dot(self, e):
    """`s.field`, and `a.field` over an array of structs (an array of the field)."""
    t = e.this.type
    if _is(t, T.ARRAY) and _is(_element(t), T.STRUCT):
        return _typed(self, e, _array_of(_field(_element(t), e.name)))
    if _is(t, T.STRUCT):
        return _typed(self, e, _field(t, e.name))
    return self._annotate_dot(e)


def _reduce(self, e):
    zero, element = e.args["initial"].type, _element(e.this.type)
    merge, finish = e.args.get("merge"), e.args.get("finish")
    result = None
    if isinstance(merge, exp.Lambda) and zero is not None and element is not None:
        result = _type_lambda(self, merge, (zero, element))
        if result is not None and not _is(result, T.UNKNOWN):
            result = wider(zero, result) or result
        if isinstance(finish, exp.Lambda) and result is not None:
            result = _type_lambda(self, finish, (result,))
    return _typed(self, e, result)


def _transform(self, e):
    element = _element(e.this.type)
    body = _lambda_body(self, e, element) if element is not None else None
    return _typed(self, e, _array_of(body) if body is not None and not _is(body, T.UNKNOWN) else None)


def _same_as_input(self, e):
    element = _element(e.this.type)
    if element is not None:
        _lambda_body(self, e, element)
    return _typed(self, e, e.this.type)


def _predicate_over_array(self, e):
    element = _element(e.this.type)
    if element is not None:
        _lambda_body(self, e, element)
    return _typed(self, e, exp.DataType.build("BOOLEAN"))


def _anonymous(self, e):
    """Spark functions sqlglot does not model (parsed as Anonymous), by name: the rule of
    `_BY_NAME` for the name, unless it cannot tell (`_UNDECIDED`); then the result type listed in
    `_ANONYMOUS_RETURNS` or in Spark's own registry (SPARK_RETURNS)."""
    name = e.name.lower()
    rule = _BY_NAME.get(name)
    result = rule(self, e.expressions) if rule is not None else _UNDECIDED
    if result is _UNDECIDED:
        returns = _ANONYMOUS_RETURNS.get(name) or SPARK_RETURNS.get(name)
        result = exp.DataType.build(returns, dialect="spark") if returns else None
    return _typed(self, e, result)


# What a rule of _BY_NAME returns when the call is not one it types (too few arguments, say).
_UNDECIDED = object()


def _first_type(args: list[exp.Expression]) -> exp.DataType | None:
    return args[0].type if args else None


def _fold(self, args):
    """aggregate / reduce (array, zero, merge[, finish]): the merge's type, widened with zero's."""
    if len(args) < 3:
        return _UNDECIDED
    lambdas = [a for a in args if isinstance(a, exp.Lambda)]
    zero, element = args[1].type, _element(_first_type(args))
    if not lambdas or zero is None or element is None:
        return None
    result = _type_lambda(self, lambdas[0], (zero, element))
    if result is not None and not _is(result, T.UNKNOWN):
        result = wider(zero, result) or result
    if len(lambdas) > 1 and result is not None:
        result = _type_lambda(self, lambdas[1], (result,))
    return result


def _zip_with(self, args):
    if len(args) != 3:
        return _UNDECIDED
    body = _type_lambda(self, args[2], (_element(_first_type(args)), _element(args[1].type))) \
        if isinstance(args[2], exp.Lambda) else None
    return _array_of(body) if body is not None and not _is(body, T.UNKNOWN) else None


def _map_lambda_of(self, args):
    """The type of a map function's lambda over (key, value)."""
    first = _first_type(args)
    return _type_lambda(self, args[1], (_element(first, 0), _element(first, 1)))


def _transform_values(self, args):
    return _map_of(_element(_first_type(args), 0), _map_lambda_of(self, args))


def _transform_keys(self, args):
    return _map_of(_map_lambda_of(self, args), _element(_first_type(args), 1))


def _map_filter(self, args):
    _map_lambda_of(self, args)
    return _first_type(args)


def _bround(self, args):
    rounded = exp.Round(this=args[0], decimals=args[1] if len(args) > 1 else None)
    _round(self, rounded)
    return rounded.type


def _forall(self, args):
    _type_lambda(self, args[1], (_element(_first_type(args)),))
    return exp.DataType.build("BOOLEAN")


def _try_arithmetic_call(name: str):
    def annotate(self, args):
        first = _first_type(args)
        if len(args) != 2 or first is None or args[1].type is None:
            return _UNDECIDED
        node = _TRY_ARITHMETIC[name](this=args[0].copy(), expression=args[1].copy())
        node.this.type, node.expression.type = first, args[1].type
        return self._arithmetic(node, node.this, node.expression, first, args[1].type) \
            or (self._date_arithmetic(node, first, args[1].type) if name in ("try_add", "try_subtract") else None)
    return annotate


def _try_aggregate(kind: type[exp.Expression], annotator):
    """try_sum / try_avg: the type of sum / avg."""
    def annotate(self, args):
        if len(args) != 1:
            return _UNDECIDED
        probe = kind(this=args[0].copy())
        probe.this.type = _first_type(args)
        annotator(self, probe)
        return probe.type if probe.type is not None and not _is(probe.type, T.UNKNOWN) else None
    return annotate


def _histogram_numeric(self, args):
    first = _first_type(args)
    if first is None or _is(first, T.UNKNOWN):
        return _UNDECIDED
    return exp.DataType.build(f"ARRAY<STRUCT<x: {first.sql(dialect='spark')}, y: DOUBLE>>", dialect="spark")


def _decode_call(self, args):
    """decode(x, search, result, ..., default) or decode(binary, charset)."""
    if len(args) < 2:
        return _UNDECIDED
    return _decode_type(args)


def _with_arguments(count: int, result):
    """A rule for calls of `count` arguments: result(self, args)."""
    return lambda self, args: result(self, args) if len(args) == count else _UNDECIDED


def _pmod(self, args):
    first = _first_type(args)
    return self._arithmetic(exp.Mod(this=args[0], expression=args[1]), args[0], args[1], first, args[1].type) \
        if first is not None and args[1].type is not None else None


def _map_part(index: int):
    """map_keys / map_values: an array of the map's keys or values."""
    def annotate(self, args):
        first = _first_type(args)
        return _array_of(_element(first, index)) if first is not None else _UNDECIDED
    return annotate


def _parsed_schema(name: str):
    """from_json / from_csv with a literal schema: a DDL column list (`a INT, b STRING`) or one type."""
    def annotate(self, args):
        if len(args) < 2 or not isinstance(args[1], exp.Literal) or not args[1].is_string:
            return _UNDECIDED
        schema = args[1].this.strip()
        whole = name == "from_json" and re.match(r"(struct|array|map)\s*<", schema, re.I)
        try:
            return exp.DataType.build(schema if whole else f"STRUCT<{schema}>", dialect="spark")
        except Exception:    # noqa: BLE001 - a schema sqlglot cannot read: unknown type
            return None
    return annotate


def _as_first(self, args):
    return _first_type(args)


def _decode(self, e):
    return _typed(self, e, _decode_type(e.expressions))


def _decode_type(args: list[exp.Expression]) -> exp.DataType | None:
    """decode(x, search, result, ..., default): the wider type of its results; decode(binary,
    charset): a STRING."""
    if len(args) == 2:
        return exp.DataType.build("STRING")
    results = args[2::2] + ([args[-1]] if len(args) % 2 == 0 else [])
    kind = results[0].type if results else None
    for other in results[1:]:
        kind = wider(kind, other.type) if kind is not None and other.type is not None else None
    return kind


def number_format_type(fmt: exp.Expression) -> exp.DataType | None:
    """to_number's DECIMAL(p, s): p the format's digits (0 and 9), s those after its point (. or D)."""
    if not isinstance(fmt, exp.Literal) or not fmt.is_string:
        return None
    text = fmt.this.upper()
    point = max(text.find("."), text.find("D"))
    digits = sum(ch in "09" for ch in text)
    scale = sum(ch in "09" for ch in text[point + 1:]) if point >= 0 else 0
    return decimal(digits, scale) if 0 < digits <= MAX_PRECISION else None


def _array_with(self, e):
    """array_append / array_prepend: an array of the wider of its element and the value."""
    first, value = e.this.type, e.expression.type if e.expression is not None else None
    if first is None or value is None:
        return _typed(self, e, None)
    element = value if _is(first, T.NULL) else _element(first)
    if element is not None and not _is(first, T.NULL) and not _is(value, T.NULL):
        element = wider(element, value) or element
    return _typed(self, e, _array_of(element) if element is not None and not _is(element, T.UNKNOWN) else None)


def _try_arithmetic(self, e, op):
    """try_add / try_subtract / try_multiply (sqlglot's Safe*): the type of the operator they guard."""
    lt, rt = e.this.type, e.expression.type
    if lt is None or rt is None or _is(lt, T.UNKNOWN) or _is(rt, T.UNKNOWN):
        return _typed(self, e, None)
    node = op(this=e.this.copy(), expression=e.expression.copy())
    node.this.type, node.expression.type = lt, rt
    return _typed(self, e, self._arithmetic(node, node.this, node.expression, lt, rt))


_TRY_ARITHMETIC = {"try_add": exp.Add, "try_subtract": exp.Sub, "try_multiply": exp.Mul, "try_divide": exp.Div,
                   "try_mod": exp.Mod}

_ANONYMOUS_RETURNS = {
    "hash": "INT", "xxhash64": "BIGINT", "uuid": "STRING", "monotonically_increasing_id": "BIGINT",
    "spark_partition_id": "INT", "grouping_id": "BIGINT", "input_file_name": "STRING",
    "current_timezone": "STRING", "typeof": "STRING", "unix_timestamp": "BIGINT", "to_unix_timestamp": "BIGINT",
    "timestamp_seconds": "TIMESTAMP", "timestamp_millis": "TIMESTAMP", "date_from_unix_date": "DATE",
    "make_date": "DATE", "weekofyear": "INT", "dayofweek": "INT", "dayofmonth": "INT", "dayofyear": "INT",
    "quarter": "INT", "second": "INT", "minute": "INT", "hour": "INT", "weekday": "INT", "ceiling": "BIGINT",
    "sha1": "STRING", "sha2": "STRING", "md5": "STRING", "crc32": "BIGINT", "base64": "STRING",
    "unbase64": "BINARY", "format_number": "STRING", "format_string": "STRING", "initcap": "STRING",
    "soundex": "STRING", "levenshtein": "INT", "instr": "INT", "locate": "INT", "char_length": "INT",
    "character_length": "INT", "octet_length": "INT", "bit_length": "INT", "ascii": "INT", "isnull": "BOOLEAN",
    "isnotnull": "BOOLEAN", "isnan": "BOOLEAN", "rlike": "BOOLEAN", "regexp": "BOOLEAN",
    "regexp_count": "INT", "regexp_instr": "INT", "array_position": "BIGINT", "cume_dist": "DOUBLE",
    "months_between": "DOUBLE", "datediff": "INT", "bool_and": "BOOLEAN", "bool_or": "BOOLEAN",
    "every": "BOOLEAN", "some": "BOOLEAN", "count_if": "BIGINT", "approx_count_distinct": "BIGINT",
    "input_file_block_start": "BIGINT", "current_catalog": "STRING", "current_database": "STRING",
    "current_user": "STRING", "version": "STRING", "json_array_length": "INT",
    "json_object_keys": "ARRAY<STRING>", "getbit": "TINYINT", **VECTOR_RETURNS,
}

# Anonymous calls typed by a rule of their own (see _anonymous).
_BY_NAME = {
    "aggregate": _fold, "reduce": _fold, "zip_with": _zip_with, "transform_values": _transform_values,
    "transform_keys": _transform_keys, "map_filter": _map_filter, "bround": _bround, "forall": _forall,
    **{name: _try_arithmetic_call(name) for name in _TRY_ARITHMETIC},
    "try_sum": _try_aggregate(exp.Sum, _sum), "try_avg": _try_aggregate(exp.Avg, _avg),
    "histogram_numeric": _histogram_numeric, "decode": _decode_call,
    "get": _with_arguments(2, lambda self, args: _element(_first_type(args))),
    "to_number": _with_arguments(2, lambda self, args: number_format_type(args[1])),
    "try_to_number": _with_arguments(2, lambda self, args: number_format_type(args[1])),
    "date_part": _with_arguments(2, lambda self, args: date_part_type(args[0], args[1].type)),
    "datepart": _with_arguments(2, lambda self, args: date_part_type(args[0], args[1].type)),
    **dict.fromkeys(("collect_set", "collect_list", "array_agg"), lambda self, args: _array_of(_first_type(args))),
    "pmod": _pmod, "mod": _pmod, "map_keys": _map_part(0), "map_values": _map_part(1),
    **dict.fromkeys(("any_value", "first_value", "last_value", "percentile_approx", "approx_percentile", "mode",
                     "median_value", "max_by", "min_by", "nanvl", "ifnull", "nvl"), _as_first),
    "from_json": _parsed_schema("from_json"), "from_csv": _parsed_schema("from_csv"),
}

_DATE_PARTS = (exp.Year, exp.Month, exp.Day, exp.DayOfWeek, exp.DayOfMonth, exp.DayOfYear, exp.Quarter,
               exp.WeekOfYear, exp.Hour, exp.Minute, exp.Second)

SPARK_METADATA = {
    **EXPRESSION_METADATA,
    UnaryPlus: {"annotator": _string_as_double},
    exp.Neg: {"annotator": _negated},
    exp.Abs: {"annotator": _string_as_double},
    exp.Mode: {"annotator": lambda self, e: _typed(self, e, e.this.type if e.this is not None else None)},
    exp.Median: {"annotator": _median},
    exp.WithinGroup: {"annotator": _within_group},
    exp.Nvl2: {"annotator": lambda self, e: _typed(self, e, wider(e.args["true"].type, e.args["false"].type)
                                                   if e.args.get("true") is not None and e.args.get("false") is not None
                                                   and e.args["true"].type is not None and e.args["false"].type is not None
                                                   else None)},
    exp.DPipe: {"annotator": lambda self, e: _all_binary(self, e, [e.this, e.expression])
                or _typed(self, e, exp.DataType.build("STRING"))},
    exp.Concat: {"annotator": lambda self, e: _all_binary(self, e, e.expressions)
                 or _typed(self, e, exp.DataType.build("STRING"))},
    exp.Sum: {"annotator": _sum},
    exp.Avg: {"annotator": _avg},
    exp.Round: {"annotator": _round},
    exp.Ceil: {"annotator": _ceil_floor},
    exp.Floor: {"annotator": _ceil_floor},
    exp.Transform: {"annotator": _transform},
    exp.ArrayFilter: {"annotator": _same_as_input},
    exp.ArrayAny: {"annotator": _predicate_over_array},
    exp.ArrayAll: {"annotator": _predicate_over_array},
    exp.Anonymous: {"annotator": _anonymous},
    exp.Null: {"returns": exp.DataType.build("NULL")},
    exp.Interval: {"annotator": lambda self, e: _typed(self, e, interval_type(e))},
    exp.GroupingId: {"returns": exp.DataType.build("BIGINT")},
    exp.ApproxDistinct: {"returns": exp.DataType.build("BIGINT")},
    exp.Hll: {"returns": exp.DataType.build("BIGINT")},
    exp.Extract: {"annotator": lambda self, e: _typed(self, e, date_part_type(e.this, e.expression.type))},
    **{part: {"returns": exp.DataType.build("INT")} for part in _DATE_PARTS if part is not None},
    exp.StrPosition: {"returns": exp.DataType.build("INT")},
    exp.MD5: {"returns": exp.DataType.build("STRING")},
    exp.SHA2: {"returns": exp.DataType.build("STRING")},
    exp.Uuid: {"returns": exp.DataType.build("STRING")},
    exp.DateTrunc: {"returns": exp.DataType.build("TIMESTAMP")},
    exp.TimestampTrunc: {"returns": exp.DataType.build("TIMESTAMP")},
    exp.ArrayUniqueAgg: {"annotator": lambda self, e: _typed(self, e, _array_of(e.this.type))},
    exp.Div: {"annotator": lambda self, e: self._annotate_binary(e)},
    exp.If: {"annotator": lambda self, e: self._annotate_by_args(e, "true", "false")},
    exp.Coalesce: {"annotator": lambda self, e: self._annotate_by_args(e, "this", "expressions")},
    exp.Bracket: {"annotator": _bracket},
    exp.Dot: {"annotator": _dot},
    exp.Reduce: {"annotator": _reduce},
    exp.MapKeys: {"annotator": lambda self, e: _typed(self, e, _array_of(_element(e.this.type, 0)))},
    exp.Flatten: {"annotator": lambda self, e: _typed(self, e, _element(e.this.type))},
    exp.FromJson: {"annotator": lambda self, e: _typed(self, e, _struct_of(e.expression))},
    exp.TimestampDiff: {"returns": exp.DataType.build("BIGINT")},
    exp.DecodeCase: {"annotator": lambda self, e: _decode(self, e)},
    exp.ToNumber: {"annotator": lambda self, e: _typed(self, e, number_format_type(e.args.get("format")))},
    exp.JSONKeys: {"returns": exp.DataType.build("ARRAY<STRING>", dialect="spark")},
    exp.Getbit: {"returns": exp.DataType.build("TINYINT")},
    exp.ArrayAppend: {"annotator": _array_with},
    exp.ArrayPrepend: {"annotator": _array_with},
    exp.RegexpExtractAll: {"returns": exp.DataType.build("ARRAY<STRING>", dialect="spark")},
    **{safe: {"annotator": lambda self, e, op=op: _try_arithmetic(self, e, op)}
       for safe, op in ((exp.SafeAdd, exp.Add), (exp.SafeSubtract, exp.Sub), (exp.SafeMultiply, exp.Mul),
                        (exp.SafeDivide, exp.Div))},
    exp.DateDiff: {"annotator": lambda self, e: _typed(self, e, exp.DataType.build(   # with a unit: timestampdiff
        "BIGINT" if isinstance(e.args.get("unit"), exp.Var) else "INT"))},
    exp.TimestampAdd: {"annotator": lambda self, e: _typed(self, e, _timestamp_like(e.this.type))},
}


_SECOND_FIELDS = {"SECOND", "S", "SEC", "SECONDS", "SECS"}
_SMALL_INTERVAL_FIELDS = {"MONTH", "MON", "MONS", "MONTHS", "HOUR", "H", "HOURS", "HR", "HRS",
                          "MINUTE", "M", "MIN", "MINS", "MINUTES"}


def date_part_type(field: exp.Expression | None, source: exp.DataType | None) -> exp.DataType | None:
    """extract(field FROM x) / date_part('field', x): INT, but SECOND is DECIMAL(8,6), the month,
    hour and minute of an interval TINYINT, EPOCH DECIMAL(18,6) and an unknown (NULL) field DOUBLE."""
    if isinstance(field, exp.Null):
        return exp.DataType.build("DOUBLE")
    name = field.name.upper() if isinstance(field, (exp.Var, exp.Literal, exp.Column, exp.Identifier)) else None
    if name is None:
        return None
    if name in _SECOND_FIELDS:
        return exp.DataType.build("DECIMAL(8, 6)")
    if name == "EPOCH":
        return exp.DataType.build("DECIMAL(18, 6)")
    if source is not None and source.sql(dialect="spark").upper().startswith("INTERVAL") \
            and name in _SMALL_INTERVAL_FIELDS:
        return exp.DataType.build("TINYINT")
    return exp.DataType.build("INT")


def _registry_types() -> dict:
    """A fixed result type, from Spark's registry (spark_returns.py), for the functions sqlglot
    models as a class of its own but does not type."""
    from sqlglot.dialects.dialect import Dialect

    named: list[tuple[type, str]] = [(cls, n.lower()) for cls in exp.ALL_FUNCTIONS for n in cls.sql_names()]
    for name, builder in Dialect.get_or_raise("spark").parser_class.FUNCTIONS.items():
        cls = getattr(builder, "__self__", None)      # Cls.from_arg_list: Spark's name for sqlglot's class
        if isinstance(cls, type) and issubclass(cls, exp.Func):
            named.append((cls, name.lower()))
    typed = {}
    for cls, name in named:
        if cls in SPARK_METADATA or cls in typed or cls is exp.Anonymous or name not in SPARK_RETURNS:
            continue
        typed[cls] = {"returns": exp.DataType.build(SPARK_RETURNS[name], dialect="spark")}
    return typed


SPARK_METADATA.update(_registry_types())


def _timestamp_like(arg: exp.DataType | None) -> exp.DataType | None:
    """timestampadd's type: TIMESTAMP_NTZ stays so, anything else (DATE included) is TIMESTAMP."""
    if arg is None:
        return None
    return arg if arg.sql(dialect="spark").upper() == "TIMESTAMP_NTZ" else exp.DataType.build("TIMESTAMP")


def _struct_of(schema: exp.Expression | None) -> exp.DataType | None:
    """from_json's type: the one type its schema names (`array<int>`, `struct<a:int>`), or the
    STRUCT of its DDL column list (`a INT, b STRING`)."""
    if not isinstance(schema, exp.Literal) or not schema.is_string:
        return None
    text = schema.this.strip()
    try:
        if re.match(r"(struct|array|map)\s*<", text, re.I):
            return exp.DataType.build(text, dialect="spark")
        return exp.DataType.build(f"STRUCT<{text}>", dialect="spark")
    except Exception:    # noqa: BLE001 - a schema sqlglot cannot read: unknown type
        return None
