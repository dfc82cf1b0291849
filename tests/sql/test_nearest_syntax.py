"""Spark 4.2's nearest-by clause in sqlglot's trees (compiler/sparksql/spark_dialect.py): every
form Spark's grammar takes parses into a NearestBy on its join and prints back as Spark writes it;
what Spark's grammar refuses, sqlglot refuses too."""
from __future__ import annotations

import pytest
from sqlglot import exp
from sqlglot.errors import ParseError

from dslc.compiler.sparksql.nearest import join_type
from dslc.compiler.sparksql.spark_dialect import SPARK_SQL
from dslc.compiler.sparksql.spark_nodes import NearestBy

FORMS = [
    ("SELECT * FROM a JOIN b APPROX NEAREST 3 BY DISTANCE vector_l2_distance(a.v, b.v)", "INNER", 3, True, False),
    ("SELECT * FROM a x INNER JOIN b y EXACT NEAREST BY SIMILARITY x.s - y.s", "INNER", 1, False, True),
    ("SELECT * FROM a LEFT JOIN b exact nearest 100000 by distance 1", "LEFT OUTER", 100000, False, False),
    ("SELECT * FROM a LEFT OUTER JOIN (SELECT * FROM b) c APPROX NEAREST 2 BY SIMILARITY c.s > 1 AND true",
     "LEFT OUTER", 2, True, True),
    ("SELECT * FROM a RIGHT JOIN b APPROX NEAREST 1 BY DISTANCE 1", "RIGHT OUTER", 1, True, False),
    ("SELECT * FROM a LEFT SEMI JOIN b APPROX NEAREST 1 BY DISTANCE 1", "LEFT SEMI", 1, True, False),
]


@pytest.mark.parametrize(("sql", "kind", "k", "approximate", "similarity"), FORMS)
def test_every_form_parses_into_a_nearest_by_and_prints_back(sql, kind, k, approximate, similarity):
    tree = SPARK_SQL.parse(sql)[0]
    join = tree.args["joins"][0]
    nearest = join.args["nearest"]
    assert isinstance(nearest, NearestBy) and isinstance(nearest, exp.Nearest)
    assert (join_type(join), nearest.k, bool(nearest.args.get("approximate")), bool(nearest.args.get("similarity"))) \
        == (kind, k, approximate, similarity)
    assert join.args.get("on") is None           # no ON TRUE added: the clause stands where ON would
    again = SPARK_SQL.parse(tree.sql(dialect=SPARK_SQL))[0]
    assert again == tree


def test_the_words_are_no_alias_and_k_is_printed_only_when_written():
    tree = SPARK_SQL.parse("SELECT * FROM a JOIN b EXACT NEAREST BY DISTANCE a.x - b.x")[0]
    assert tree.args["joins"][0].this.alias == ""
    assert "EXACT NEAREST BY DISTANCE" in tree.sql(dialect=SPARK_SQL)


@pytest.mark.parametrize("sql", [
    "SELECT * FROM a JOIN b NEAREST 1 BY DISTANCE 1",               # APPROX or EXACT is required
    "SELECT * FROM a JOIN b APPROX NEAREST 1 DISTANCE 1",           # BY is required
    "SELECT * FROM a JOIN b APPROX NEAREST 1 BY a.x",               # so is DISTANCE or SIMILARITY
    "SELECT * FROM a JOIN b ON true APPROX NEAREST 1 BY DISTANCE 1",   # it stands where ON would
    "SELECT * FROM a JOIN b APPROX NEAREST -1 BY DISTANCE 1",       # k is an unsigned integer
])
def test_what_sparks_grammar_refuses_does_not_parse(sql):
    with pytest.raises(ParseError):
        SPARK_SQL.parse(sql)


def test_a_plain_join_keeps_its_on_true():
    tree = SPARK_SQL.parse("SELECT * FROM a JOIN b")[0]
    assert tree.args["joins"][0].args.get("nearest") is None
