"""sqlglot's Spark parser, taught the few pieces of Spark's own grammar it lacks.

Each difference below is a query Spark's parser accepts that sqlglot refuses, found by Spark's
golden SQL tests (tests/sql/golden): a multi-unit interval whose parts carry a sign
(`INTERVAL -1 DAY 1 HOUR -1 MINUTE`), `TABLE t` as a query of a set operation, an aggregate of
several arguments after DISTINCT (`corr(DISTINCT x, y)`), and `first_value(x, false)` /
`any_value(x, false)` (sqlglot reads only `true` as the ignore-nulls flag), and the casts
`bigint(x)`, `smallint(x)`, `tinyint(x)`, `binary(x)`, `decimal(x)`, a PIVOT whose aggregates are
expressions (`ceil(sum(x)), avg(x) + 1 AS a1`), Hive's `FROM t MAP a, b USING 'cat'` (Spark's
other spelling of `SELECT TRANSFORM(a, b) USING 'cat'`), and `count(*) FROM from t` (a FROM right
before another FROM is the alias of the item before it). Unary `+` (which sqlglot drops) is kept
as UnaryPlus: Spark names `+x` `(+ x)`. Only parsing differs:
the trees are the ones sqlglot's Spark dialect builds, so everything downstream reads them alike.
"""
from __future__ import annotations

from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.parsers.spark import SparkParser
from sqlglot.tokens import Token, TokenType

from dslc.compiler.sparksql.spark_names import SparkNamer  # it names PIVOT's columns
from dslc.compiler.sparksql.spark_nodes import MULTI_UNIT, NearestBy, UnaryPlus

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


def _hive_script_clauses(tokens: list[Token]) -> list[Token]:
    """`MAP a, b USING 'cat'` / `REDUCE a, b USING 'cat'` after a FROM clause, as the tokens of
    `SELECT TRANSFORM(a, b) USING 'cat'`; `FROM FROM` as an alias before FROM. The new tokens carry
    the positions of the word they stand for, so error carets stay right."""
    out: list[Token] = []
    depth, script_at = 0, None
    for i, token in enumerate(tokens):
        following = tokens[i + 1] if i + 1 < len(tokens) else None
        if token.token_type == TokenType.FROM and following is not None and following.token_type == TokenType.FROM:
            out.append(Token(TokenType.VAR, token.text, token.line, token.col, token.start, token.end, token.comments))
            continue
        if token.token_type in (TokenType.L_PAREN, TokenType.L_BRACKET):
            depth += 1
        elif token.token_type in (TokenType.R_PAREN, TokenType.R_BRACKET):
            depth -= 1
        if script_at is None and token.text.upper() in ("MAP", "REDUCE") and out \
                and _opens_script(tokens, i, depth):
            script_at = depth
            out += [Token(kind, text, token.line, token.col, token.start, token.end, token.comments)
                    for kind, text in ((TokenType.SELECT, "SELECT"), (TokenType.VAR, "TRANSFORM"),
                                       (TokenType.L_PAREN, "("))]
            continue
        if script_at is not None and depth == script_at and token.token_type == TokenType.USING:
            out.append(Token(TokenType.R_PAREN, ")", token.line, token.col, token.start, token.start))
            script_at = None
        out.append(token)
    return out


def _opens_script(tokens: list[Token], at: int, depth: int) -> bool:
    """True when the MAP/REDUCE at `at` starts a script clause: not a call or type (`map(...)`,
    `MAP<...>`), and a USING follows at the same depth."""
    following = tokens[at + 1] if at + 1 < len(tokens) else None
    if following is None or following.token_type in (TokenType.L_PAREN, TokenType.LT, TokenType.DOT, TokenType.COMMA):
        return False
    level = depth
    for token in tokens[at + 1:]:
        if token.token_type in (TokenType.L_PAREN, TokenType.L_BRACKET):
            level += 1
        elif token.token_type in (TokenType.R_PAREN, TokenType.R_BRACKET):
            level -= 1
            if level < depth:
                return False
        elif level == depth and token.token_type == TokenType.USING:
            return True
        elif level == depth and token.token_type in (TokenType.SELECT, TokenType.FROM, TokenType.WHERE):
            return False
    return False


