"""Spark's names for unaliased select items: `count(1)`, `sum(x)`, `(a + b)`, `CAST((a + 1) AS STRING)`.

Spark's analyzer names such a column by printing the resolved expression (`toPrettySQL`): column
references without their qualifier, string literals without quotes, binary operators in
parentheses, functions by the name they were called with and with the defaults Spark fills in
(`round(x)` is `round(x, 0)`), windows with their full frame. The written query is printed the
same way here, from sqlglot's tree and the source text (for the function names as written), so
that later statements can refer to such a column by Spark's name. The conformance corpus in
tests/sql/ compares these names with Spark's own.
"""
from __future__ import annotations

import decimal
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from sqlglot import exp

from dslc.compiler.sparksql.arity import written_arguments
from dslc.compiler.sparksql.spark_calls import ARITIES, PRINTED_NAMES
from dslc.compiler.sparksql.spark_calls import DEFAULT_ARGUMENTS as _REGISTRY_DEFAULTS
from dslc.compiler.sparksql.spark_intervals import literal_value, multi_unit_parts, multi_unit_value
from dslc.compiler.sparksql.spark_nodes import UnaryPlus
from dslc.compiler.sparksql.spark_vectors import VECTOR_DEFAULT_ARGUMENTS

_BINARY = {exp.Add: "+", exp.Sub: "-", exp.Mul: "*", exp.Div: "/", exp.Mod: "%", exp.IntDiv: "div",
           exp.EQ: "=", exp.GT: ">", exp.GTE: ">=", exp.LT: "<", exp.LTE: "<=", exp.And: "AND",
           exp.Or: "OR", exp.BitwiseAnd: "&", exp.BitwiseOr: "|", exp.BitwiseXor: "^",
           exp.NullSafeEQ: "<=>"}

# Functions whose printed name is not the name they were called with.
_RENAMED = {"ceil": "CEIL", "floor": "FLOOR", "power": "POWER", "array_agg": "collect_list",
            "dateadd": "date_add", "rank": "RANK", "dense_rank": "DENSE_RANK",
            "percent_rank": "PERCENT_RANK", "current_date": "current_date",
            "current_timestamp": "current_timestamp", "isnull": "isnull"}

# Arguments Spark fills in when they are left out: name → (count written, defaults appended).
_DEFAULTS = {"round": (1, ("0",)), "bround": (1, ("0",)), "split": (2, ("-1",)), "locate": (2, ("1",)),
             "unix_timestamp": (1, ("yyyy-MM-dd HH:mm:ss",)), "from_unixtime": (1, ("yyyy-MM-dd HH:mm:ss",)),
             "regexp_replace": (3, ("1",)), "sort_array": (1, ("true",)),
             "substr": (2, ("2147483647",)), "substring": (2, ("2147483647",)),
             "percentile_approx": (2, ("10000",)), "approx_percentile": (2, ("10000",)), "replace": (2, ("",))}

# Functions Spark names by their first argument alone (the schema and options are not printed).
_FIRST_ARGUMENT_ONLY = frozenset({"from_json", "from_csv", "to_json", "to_csv", "schema_of_json", "schema_of_csv"})

# Functions named after a type (`double('1')`): Spark builds a cast it does not print.
_TYPE_FUNCTIONS = frozenset({"boolean", "tinyint", "smallint", "int", "bigint", "float", "double", "decimal",
                             "string", "binary", "date", "timestamp"})

_GENERATORS = ("explode", "explode_outer", "posexplode", "posexplode_outer", "inline", "inline_outer",
               "json_tuple", "stack")
_RANKING = (exp.Rank, exp.DenseRank, exp.PercentRank, exp.RowNumber, exp.Ntile)

# Nodes Spark prints by one template: {this}, {left}, {right}, {expression}, {low}, {high} are
# those children as Spark prints them, {expressions} the list of children, {name} the node's
# name, {outer} the outer columns a subquery refers to.
_TEMPLATES: dict[type[exp.Expression], str] = {
    UnaryPlus: "(+ {this})",
    exp.Paren: "{this}",
    exp.Dot: "{this}.{name}",
    exp.Null: "NULL",
    exp.Star: "1",                                  # count(*) is count(1)
    exp.BitwiseNot: "~{this}",
    exp.NEQ: "(NOT ({left} = {right}))",
    exp.Is: "({this} IS NULL)",
    exp.DPipe: "concat({left}, {right})",
    exp.Like: "{this} LIKE {expression}",
    exp.ILike: "ilike({this}, {expression})",
    exp.RegexpLike: "RLIKE({this}, {expression})",
    exp.Between: "between({this}, {low}, {high})",
    exp.Subquery: "scalarsubquery({outer})",
    exp.Exists: "exists({outer})",
    exp.IgnoreNulls: "{this}",
    exp.RespectNulls: "{this}",
    exp.Distinct: "DISTINCT {expressions}",
}

