"""The checker's list of Spark's built-in functions is the running Spark's list."""
from __future__ import annotations

import re

from dslc.compiler.sparksql.spark_functions import SPARK_FUNCTIONS


def test_the_function_list_is_sparks(spark):
    names = {row[0] for row in spark.newSession().sql("SHOW SYSTEM FUNCTIONS").collect()}
    assert SPARK_FUNCTIONS == {n for n in names if re.fullmatch(r"[a-z_][a-z0-9_]*", n)}
