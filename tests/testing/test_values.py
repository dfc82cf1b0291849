"""`typed`: a test file's YAML value as Spark holds it for the column's type, or DoesNotFit with
the reason a case file's author reads (no Spark needed: the types alone)."""
from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from pyspark.sql import types as T

from dslc.testing.values import DoesNotFit, typed

UTC = dt.timezone.utc


@pytest.mark.parametrize("value, data_type, expected", [
    (None, T.IntegerType(), None),
    ("abc", T.StringType(), "abc"),
    (12, T.StringType(), "12"),
    (dt.datetime(2024, 5, 1, 10), T.StringType(), "2024-05-01 10:00:00"),
    (7, T.ByteType(), 7),
    (3.0, T.LongType(), 3),
    (2, T.DoubleType(), 2.0),
    (1.5, T.FloatType(), 1.5),
    ("1.25", T.DecimalType(10, 2), Decimal("1.25")),
    (True, T.BooleanType(), True),
    ("2024-05-01 10:00:00", T.TimestampType(), dt.datetime(2024, 5, 1, 10, tzinfo=UTC)),
    ("2024-05-01T10:00:00Z", T.TimestampNTZType(), dt.datetime(2024, 5, 1, 10)),
    (dt.date(2024, 5, 1), T.TimestampType(), dt.datetime(2024, 5, 1, tzinfo=UTC)),
    ("2024-05-01", T.DateType(), dt.date(2024, 5, 1)),
    (dt.datetime(2024, 5, 1, 10), T.DateType(), dt.date(2024, 5, 1)),
    ([1, 2], T.ArrayType(T.LongType()), [1, 2]),
    ({"a": 1}, T.MapType(T.StringType(), T.IntegerType()), {"a": 1}),
    ({"x": 1}, T.StructType([T.StructField("x", T.IntegerType()), T.StructField("y", T.StringType())]),
     {"x": 1, "y": None}),
    ("hi", T.BinaryType(), b"hi"),
    ({"any": "thing"}, T.VariantType(), {"any": "thing"}),     # a type with no rule: as it is
])
def test_a_value_is_held_as_spark_holds_its_type(value, data_type, expected) -> None:
    assert typed(value, data_type) == expected


@pytest.mark.parametrize("value, data_type, reason", [
    (True, T.StringType(), "True is not a STRING (quote it: YAML reads yes/no/true/false as booleans)"),
    ([1], T.StringType(), "[1] is not a STRING"),
    ("7", T.IntegerType(), "'7' is not an integer (INT)"),
    (True, T.LongType(), "True is not an integer (BIGINT)"),
    (128, T.ByteType(), "128 is out of the range of TINYINT"),
    ("x", T.DoubleType(), "'x' is not a number (DOUBLE)"),
    ("x", T.DecimalType(10, 2), "'x' is not a number (DECIMAL(10,2))"),
    ("yes", T.BooleanType(), "'yes' is not a BOOLEAN (write true or false)"),
    ("soon", T.TimestampType(), "expected a timestamp such as 2024-05-01 10:00:00"),
    ("May 1", T.DateType(), "'May 1' is not a DATE (write 2024-05-01)"),
    (1, T.ArrayType(T.LongType()), "1 is not a list (ARRAY<BIGINT>)"),
    ([1], T.MapType(T.StringType(), T.LongType()), "[1] is not a mapping (MAP<STRING,BIGINT>)"),
    ({"z": 1}, T.StructType([T.StructField("x", T.IntegerType())]), "field 'z' is not in STRUCT<X:INT>"),
    ([1, "a"], T.ArrayType(T.LongType()), "'a' is not an integer (BIGINT)"),
])
def test_a_value_the_type_cannot_hold_says_why(value, data_type, reason) -> None:
    with pytest.raises(DoesNotFit) as caught:
        typed(value, data_type)
    assert str(caught.value) == reason