_ARGS = {"left": "this", "right": "expression"}
_CALL_OPENING = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*\(\s*[-+]?\s*$")     # int(-1): a sign may lead


def _registered(table: dict[type, str], node: exp.Expression) -> str | None:
    """The entry of `node`'s type, or of its nearest base class that has one."""
    return next((table[k] for k in type(node).__mro__ if k in table), None)


class _Children(dict):
    """A node's parts by template name, printed when a template asks for them."""

    def __init__(self, namer: SparkNamer, node: exp.Expression):
        super().__init__()
        self.namer, self.node = namer, node

    def __missing__(self, key: str) -> str:
        if key == "expressions":
            return self.namer._list(self.node.expressions)
        if key == "name":
            return self.node.name
        if key == "outer":
            return self.namer._outer(self.node)
        return self.namer.sql(self.node.args[_ARGS.get(key, key)])


_BINARY_CALLS = frozenset({"unhex", "binary", "to_binary", "try_to_binary", "aes_encrypt", "aes_decrypt", "unbase64"})


def _binary_valued(node: exp.Expression | None) -> bool:
    """A value that is certainly a BINARY by its writing: X'..', a cast to BINARY, unhex(...)."""
    if isinstance(node, exp.HexString):
        return True
    if isinstance(node, (exp.Cast, exp.TryCast)):
        return node.to.is_type(exp.DataType.Type.BINARY, exp.DataType.Type.VARBINARY)
    if isinstance(node, exp.Unhex):
        return True
    return isinstance(node, exp.Anonymous) and node.name.lower() in _BINARY_CALLS


class SparkNamer:
    """Prints expressions of one query the way Spark names them."""

    def __init__(self, text: str, tree: exp.Expression, columns: Mapping[str, frozenset[str]] | None = None):
        self.text = text
        self.columns = columns or {}        # relation (lower case) -> its column names (lower case)
        self.relations = {t.alias_or_name.lower() for t in tree.find_all(exp.Table)} | \
                         {s.alias.lower() for s in tree.find_all(exp.Subquery) if s.alias} | \
                         {c.alias.lower() for c in tree.find_all(exp.CTE)}
        self.lambda_vars: list[set[str]] = []

    # ---- the name of a select item
    def name(self, item: exp.Expression) -> str:
        """The column name Spark gives an unaliased select item."""
        if isinstance(item, exp.Column):
            return item.name
        if isinstance(item, exp.Dot):
            return item.name
        if isinstance(item, (exp.Cast, exp.TryCast)) and self._cast_written(item) \
                and isinstance(item.this, exp.Column) and self._is_attribute(item.this) \
                and self._called_name(item) in (None, "cast", "try_cast"):
            return item.this.name       # CAST(x AS T) keeps the name of the column x
        if isinstance(item, exp.Anonymous) and item.name.lower() in ("window", "session_window"):
            return item.name.lower()
        return self.sql(item)

    # ---- printing
    def sql(self, node: exp.Expression) -> str:
        """`node` as Spark prints it in a name: by its type's template, else by the printer of its
        type or of the nearest base class that has one (`_PRINTERS`; a printer may decline with
        None, and the next one along the class hierarchy prints the node), else as sqlglot's Spark
        SQL. sqlglot's generator dispatches the same way, on the node's type."""
        template = _registered(_TEMPLATES, node)
        if template is not None:
            return template.format_map(_Children(self, node))
        for kind in type(node).__mro__:
            printer = _PRINTERS.get(kind)
            printed = printer(self, node) if printer is not None else None
            if printed is not None:
                return printed
        return node.sql(dialect="spark")

    def _unwrapped(self, node: exp.Func) -> str | None:
        """sqlglot's own wrapper, which Spark does not print: year(ts) is Year(TsOrDsToDate(ts))."""
        if node.meta.get("start") is None and _first_position(node.this) is not None \
                and self._written_call(node.this):
            return self.sql(node.this)
        return None

    def _boolean(self, node: exp.Boolean) -> str:
        return "true" if node.this else "false"

    def _hex_string(self, node: exp.HexString) -> str:
        return f"X'{node.this.upper()}'"

    def _neg(self, node: exp.Neg) -> str:
        if isinstance(node.this, exp.Literal) and not node.this.is_string:
            return "-" + self._literal(node.this)
        if isinstance(node.this, (exp.Cast, exp.TryCast)) and self._cast(node.this)[:1].isdigit():
            return "-" + self._cast(node.this)      # -4e36BD, a negative decimal literal
        return f"(- {self.sql(node.this)})"

    def _not(self, node: exp.Not) -> str:
        if isinstance(node.this, exp.Is):      # a IS NOT NULL (NOT (a IS NULL) keeps its NOT)
            return f"({self.sql(node.this.this)} IS NOT NULL)"
        inner = node.this.unnest() if isinstance(node.this, exp.Paren) else node.this
        return f"(NOT {self.sql(inner)})"

    def _any(self, node: exp.Any) -> str | None:
        if isinstance(node.this.unnest(), exp.Query):
            return None
        return f"{self._called_name(node) or 'any'}({self.sql(node.this.unnest())})"

    def _struct_field(self, node: exp.PropertyEQ) -> str | None:
        if not isinstance(node.parent, exp.Struct):
            return None
        value = self.sql(node.expression)
        if self._function_name(node.parent) == "named_struct":
            return f"{node.this.name}, {value}"      # named_struct('a', 1) is named_struct(a, 1)
        implicit = isinstance(node.expression, exp.Column) and \
            node.this.meta.get("start") in (None, _first_position(node.expression))
        return value if implicit else f"{value} AS {node.this.name}"

    def _add(self, node: exp.Add) -> str | None:
        parts = multi_unit_parts(node)
        value = multi_unit_value(parts) if parts else None
        if value is not None:
            return value.sql()          # INTERVAL 1 YEAR 2 MONTHS is one literal to Spark
        if any(isinstance(side, exp.Null) for side in (node.left, node.right)):
            stamp = next((side for side in (node.left, node.right) if self._timestamp_literal(side)), None)
            if stamp is not None:                       # the NULL is an interval added to a timestamp
                return f"{self.sql(stamp)} + NULL"
        return self._interval_arithmetic(node)

    def _interval_arithmetic(self, node: exp.Add | exp.Sub) -> str | None:
        op = "+" if isinstance(node, exp.Add) else "-"
        sides = (node.left, node.right)
        if all(isinstance(side, (exp.Interval, exp.Null)) for side in sides):
            return f"({self.sql(node.left)} {op} {self.sql(node.right)})"
        if any(isinstance(side, exp.Interval) for side in sides):
            return f"{self.sql(node.left)} {op} {self.sql(node.right)}"
        return self._binary(node)

    def _mul(self, node: exp.Mul) -> str | None:
        if isinstance(node.right, exp.Interval) and not isinstance(node.left, exp.Interval):
            return f"({self.sql(node.right)} * {self.sql(node.left)})"    # Spark: interval * number
        return self._binary(node)

    def _mod(self, node: exp.Mod) -> str | None:
        if self._called_name(node) == "mod":
            return f"mod({self.sql(node.left)}, {self.sql(node.right)})"
        return self._binary(node)

    def _binary(self, node: exp.Binary) -> str | None:
        operator = _BINARY.get(type(node))       # the operator's own type only, not one derived from it
        return None if operator is None else f"({self.sql(node.left)} {operator} {self.sql(node.right)})"

    def _within_group(self, node: exp.WithinGroup) -> str | None:
        if not isinstance(node.this, (exp.PercentileCont, exp.PercentileDisc)) \
                or not isinstance(node.expression, exp.Order) or len(node.expression.expressions) != 1:
            return None
        order = node.expression.expressions[0]
        name = "percentile_cont" if isinstance(node.this, exp.PercentileCont) else "percentile_disc"
        return (f"{name}({self.sql(node.this.this)}) WITHIN GROUP (ORDER BY {self.sql(order.this)}"
                f"{' DESC' if order.args.get('desc') else ''})")

    def _in(self, node: exp.In) -> str:
        if node.args.get("query") is not None:
            return f"({self.sql(node.this)} IN (listquery({self._outer(node.args['query'])})))"
        return f"({self.sql(node.this)} IN ({self._list(node.expressions)}))"

    def _if(self, node: exp.If) -> str:
        otherwise = node.args.get("false")
        parts = [node.this, node.args["true"]] + ([otherwise] if otherwise is not None else [])
        return f"(IF({self._list(parts)}))"

    def _escape(self, node: exp.Escape) -> str | None:
        return self.sql(node.this) if isinstance(node.this, exp.ILike) else None   # ilike(a, b), its escape unprinted

    def _filter(self, node: exp.Filter) -> str:
        return f"{self.sql(node.this)} FILTER (WHERE {self.sql(node.expression.this)})"

    def _extract(self, node: exp.Extract) -> str:
        start = _first_position(node.expression)
        found = re.search(r"(\w+)\s+FROM\s*$", self.text[:start], re.I) if start is not None else None
        field = found[1] if found else node.this.this if isinstance(node.this, exp.Literal) \
            else node.this.name.upper()     # as written: extract(d FROM c), extract('d', c)
        return f"extract({field} FROM {self.sql(node.expression)})"

    def _trim(self, node: exp.Trim) -> str | None:
        position = str(node.args.get("position") or "").upper()
        if node.expression is None:         # trim(x), ltrim(x), rtrim(x)
            name = {"LEADING": "ltrim", "TRAILING": "rtrim"}.get(position, "trim")
            return f"{name}({self.sql(node.this)})"
        if self._syntax_between(node.expression, node.this, "FROM"):
            return f"TRIM({position or 'BOTH'} {self.sql(node.expression)} FROM {self.sql(node.this)})"
        return None                         # trim(x, chars): printed as any other call

    def _str_position(self, node: exp.StrPosition) -> str:
        args = [node.args["substr"], node.this] + ([node.args["position"]] if node.args.get("position") else [])
        name = "position" if self._called_name(node) == "position" \
            and not self._syntax_between(node.args["substr"], node.this, "IN") else "locate"
        return f"{name}({self._list(args)}{'' if node.args.get('position') else ', 1'})"

    def _anonymous(self, node: exp.Anonymous) -> str | None:
        if node.name.lower() not in ("isnull", "isnotnull"):
            return None                     # any other call of a name sqlglot does not know
        return f"({self.sql(node.expressions[0])} IS {'NOT ' if node.name.lower() == 'isnotnull' else ''}NULL)"

    def _var_map(self, node: exp.VarMap) -> str:
        """map(k1, v1, k2, v2): sqlglot keeps keys and values apart."""
        pairs = [self.sql(part) for kv in zip(node.args["keys"].expressions, node.args["values"].expressions)
                 for part in kv]
        return f"map({', '.join(pairs)})"

    def _bracket(self, node: exp.Bracket) -> str:
        called = self._element_at(node)
        if called:
            return f"{called}({self.sql(node.this)}, {self._list(node.expressions)})"
        return f"{self.sql(node.this)}[{self._list(node.expressions)}]"

    def _identifier(self, node: exp.Identifier) -> str:
        if self.lambda_vars and node.name.lower() in self.lambda_vars[-1]:
            return "namedlambdavariable()"
        return node.name

    def _var(self, node: exp.Var) -> str:
        return node.name

    def _syntax_between(self, first: exp.Expression, second: exp.Expression, word: str) -> bool:
        """True when `word` (FROM, IN) is written between two arguments: SQL syntax, not commas."""
        start, end = _first_position(first), _first_position(second)
        if start is None or end is None or end <= start:
            return False
        return re.search(rf"\b{word}\b", self.text[start:end], re.I) is not None

    def _list(self, nodes: Iterable[exp.Expression]) -> str:
        return ", ".join(self.sql(n) for n in nodes)

    def _is_attribute(self, column: exp.Column) -> bool:
        """A column of a relation (`t.a`, `a`), not a struct field (`address.city`)."""
        return not column.table or column.table.lower() in self.relations

    def _column(self, column: exp.Column) -> str:
        if self.lambda_vars and not column.table and column.name.lower() in self.lambda_vars[-1]:
            return "namedlambdavariable()"
        parts = [p.name for p in column.parts]
        if column.table and column.table.lower() in self.relations and not column.args.get("db"):
            parts = parts[1:]
        elif column.args.get("db") and column.args["db"].name.lower() in self.relations:
            parts = parts[1:]
        if self.lambda_vars and parts[0].lower() in self.lambda_vars[-1]:
            parts[0] = "namedlambdavariable()"
        return ".".join(parts)

    def _literal(self, literal: exp.Literal) -> str:
        written = self._written(literal)
        if literal.is_string:
            if written and written[-2:].upper() == "BD":    # 3.0BD, a decimal literal
                return written[:-2]
            return literal.this
        text = literal.this
        if written and written[-1:].upper() in ("L", "S", "Y", "D", "F") and written[:-1] == text:
            return text
        if "e" in text.lower():
            return repr(float(text))
        if text.startswith("."):
            return "0" + text
        if text.isdigit() and len(text) > 1 and text.startswith("0"):
            return str(int(text))       # 07 is the integer 7
        return text

    def _written_call(self, argument: exp.Expression) -> bool:
        """True when the text before `argument` opens an outer call, not a to_date( of its own."""
        before = self.text[:_first_position(argument)].rstrip()
        return not before.lower().endswith(("to_date(", "to_timestamp("))

    def _written(self, node: exp.Expression) -> str | None:
        if node.meta.get("start") is None:
            return None
        return self.text[node.meta["start"]:node.meta["end"] + 1]

    def _interval(self, node: exp.Interval) -> str:
        value = literal_value(node)
        if value is not None:
            return value.sql()
        unit = node.args.get("unit")
        if isinstance(unit, exp.IntervalSpan):
            unit_text = f"{unit.this.name.upper()} TO {unit.expression.name.upper()}"
        else:
            unit_text = unit.name.upper() if unit is not None else ""
        value = node.this.name if node.this is not None else ""
        return f"INTERVAL '{value}' {unit_text}".strip()

    def _cast_written(self, node: exp.Cast) -> bool:
        """True for CAST(...)/TRY_CAST(...)/x::T; False for a typed literal (DATE '...', 2L)."""
        child = node.this
        start = _first_position(child)
        if start is None:
            return True
        before = self.text[:start].rstrip()
        if isinstance(child, exp.Literal) and not before.endswith("(") and \
                before.upper().endswith(("DATE", "TIMESTAMP", "TIMESTAMP_NTZ", "TIMESTAMP_LTZ")):
            return False
        if isinstance(child, exp.Literal) and self._written(child) and self._written(child)[-1:].isalpha():
            return False
        return True

    def _cast(self, node: exp.Cast) -> str:
        if isinstance(node.this, exp.Literal) and node.to.is_type(exp.DataType.Type.DECIMAL) \
                and re.fullmatch(r"[0-9.]+(e[+-]?[0-9]+)?", node.this.this, re.I) and re.search(rf"(?<![\w.]){re.escape(node.this.this)}BD\b", self.text, re.I):
            return format(decimal.Decimal(node.this.this), "f")    # 5e36BD, a decimal literal
        if not self._cast_written(node):
            if isinstance(node.this, exp.Literal) and node.this.is_string \
                    and not (self._written(node.this) or "")[-2:].upper() == "BD":
                found = re.search(r"([A-Za-z_]+)\s*$", self.text[:_first_position(node.this)])
                word = found[1].upper() if found else node.to.sql(dialect="spark")
                word = "TIMESTAMP" if word == "TIMESTAMP_LTZ" else word
                return f"{word} '{datetime_literal(word, node.this.this)}'"
            return self._literal(node.this)
        if node.to.is_type(exp.DataType.Type.ARRAY) \
                and (isinstance(node.this, exp.Null) or isinstance(node.this, exp.Array) and not node.this.expressions):
            return self.sql(node.this)      # Spark names CAST(NULL AS ARRAY<STRING>) NULL, CAST(array() AS ...) array()
        called = self._called_name(node)
        if called in _TYPE_FUNCTIONS and not isinstance(node, exp.TryCast):
            return self.sql(node.this)      # double(x) is a cast Spark did not see written: it prints x
        if called in ("to_timestamp", "to_date"):
            return f"{called}({self.sql(node.this)})"     # a call sqlglot reads as a CAST
        to = node.to.sql(dialect="spark").replace(", ", ",")
        word = "TRY_CAST" if isinstance(node, exp.TryCast) and self._try_cast_written(node) else "CAST"
        return f"{word}({self.sql(node.this)} AS {to})"

    def _timestamp_literal(self, node: exp.Expression) -> bool:
        """TIMESTAMP '...' / TIMESTAMP_NTZ '...' (a typed literal, not a CAST written as one)."""
        return isinstance(node, exp.Cast) and isinstance(node.this, exp.Literal) and node.this.is_string \
            and node.to.this in (exp.DataType.Type.TIMESTAMP, exp.DataType.Type.TIMESTAMPTZ,
                                 exp.DataType.Type.TIMESTAMPLTZ, exp.DataType.Type.TIMESTAMPNTZ) \
            and not self._cast_written(node)

    def _try_cast_written(self, node: exp.TryCast) -> bool:
        start = _first_position(node.this)
        return start is not None and self.text[:start].rstrip().rstrip("(").rstrip().upper().endswith("TRY_CAST")

    def _case(self, node: exp.Case) -> str:
        operand = node.this
        parts = ["CASE"]
        for branch in node.args.get("ifs") or []:
            condition = self.sql(branch.this)
            if operand is not None:
                condition = f"({self.sql(operand)} = {condition})"
            parts.append(f"WHEN {condition} THEN {self.sql(branch.args['true'])}")
        if node.args.get("default") is not None:
            parts.append(f"ELSE {self.sql(node.args['default'])}")
        parts.append("END")
        return " ".join(parts)

    def _outer(self, node: exp.Expression) -> str:
        """The outer columns a subquery refers to, as Spark lists them in its name."""
        inner = {t.alias_or_name.lower() for t in node.find_all(exp.Table)}
        outer = [c for c in node.find_all(exp.Column) if c.table and c.table.lower() not in inner
                 and c.table.lower() in self.relations]
        if not self.columns:
            return ", ".join(dict.fromkeys(c.name for c in outer))
        tables = list(node.find_all(exp.Table))
        if any(t.name.lower() not in self.columns for t in tables):
            return ", ".join(dict.fromkeys(c.name for c in outer))
        own = set().union(*[self.columns[t.name.lower()] for t in tables]) if tables else set()
        own |= {a.alias.lower() for a in node.find_all(exp.Alias)} | \
               {c.name.lower() for alias in node.find_all(exp.TableAlias) for c in alias.columns} | \
               {v.name.lower() for lam in node.find_all(exp.Lambda) for v in lam.expressions}
        around = set().union(*self.columns.values())
        unqualified = [c for c in node.find_all(exp.Column) if not c.table and not isinstance(c.this, exp.Star)
                       and c.name.lower() not in own and c.name.lower() in around]
        found = sorted(outer + unqualified, key=lambda c: _first_position(c) or 0)
        return ", ".join(c.name for c in found)       # every reference, in the order written

    def _lambda(self, node: exp.Lambda) -> str:
        names = {v.name.lower() for v in node.expressions}
        self.lambda_vars.append(names | (self.lambda_vars[-1] if self.lambda_vars else set()))
        try:
            body = self.sql(node.this)
        finally:
            self.lambda_vars.pop()
        return f"lambdafunction({body}, {', '.join('namedlambdavariable()' for _ in node.expressions)})"

    def _function(self, node: exp.Func) -> str:
        name = self._function_name(node)
        written_args = self._written_arguments(node)
        args = self._format_as_written(node, self._printed_arguments(node, name), written_args)
        if name in ("lpad", "rpad") and len(args) == 2 and _binary_valued(node.this):
            args.append("X'00'")                  # a BINARY is padded with zero bytes, not spaces
        if name in ("CEIL", "FLOOR") and len(args) == 2:
            name = name.lower()                   # CEIL(x), but ceil(x, scale)
        name, args = self._timestamp_call(node, name, args, written_args)
        if name == "aggregate" and len(args) == 3:
            args.append("lambdafunction(namedlambdavariable(), namedlambdavariable())")
        written, defaults = _DEFAULTS.get(name, (None, ()))
        if written is not None and len(args) == written:
            args += list(defaults)
        elif not isinstance(node, exp.Trim):
            if name == "log" and len(args) == 1:
                args = ["E()"] + args           # log(x) is Spark's Logarithm(E(), x)
            args += registry_defaults(name, len(args))
            name = PRINTED_NAMES.get(name, name)
        return f"{name}({', '.join(args)})"

    def _printed_arguments(self, node: exp.Func, name: str) -> list[str]:
        """The arguments Spark prints in a call's name, before the defaults it adds."""
        args = self._arguments(node)
        if isinstance(node, exp.Count) and node.this is None and not args:
            return ["1"]
        if name in ("first", "last", "first_value", "last_value") and len(args) > 1:
            return args[:1]
        if name in _FIRST_ARGUMENT_ONLY:
            return args[:1]
        if name == "date_sub" and isinstance(node.expression, exp.Mul) and node.expression.meta.get("start") is None:
            return [self.sql(node.this), self.sql(node.expression.this)]    # sqlglot: date_add(d, x * -1)
        return args

    def _format_as_written(self, node: exp.Func, args: list[str], written_args: list[str] | None) -> list[str]:
        """A datetime pattern as written: sqlglot turned it into strftime's."""
        fmt = node.args.get("format")
        if written_args and len(written_args) == len(args) and isinstance(fmt, exp.Literal) and fmt.is_string:
            last = written_args[-1].strip()
            if last[:1] in "'\"" and last[-1:] == last[:1]:
                args[-1] = last[1:-1]
        return args

    def _timestamp_call(self, node: exp.Func, name: str, args: list[str],
                        written_args: list[str] | None) -> tuple[str, list[str]]:
        """dateadd(unit, n, ts) is Spark's timestampadd, datediff(unit, a, b) its timestampdiff;
        sqlglot keeps (timestamp, amount) and (end, start), Spark prints them as written."""
        unit = node.args.get("unit")
        if not isinstance(unit, exp.Var):
            return name, args
        if written_args and len(written_args) == 3:
            name = {"dateadd": "timestampadd", "date_add": "timestampadd", "datediff": "timestampdiff",
                    "date_diff": "timestampdiff"}.get(name, name)
        if name in ("timestampadd", "timestampdiff"):
            args = [unit.name.upper()] + [self.sql(c) for c in (node.args.get("expression"), node.this) if c is not None]
        return name, args

    def _written_arguments(self, node: exp.Expression) -> list[str] | None:
        """The text of each argument of a call as written (top-level commas of its parentheses)."""
        if node.meta.get("end") is not None:          # the call's name is where sqlglot put it
            opening = self.text.find("(", node.meta["end"] + 1)
            if opening < 0 or self.text[node.meta["end"] + 1:opening].strip():
                return None
        else:
            first = min((p for p in (_first_position(c) for c in node.iter_expressions()) if p is not None),
                        default=None)
            opening = self.text.rfind("(", 0, first) if first is not None else -1
            if opening < 0 or self.text[opening + 1:first].strip():
                return None
        parts = written_arguments(self.text, opening)
        return [""] if parts == [] else parts     # `f()`: one empty argument, as the namer counts it

    def _element_at(self, node: exp.Bracket) -> str | None:
        """element_at / try_element_at when the subscript was written as that call (sqlglot reads
        both as `x[i]`)."""
        written = (self._written(node) or "").lower()
        if written in ("element_at", "try_element_at"):
            return written
        first = _first_position(node)
        if first is None:
            return None
        found = re.search(r"\b(try_element_at|element_at)\s*\(\s*(?:[A-Za-z_]\w*\s*\(\s*)*$",
                          self.text[max(0, first - 200):first], re.I)
        return found[1].lower() if found else None

    def _called_name(self, node: exp.Expression) -> str | None:
        """The name a call was written with, read from the text before its first argument (sqlglot
        keeps no position for some calls: `substr(...)` becomes a Substring without one)."""
        first = min((p for p in (_first_position(c) for c in node.iter_expressions()) if p is not None),
                    default=None)
        if first is None:
            return None
        match = _CALL_OPENING.search(self.text, max(0, first - 100), first)   # a window: linear time
        return match[1].lower() if match else None

    def _function_name(self, node: exp.Func) -> str:
        written = self._written(node)
        called = None if written else self._called_name(node)
        if written and written.replace("_", "").isalnum():
            name = written.lower()
        elif called and not isinstance(node, exp.Anonymous):
            name = called
        elif isinstance(node, exp.Anonymous):
            name = node.name.lower()
        else:
            name = node.sql(dialect="spark").split("(")[0].lower()
        return _RENAMED.get(name, name)

    def _arguments(self, node: exp.Func) -> list[str]:
        """The arguments in the order they were written (sqlglot keeps them by role)."""
        children = [c for c in node.iter_expressions() if not isinstance(c, (exp.DataType,))
                    and not (isinstance(c, exp.Var) and c.meta.get("start") is None and isinstance(node, exp.TsOrDsAdd))]
        if isinstance(node, exp.Count) and isinstance(node.this, exp.Distinct):
            return [self.sql(node.this)]
        positions = [p for p in (_first_position(c) for c in children) if p is not None]
        if positions == sorted(positions) and not isinstance(node, (exp.TsOrDsAdd,)):
            return [self.sql(c) for c in children]      # in order already (NULLs keep their place)
        ranked = sorted(enumerate(children), key=lambda ic: (_first_position(ic[1]) is None,
                                                            _first_position(ic[1]) or 0, ic[0]))
        return [self.sql(c) for _, c in ranked]

    def _window(self, node: exp.Window) -> str:
        function = node.this
        inner = function.this if isinstance(function, (exp.IgnoreNulls, exp.RespectNulls)) else function
        spec = node
        if not node.args.get("partition_by") and not node.args.get("order") and node.alias:
            named = _named_window(node, node.alias)
            if named is not None:
                spec = named
        if isinstance(inner, (exp.Lag, exp.Lead)):
            offset = inner.args.get("offset")
            default = inner.args.get("default")
            head = (f"{'lag' if isinstance(inner, exp.Lag) else 'lead'}({self.sql(inner.this)}, "
                    f"{self.sql(offset) if offset is not None else '1'}, "
                    f"{self.sql(default) if default is not None else 'NULL'})")
        elif isinstance(inner, (exp.Rank, exp.DenseRank, exp.PercentRank)) and not inner.expressions:
            head = f"{self._function_name(inner).upper()}()"
        else:
            head = self.sql(function)
        parts = []
        if spec.args.get("partition_by"):
            parts.append("PARTITION BY " + self._list(spec.args["partition_by"]))
        order = spec.args.get("order")
        if order is not None:
            parts.append("ORDER BY " + ", ".join(self._ordered(o) for o in order.expressions))
        parts.append(self._frame(spec.args.get("spec"), inner, order is not None))
        return f"{head} OVER ({' '.join(parts)})"

    def _ordered(self, ordered: exp.Ordered) -> str:
        desc = bool(ordered.args.get("desc"))
        nulls_first = ordered.args.get("nulls_first")
        if nulls_first is None:
            nulls_first = not desc
        return f"{self.sql(ordered.this)} {'DESC' if desc else 'ASC'} NULLS {'FIRST' if nulls_first else 'LAST'}"

    def _frame(self, frame: exp.WindowSpec | None, function: exp.Expression, ordered: bool) -> str:
        if frame is not None:
            kind = (frame.args.get("kind") or "ROWS").upper()
            start = self._bound(frame.args.get("start"), frame.args.get("start_side"), kind)
            end = self._bound(frame.args.get("end"), frame.args.get("end_side"), kind) if frame.args.get("end") \
                else "CURRENT ROW"
            return f"{kind} BETWEEN {start} AND {end}"
        if isinstance(function, (exp.Lag, exp.Lead)):
            offset = function.args.get("offset")
            n = int(offset.name) if isinstance(offset, exp.Literal) and offset.is_int else 1
            n = -n if isinstance(function, exp.Lag) else n
            return f"ROWS BETWEEN {n} FOLLOWING AND {n} FOLLOWING"
        if isinstance(function, _RANKING):
            return "ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW"
        if ordered:
            return "RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW"
        return "ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING"

    def _bound(self, value, side, kind: str = "ROWS") -> str:
        if isinstance(value, str):
            text = value.upper()
        else:
            text = self.sql(value)
        if text == "CURRENT ROW":
            return text
        return f"{text} {str(side).upper()}" if side else text


# The printers of SparkNamer.sql, by node type (see there). A node no template or printer takes is
# printed as sqlglot's Spark SQL.
_PRINTERS: dict[type[exp.Expression], Callable[[SparkNamer, Any], str | None]] = {
    exp.TsOrDsToDate: SparkNamer._unwrapped, exp.TsOrDsToTimestamp: SparkNamer._unwrapped,
    exp.TimeStrToTime: SparkNamer._unwrapped,
    exp.Column: SparkNamer._column, exp.Literal: SparkNamer._literal, exp.Interval: SparkNamer._interval,
    exp.Cast: SparkNamer._cast, exp.TryCast: SparkNamer._cast, exp.Case: SparkNamer._case,
    exp.Window: SparkNamer._window, exp.Lambda: SparkNamer._lambda,
    exp.Boolean: SparkNamer._boolean, exp.HexString: SparkNamer._hex_string, exp.Neg: SparkNamer._neg,
    exp.Not: SparkNamer._not, exp.Any: SparkNamer._any, exp.PropertyEQ: SparkNamer._struct_field,
    **{operator: SparkNamer._binary for operator in _BINARY},
    exp.Add: SparkNamer._add, exp.Sub: SparkNamer._interval_arithmetic, exp.Mul: SparkNamer._mul,
    exp.Mod: SparkNamer._mod, exp.WithinGroup: SparkNamer._within_group, exp.In: SparkNamer._in,
    exp.If: SparkNamer._if, exp.Escape: SparkNamer._escape, exp.Filter: SparkNamer._filter,
    exp.Extract: SparkNamer._extract, exp.Trim: SparkNamer._trim, exp.StrPosition: SparkNamer._str_position,
    exp.Anonymous: SparkNamer._anonymous, exp.VarMap: SparkNamer._var_map, exp.Bracket: SparkNamer._bracket,
    exp.Func: SparkNamer._function, exp.Identifier: SparkNamer._identifier, exp.Var: SparkNamer._var,
}


_DATE_TEXT = re.compile(r"\s*([+-]?\d{4,})-(\d{1,2})-(\d{1,2})")
_TIME_TEXT = re.compile(r"(?:[T ](\d{1,2}):(\d{1,2})(?::(\d{1,2})(?:\.(\d{1,9}))?)?)?\s*(Z|UTC|[+-]00:?00)?\s*$", re.I)


def datetime_literal(word: str, text: str) -> str:
    """A DATE / TIMESTAMP literal's value as Spark prints it (`TIMESTAMP '2019-01-01'` is named
    `TIMESTAMP '2019-01-01 00:00:00'`); the text as written when it is not a plain one."""
    date = _DATE_TEXT.match(text)
    if date is None or word not in ("DATE", "TIMESTAMP", "TIMESTAMP_NTZ"):
        return text
    year, month, day = int(date[1]), int(date[2]), int(date[3])
    day_text = f"{'+' if year > 9999 else '-' if year < 0 else ''}{abs(year):04d}-{month:02d}-{day:02d}"
    if word == "DATE":
        return day_text if not text[date.end():].strip() else text
    time = _TIME_TEXT.match(text, date.end())
    if time is None or (time[5] and word == "TIMESTAMP_NTZ"):
        return text
    hour, minute, second = (int(time[i]) if time[i] else 0 for i in (1, 2, 3))
    fraction = (time[4] or "")[:6].rstrip("0")
    return f"{day_text} {hour:02d}:{minute:02d}:{second:02d}" + (f".{fraction}" if fraction else "")


DEFAULT_ARGUMENTS = {**_REGISTRY_DEFAULTS, **VECTOR_DEFAULT_ARGUMENTS}


def registry_defaults(name: str, written: int) -> list[str]:
    """The arguments Spark adds to the name of a call of `written` arguments (spark_calls.py). Spark
    fills left-out arguments from the end, so a call with more arguments than a recorded example
    gets the tail of that example's defaults."""
    for fewer in range(written, -1, -1):
        recorded = DEFAULT_ARGUMENTS.get((name, fewer))
        if recorded is None:
            continue
        if fewer == written:
            return [recorded] if recorded else []
        parts = recorded.split(", ")
        if "'" in recorded or written - fewer >= len(parts) or written not in ARITIES.get(name, ()):
            return []
        return parts[written - fewer:]
    return []


def generator_name(item: exp.Expression) -> str | None:
    """The function name when an unaliased select item is a generator (explode, inline, ...)."""
    if isinstance(item, exp.Explode):
        outer = "_outer" if isinstance(item, exp.ExplodeOuter) or isinstance(item, exp.PosexplodeOuter) else ""
        return ("posexplode" if isinstance(item, (exp.Posexplode, exp.PosexplodeOuter)) else "explode") + outer
    if isinstance(item, exp.Inline):
        return "inline"
    if isinstance(item, exp.Anonymous) and item.name.lower() in _GENERATORS:
        return item.name.lower()
    return None


def _named_window(node: exp.Window, name: str) -> exp.Window | None:
    select = node.find_ancestor(exp.Select)
    for window in (select.args.get("windows") or []) if select is not None else []:
        if window.alias_or_name.lower() == name.lower() or window.name.lower() == name.lower():
            return window
    return None


def _first_position(node: exp.Expression) -> int | None:
    starts = [n.meta["start"] for n in node.walk() if n.meta.get("start") is not None]
    return min(starts) if starts else None
