"""What SparkSqlParser (spark_dialect.py) adds to sqlglot's trees, in a module of its own so that
the modules reading those trees (names, types, intervals) need not import the parser, which
itself names PIVOT columns with SparkNamer."""
from __future__ import annotations

from sqlglot import exp

# The meta key on an `exp.Add` of interval parts written as one literal (`INTERVAL 1 DAY -1 HOUR`).
MULTI_UNIT = "multi_unit_interval"


class UnaryPlus(exp.Paren):
    """`+x`: the value of x, which Spark keeps in the names it prints (`(+ 230)`); a Paren to every
    part of dslc that does not print names."""


class NearestBy(exp.Nearest):
    """Spark 4.2's top-k ranking join clause, `JOIN r (APPROX | EXACT) NEAREST [k] BY (DISTANCE |
    SIMILARITY) ranking`, in the `nearest` argument of its exp.Join (where sqlglot keeps DuckDB's
    NEAREST). sqlglot's Nearest with Spark's differences: k may be left out (Spark's default is
    1) and EXACT is a word of its own (`approximate` False). Meta `join_start`: where the join's
    first word is, which Spark's errors about the join type point at."""

    arg_types = {"this": True, "count": False, "approximate": False, "similarity": False}

    @property
    def k(self) -> int:
        """The number of results: the literal written, else Spark's default of 1."""
        count = self.args.get("count")
        return int(count.name) if count is not None else 1
