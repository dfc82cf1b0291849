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
