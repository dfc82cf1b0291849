"""GROUP BY and aggregation rules of Spark's analyzer, checked by the fast check without a JVM.

Spark refuses, when the job starts, a select item that reads a column which is neither grouped nor
aggregated (MISSING_AGGREGATION, or MISSING_GROUP_BY when the query aggregates without a GROUP BY),
a GROUP BY ordinal outside the select list (GROUP_BY_POS_OUT_OF_RANGE) or naming an aggregate
(GROUP_BY_POS_AGGREGATE), an ordinal next to a `*` (STAR_GROUP_BY_POS), and an aggregate in the
GROUP BY (GROUP_BY_AGGREGATE), and an ORDER BY / SORT BY ordinal outside the select list
(ORDER_BY_POS_OUT_OF_RANGE). The fast check reports the same conditions (E0212, as
`dslc check --spark` does) only where the answer is certain:

- a column counts only when it is certainly one of the query's own input columns (qualified by a
  FROM item that has it, or unqualified and in exactly one of them); a name no FROM item has (an
  outer reference, a lateral alias, a struct field, `window`) is left to Spark;
- a column is missing only when its name appears nowhere in the GROUP BY (nor in the select items
  an alias or ordinal there stands for), so no reordering Spark's semantic equality allows
  (`b + a` grouped by `a + b`) can make it an error here;
- aggregates are the functions Spark's registry files under `agg_funcs` (spark_calls.AGGREGATES);
  nothing inside a window, a subquery or a lambda is judged; GROUP BY ALL and queries over FROM
  items whose columns are unknown here (PIVOT, a `*` over something unknown) are Spark's.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping

from sqlglot import exp
from sqlglot.optimizer.scope import Scope, traverse_scope

from dslc.compiler.diagnostics import Diagnostic, error
from dslc.compiler.source import Span
from dslc.compiler.sparksql.spark_calls import AGGREGATES as _REGISTRY_AGGREGATES
from dslc.compiler.sparksql.spark_vectors import VECTOR_AGGREGATES

Sources = Mapping[str, "set[str] | None"]      # FROM item alias (lower case) → its column names
_HINT = "dslc's fast check found this; Spark's analyzer refuses it when the job starts"
AGGREGATES = _REGISTRY_AGGREGATES | VECTOR_AGGREGATES
_NOT_JUDGED = (exp.Window, exp.Query, exp.Subquery, exp.Lambda)


def aggregation_errors(tree: exp.Expression, sources_of: Callable[[Scope], Sources],
                       where: Callable[[exp.Expression], Span], ordinals: bool = True) -> list[Diagnostic]:
    """E0212 for every select item, GROUP BY ordinal or GROUP BY expression Spark's aggregation
    rules refuse, in every query block of `tree`. `ordinals` False (`SET spark.sql.groupByOrdinal
    = false`: Spark groups by the number itself): a block grouped by a number is left to Spark."""
    found: list[Diagnostic] = []
    lambda_vars = {i.name.lower() for lam in tree.find_all(exp.Lambda) for i in lam.expressions}
    for scope in traverse_scope(tree):
        select = scope.expression
        if not isinstance(select, exp.Select):
            continue
        group, having = select.args.get("group"), select.args.get("having")
        items = select.expressions
        if group is None and having is None and not any(_has_aggregate(i) for i in items):
            continue            # not an aggregation
        if group is not None and group.args.get("all"):
            continue            # GROUP BY ALL: Spark derives the grouping itself
        if not ordinals and group is not None and any(_ordinal(g) is not None for g in group.find_all(exp.Literal, exp.Neg)):
            continue
        sources = sources_of(scope)
        if not sources or any(columns is None for columns in sources.values()):
            continue
        check = _Block(select, {a: c for a, c in sources.items() if c is not None}, lambda_vars, where)
        found.extend(check.errors())
    return found


def ordinal_errors(tree: exp.Expression, where: Callable[[exp.Expression], Span],
                   ordinals: bool = True) -> list[Diagnostic]:
    """E0212 (ORDER_BY_POS_OUT_OF_RANGE) for an ORDER BY or SORT BY position below 1, or above the
    number of select items when none is a `*`; none when `ordinals` is False
    (`SET spark.sql.orderByOrdinal = false`: Spark sorts by the number itself)."""
    found = []
    if not ordinals:
        return found
    for select in tree.find_all(exp.Select):
        count = None if any(i.is_star for i in select.expressions) else len(select.expressions)
        for key in ("order", "sort"):
            clause = select.args.get(key)
            for ordered in clause.expressions if clause is not None else []:
                ordinal = _ordinal(ordered.this)
                if ordinal is None or (ordinal >= 1 and (count is None or ordinal <= count)):
                    continue
                valid = f" (valid positions are 1 to {count})" if count else ""
                found.append(error("E0212", where(ordered.this), condition="ORDER_BY_POS_OUT_OF_RANGE",
                                   detail=f"ORDER BY position {ordinal} is not in the select list{valid}",
                                   hint=f"write the expression or a position of the select list; {_HINT}"))
    return found


class _Block:
    """One SELECT that aggregates, with the columns of its FROM items."""

    def __init__(self, select: exp.Select, sources: Mapping[str, set[str]], lambda_vars: set[str],
                 where: Callable[[exp.Expression], Span]):
        self.select, self.sources, self.lambda_vars, self.where = select, sources, lambda_vars, where
        self.items = select.expressions
        self.aliases = {i.alias.lower(): i.this for i in self.items if isinstance(i, exp.Alias)}

    def errors(self) -> list[Diagnostic]:
        group = self.select.args.get("group")
        if group is None:
            return self._ungrouped("MISSING_GROUP_BY", None)
        found: list[Diagnostic] = []
        mentioned: set[str] = set()
        for expression, in_grouping_set in _grouping_expressions(group):
            ordinal = _ordinal(expression)
            if ordinal is not None and not in_grouping_set:
                wrong = self._ordinal_error(expression, ordinal)
                if wrong is not None:
                    found.append(wrong)
                    continue
                if 1 <= ordinal <= len(self.items):
                    mentioned |= _names(self.items[ordinal - 1])
                continue
            if isinstance(expression, exp.Column) and not expression.table \
                    and expression.name.lower() in self.aliases and self._owner(expression) is None:
                aliased = self.aliases[expression.name.lower()]      # GROUP BY an alias of the select list
                if _has_aggregate(aliased):
                    found.append(self._group_by_aggregate(expression))
                    continue
                mentioned |= _names(aliased)
            elif _has_aggregate(expression):
                found.append(self._group_by_aggregate(expression))
                continue
            mentioned |= _names(expression)
        if found:
            return found
        if not mentioned:
            return []           # GROUPING SETS (()) and the like: Spark's own condition varies
        return self._ungrouped("MISSING_AGGREGATION", mentioned)

    def _ungrouped(self, condition: str, mentioned: set[str] | None) -> list[Diagnostic]:
        found, reported = [], set()
        for item in self.items:
            if item.is_star:
                continue
            for column in _judged_columns(item.unalias() if isinstance(item, exp.Alias) else item):
                name = column.name.lower()
                if name in reported or name in self.lambda_vars or self._owner(column) is None:
                    continue
                if mentioned is not None and name in mentioned:
                    continue
                reported.add(name)
                found.append(self._missing(column, condition))
        return found

    def _owner(self, column: exp.Column) -> str | None:
        """The FROM item a column certainly reads, None when it may be anything else."""
        if column.args.get("db") or isinstance(column.this, exp.Star):
            return None
        name, table = column.name.lower(), column.table.lower()
        if table:
            return table if name in self.sources.get(table, ()) else None
        owners = [alias for alias, columns in self.sources.items() if name in columns]
        return owners[0] if len(owners) == 1 else None

    def _missing(self, column: exp.Column, condition: str) -> Diagnostic:
        text = column.sql(dialect="spark")
        if condition == "MISSING_GROUP_BY":
            detail = f"`{text}` is read outside an aggregate, and the query aggregates without a GROUP BY"
            hint = f"add GROUP BY {text}, aggregate it (any_value({text})), or turn the aggregates into " \
                   f"window functions with OVER; {_HINT}"
        else:
            detail = f"`{text}` is neither in the GROUP BY nor aggregated"
            hint = f"add it to the GROUP BY, aggregate it, or use any_value({text}) if any value of " \
                   f"the group will do; {_HINT}"
        return error("E0212", self.where(column), condition=condition, detail=detail, hint=hint)

    def _ordinal_error(self, expression: exp.Expression, ordinal: int) -> Diagnostic | None:
        if any(i.is_star for i in self.items):
            return error("E0212", self.where(expression), condition="STAR_GROUP_BY_POS",
                         detail="a GROUP BY position cannot be used with `*` in the select list",
                         hint=f"group by the column names; {_HINT}")
        if not 1 <= ordinal <= len(self.items):
            return error("E0212", self.where(expression), condition="GROUP_BY_POS_OUT_OF_RANGE",
                         detail=f"GROUP BY position {ordinal} is not in the select list "
                                f"(valid positions are 1 to {len(self.items)})",
                         hint=f"write the expression or a position of the select list; {_HINT}")
        if _has_aggregate(self.items[ordinal - 1]):
            return error("E0212", self.where(expression), condition="GROUP_BY_POS_AGGREGATE",
                         detail=f"GROUP BY position {ordinal} refers to an aggregate of the select list",
                         hint=f"a query cannot group by an aggregate; group by the columns it reads; {_HINT}")
        return None

    def _group_by_aggregate(self, expression: exp.Expression) -> Diagnostic:
        return error("E0212", self.where(expression), condition="GROUP_BY_AGGREGATE",
                     detail=f"`{expression.sql(dialect='spark')}` in the GROUP BY is or names an aggregate",
                     hint=f"a query cannot group by an aggregate; group by the columns it reads; {_HINT}")


def _grouping_expressions(group: exp.Group):
    """(expression, inside GROUPING SETS) for every expression the GROUP BY groups by; the items
    of CUBE and ROLLUP are expressions (and ordinals) of their own."""
    def expand(node: exp.Expression, in_sets: bool):
        if isinstance(node, (exp.Cube, exp.Rollup)):
            for e in node.expressions:
                yield from expand(e, in_sets)
        elif isinstance(node, (exp.GroupingSets, exp.Tuple)):
            for e in node.expressions:
                yield from expand(e, True)
        else:
            yield node, in_sets

    for node in group.expressions:
        yield from expand(node, False)
    for key in ("grouping_sets", "cube", "rollup"):
        for node in group.args.get(key) or []:
            yield from expand(node, key == "grouping_sets")


def _ordinal(node: exp.Expression) -> int | None:
    """The position a GROUP BY item names: an integer literal, possibly negative."""
    sign = 1
    if isinstance(node, exp.Neg):
        sign, node = -1, node.this
    if isinstance(node, exp.Literal) and not node.is_string and node.this.isdigit():
        return sign * int(node.this)
    return None


def _names(node: exp.Expression) -> set[str]:
    """Every name written in an expression (columns, qualifiers, fields), lower case."""
    return {i.name.lower() for i in node.find_all(exp.Identifier)} | \
        ({node.name.lower()} if isinstance(node, exp.Column) else set())


def _is_aggregate(node: exp.Expression) -> bool:
    """A call Spark's registry files under aggregate functions (FILTER (WHERE ...) and WITHIN GROUP
    (ORDER BY ...) around one too)."""
    if isinstance(node, (exp.Filter, exp.WithinGroup)):
        return _is_aggregate(node.this)
    if isinstance(node, exp.Anonymous):
        return node.name.lower() in AGGREGATES
    if isinstance(node, exp.Any):           # any(v) is Spark's aggregate; `= ANY (...)`, `LIKE ANY (...)` are not
        return isinstance(node.this, exp.Paren) and not isinstance(node.this.unnest(), exp.Query) \
            and not isinstance(node.parent, (exp.Binary, exp.Predicate)) and "any" in AGGREGATES
    if not isinstance(node, exp.Func):
        return False
    names = {n.lower() for n in node.sql_names()}
    if isinstance(node, exp.AggFunc):
        names.add(node.sql(dialect="spark").split("(", 1)[0].strip().lower())
    return bool(names & AGGREGATES)


def _maybe_aggregate(node: exp.Expression) -> bool:
    """A call that may aggregate: sqlglot's aggregate classes and Spark's registry's."""
    return isinstance(node, exp.AggFunc) or _is_aggregate(node)


def _has_aggregate(node: exp.Expression) -> bool:
    """True when an aggregate is computed by this expression itself (not in a window, subquery or
    lambda)."""
    if _is_aggregate(node):
        return True
    if isinstance(node, _NOT_JUDGED):
        return False
    return any(_has_aggregate(child) for child in node.iter_expressions())


def _judged_columns(node: exp.Expression):
    """The columns an expression reads outside aggregates, windows, subqueries and lambdas."""
    if isinstance(node, exp.Column):
        yield node
        return
    if _maybe_aggregate(node) or isinstance(node, _NOT_JUDGED):
        return
    for child in node.iter_expressions():
        yield from _judged_columns(child)
