"""The probe on real Spark (runtime/spark/nearest.py): EXACT NEAREST BY through dslc's index gives
exactly the rows Spark's own rewrite (a cross product) gives, for each ranking function, inner and
LEFT OUTER, with NULL vectors, NULL elements and a zero vector among the rows."""
from __future__ import annotations

import numpy as np
import pytest

from dslc.runtime.spark import nearest

pytestmark = pytest.mark.spark
DIM = 12


@pytest.fixture(scope="module")
def tables(spark):
    rng = np.random.default_rng(3)
    vector = lambda: [float(x) for x in rng.normal(size=DIM).astype(np.float32)]  # noqa: E731
    left = [(i, vector() if i % 17 else None) for i in range(300)]
    left[5] = (5, [1.0, None] + [0.0] * (DIM - 2))
    right = [(f"doc{j}", vector(), float(j)) for j in range(800)]
    right[3] = ("doc3", [0.0] * DIM, 3.0)
    right[4] = ("doc4", None, 4.0)
    session = spark.newSession()
    session.createDataFrame(left, "qid INT, emb ARRAY<FLOAT>").repartition(3).createOrReplaceTempView("q")
    session.createDataFrame(right, "doc STRING, emb ARRAY<FLOAT>, w DOUBLE").createOrReplaceTempView("d")
    return session


@pytest.mark.parametrize(("function", "by"), [("vector_l2_distance", "DISTANCE"),
                                              ("vector_cosine_similarity", "SIMILARITY"),
                                              ("vector_inner_product", "SIMILARITY"),
                                              ("vector_l2_distance", "SIMILARITY")])
@pytest.mark.parametrize("join", ["JOIN", "LEFT JOIN"])
def test_exact_equals_sparks_own_answer(tables, function, by, join):
    spark = tables
    theirs = spark.sql(f"SELECT q.qid, d.doc, d.w FROM q {join} d EXACT NEAREST 4 BY {by} {function}(q.emb, d.emb)")
    side = nearest.index_side(spark.table("d"), operator="m", line=1, column="emb", function=function,
                              similarity=by == "SIMILARITY", approx=False)
    probed = nearest.probe(spark.table("q"), side, operator="m", line=1, vector="emb", k=4,
                           outer=join != "JOIN", alias="d")
    probed.createOrReplaceTempView("probed")
    ours = spark.sql("SELECT probed.qid, d.doc, w FROM probed")         # d.doc: the struct; w: flat
    assert sorted(map(tuple, ours.collect())) == sorted(map(tuple, theirs.collect()))
    assert ours.count() > 0