class SparkSqlParser(SparkParser):
    FUNCTIONS = {**SparkParser.FUNCTIONS, **{name: _with_nulls_flag(cls) for name, cls in _WITH_NULLS_FLAG.items()},
                 **{name: _type_function(text) for name, text in _TYPE_FUNCTIONS.items()}}
    UNARY_PARSERS = {**SparkParser.UNARY_PARSERS,
                     TokenType.PLUS: lambda self: self.expression(UnaryPlus(this=self._parse_unary()))}
    # Spark has no `x FOR y IN z` comprehension; without it `sum(x) FOR c IN (...)` stays PIVOT's.
    RANGE_PARSERS = {token: parse for token, parse in SparkParser.RANGE_PARSERS.items() if token != TokenType.FOR}

    def parse(self, raw_tokens, sql=None):
        return super().parse(_hive_script_clauses(raw_tokens), sql)

    def _parse_pivot_aggregation(self):
        """Spark's PIVOT takes any expression of aggregates (`ceil(sum(x)), avg(x) + 1 AS a1`),
        sqlglot only a call."""
        return self._parse_alias(self._parse_assignment())

    def _pivot_column_names(self, aggregations):
        """Each unaliased PIVOT aggregate is named as Spark names the column (`CEIL(sum(x))`); one
        aggregate alone adds no name to the pivot values."""
        if len(aggregations) == 1:
            return []
        return [agg.alias if isinstance(agg, exp.Alias) else SparkNamer(self.sql or "", agg).name(agg)
                for agg in aggregations]

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

    def _nearest_follows(self) -> bool:
        """`APPROX NEAREST` or `EXACT NEAREST` next: Spark's nearest-by clause (neither word is then
        the right side's alias, as in `JOIN docs APPROX NEAREST 3 BY ...`)."""
        return self._curr is not None and self._next is not None and self._curr.text.upper() in ("APPROX", "EXACT") \
            and self._next.text.upper() == "NEAREST"

    def _parse_table_alias(self, alias_tokens=None):
        return None if self._nearest_follows() else super()._parse_table_alias(alias_tokens)

    def _parse_join(self, skip_join_token=False, parse_bracket=False, alias_tokens=None):
        """Spark 4.2's `JOIN r (APPROX | EXACT) NEAREST [k] BY (DISTANCE | SIMILARITY) ranking`,
        where an ON or USING would stand (SqlBaseParser.g4's nearestByClause)."""
        first = self._curr
        join = super()._parse_join(skip_join_token=skip_join_token, parse_bracket=parse_bracket,
                                   alias_tokens=alias_tokens)
        if join is None or join.args.get("using") or not self._nearest_follows():
            return join
        if join.args.get("on") is not None:
            if self._prev.text.upper() == "TRUE" or not join.args["on"] == exp.true():
                return join       # `ON ... APPROX NEAREST`: Spark's syntax error, and sqlglot's
            join.set("on", None)  # the ON TRUE sqlglot's Spark adds to a join without one
        approximate = self._curr.text.upper() == "APPROX"
        start = self._curr
        self._advance(2)
        count = None
        if self._curr is not None and self._curr.token_type == TokenType.NUMBER:
            number = self._curr
            count = self.expression(exp.Literal.number(number.text))
            count.meta.update(line=number.line, col=number.col, start=number.start, end=number.end)
            self._advance()
        if not self._match_text_seq("BY"):
            self.raise_error("Expecting BY")
        if not self._match_texts(("DISTANCE", "SIMILARITY")):
            self.raise_error("Expecting DISTANCE or SIMILARITY")
        similarity = self._prev.text.upper() == "SIMILARITY"
        nearest = self.expression(NearestBy(this=self._parse_disjunction(), count=count, approximate=approximate,
                                            similarity=similarity))
        nearest.meta.update(line=start.line, col=start.col, start=start.start, end=self._prev.end,
                            join_start=first.start if first is not None else start.start)
        join.set("nearest", nearest)
        return join

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

    class Generator(Spark.Generator):
        TRANSFORMS = {**Spark.Generator.TRANSFORMS, UnaryPlus: lambda self, e: f"(+{self.sql(e, 'this')})",
                      NearestBy: lambda self, e: _nearest_sql(self, e)}


def _nearest_sql(generator, expression: exp.Nearest) -> str:
    """Spark's words: APPROX or EXACT, k only when written."""
    return " ".join(part for part in (
        "APPROX" if expression.args.get("approximate") else "EXACT", "NEAREST", generator.sql(expression, "count"),
        "BY", "SIMILARITY" if expression.args.get("similarity") else "DISTANCE", generator.sql(expression, "this"))
        if part)


SPARK_SQL = SparkSql()
