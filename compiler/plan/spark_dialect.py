"""sqlglot's Spark parser, taught the few pieces of Spark's own grammar it lacks.

Each difference below is a query Spark's parser accepts that sqlglot refuses, found by Spark's
golden SQL tests (tests/sql/golden): a multi-unit interval whose parts carry a sign
(`INTERVAL -1 DAY 1 HOUR -1 MINUTE`), `TABLE t` as a query of a set operation, an aggregate of
several arguments after DISTINCT (`corr(DISTINCT x, y)`), and `first_value(x, false)` /
`any_value(x, false)` (sqlglot reads only `true` as the ignore-nulls flag), and the casts
`bigint(x)`, `smallint(x)`, `tinyint(x)`, `binary(x)`, `decimal(x)`. Only parsing differs:
the trees are the ones sqlglot's Spark dialect builds, so everything downstream reads them alike.
"""
from __future__ import annotations

from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.parsers.spark import SparkParser
from sqlglot.tokens import TokenType

MULTI_UNIT = "multi_unit_interval"
_WITH_NULLS_FLAG = {"ANY_VALUE": exp.AnyValue, "FIRST": exp.First, "FIRST_VALUE": exp.FirstValue,
                    "LAST": exp.Last, "LAST_VALUE": exp.LastValue}


def _with_nulls_flag(cls: type[exp.Expression]):
    """`f(x, true)` ignores NULLs, `f(x, false)` respects them (Spark's default), any other flag
    stays a call Spark checks itself."""
    def build(args: list[exp.Expression]) -> exp.Expression:
        if len(args) < 2:
            return cls(this=args[0] if args else None)
        flag = args[1]
        if isinstance(flag, exp.Boolean):
            node = cls(this=args[0])
            return exp.IgnoreNulls(this=node) if flag.this else exp.RespectNulls(this=node)
        return exp.Anonymous(this=cls.sql_names()[0].lower() if cls.sql_names() else cls.__name__.lower(),
                             expressions=args)
    return build


def _type_function(type_text: str):
    """`bigint(x)`, `binary(x)`, ...: Spark's cast by a function named after the type (sqlglot knows
    only some of them: int, double, date, ...)."""
    def build(args: list[exp.Expression]) -> exp.Expression:
        if len(args) != 1:
            return exp.Anonymous(this=type_text.split("(")[0].lower(), expressions=args)
        return exp.Cast(this=args[0], to=exp.DataType.build(type_text, dialect="spark"))
    return build


_TYPE_FUNCTIONS = {"TINYINT": "TINYINT", "SMALLINT": "SMALLINT", "BIGINT": "BIGINT", "BINARY": "BINARY",
                   "DECIMAL": "DECIMAL(10, 0)"}


class SparkSqlParser(SparkParser):
    FUNCTIONS = {**SparkParser.FUNCTIONS, **{name: _with_nulls_flag(cls) for name, cls in _WITH_NULLS_FLAG.items()},
                 **{name: _type_function(text) for name, text in _TYPE_FUNCTIONS.items()}}

    def validate_expression(self, expression, args=None):
        """`corr(DISTINCT x, y)`: sqlglot's two-argument aggregates take DISTINCT's list as one
        argument; keep such a call by its name, with its arguments as written."""
        if isinstance(expression, exp.Func) and args and len(args) == 1 and isinstance(args[0], exp.Distinct) \
                and len(args[0].expressions) > 1 and not isinstance(expression, exp.Anonymous):
            names = expression.sql_names()
            expression = exp.Anonymous(this=(names[0] if names else type(expression).__name__).lower(),
                                       expressions=[args[0]])
            args = None
        return super().validate_expression(expression, args)

    def _parse_interval(self, require_interval: bool = True, parse_function_unit: bool = True):
        """Spark's `INTERVAL 1 DAY -1 HOUR`: every part of a multi-unit interval may have a sign."""
        interval = super()._parse_interval(require_interval, parse_function_unit)
        if interval is not None and self._signed_unit_follows():
            interval = self.expression(exp.Add(this=interval, expression=self._parse_interval(
                False, parse_function_unit=parse_function_unit)))
        if isinstance(interval, exp.Add):
            interval.meta[MULTI_UNIT] = True      # one literal of several units: Spark folds it into one value
        return interval

    def _signed_unit_follows(self) -> bool:
        tokens = self._tokens[self._index:self._index + 3]
        return len(tokens) == 3 and tokens[0].token_type in (TokenType.DASH, TokenType.PLUS) \
            and tokens[1].token_type == TokenType.NUMBER \
            and tokens[2].text.upper() in self.dialect.VALID_INTERVAL_UNITS

    def _parse_select(self, nested=False, table=False, parse_subquery_alias=True, parse_set_operation=True,
                      consume_pipe=True):
        """`... UNION ALL TABLE t`: Spark's `TABLE t` is `SELECT * FROM t`, also inside a set operation."""
        if nested and self._curr is not None and self._curr.token_type == TokenType.TABLE \
                and self._next is not None and self._next.token_type in (TokenType.VAR, TokenType.IDENTIFIER):
            self._advance()
            return exp.select("*").from_(self._parse_table_parts())
        return super()._parse_select(nested=nested, table=table, parse_subquery_alias=parse_subquery_alias,
                                     parse_set_operation=parse_set_operation, consume_pipe=consume_pipe)


class SparkSql(Spark):
    """Spark's dialect with SparkSqlParser (generation and typing are sqlglot's Spark)."""

    Parser = SparkSqlParser


SPARK_SQL = SparkSql()
