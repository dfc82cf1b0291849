"""Spark's streaming rules that `dslc check` reports in STREAMING (compiler/plan/streaming_sql.py,
streaming.py), each compared with real Spark: every shape dslc rejects is started on Spark as
the same streaming query (JSON file sources, the same WATERMARKs, the same SQL, the sink's output
mode) and Spark must refuse it with the words dslc quotes; every near miss dslc accepts, Spark
runs."""
from __future__ import annotations

import json
import re

import pytest

from dslc.compiler.diagnostics import CompileError
from dslc.compiler.pipeline import check_text

pytestmark = pytest.mark.spark

SCHEMA = "id STRING, k STRING, ts TIMESTAMP, v INT"
BOTH = {"a": "ts", "b": "ts"}           # sources with a WATERMARK on ts (delay 0s)
LEFT_ONLY = {"a": "ts", "b": None}
NONE = {"a": None, "b": None}

LEFT_JOIN_RULE = "Stream-stream LeftOuter join between two streaming DataFrame/Datasets is not supported without a watermark"

# (case, watermarks, [(stream, sql)], sink mode, what both dslc and Spark say; None: both accept)
CASES = [
    ("left_join_nullable_side_without_watermark", LEFT_ONLY,
     [("j", "SELECT a.id, b.v FROM a LEFT JOIN b ON a.k = b.k AND b.ts BETWEEN a.ts AND a.ts + INTERVAL 1 MINUTE")],
     "APPEND", LEFT_JOIN_RULE),
    ("left_join_bound_in_the_wrong_direction", BOTH,
     [("j", "SELECT a.id, b.v FROM a LEFT JOIN b ON a.k = b.k AND b.ts >= a.ts - INTERVAL 1 MINUTE")],
     "APPEND", LEFT_JOIN_RULE),
    ("right_join_without_range", BOTH, [("j", "SELECT a.id, b.v FROM a RIGHT JOIN b ON a.k = b.k")],
     "APPEND", "Stream-stream RightOuter join between two streaming DataFrame/Datasets is not supported"),
    ("full_join_without_watermarks", NONE,
     [("j", "SELECT a.id, b.v FROM a FULL OUTER JOIN b ON a.k = b.k AND b.ts BETWEEN a.ts AND a.ts + INTERVAL 1 MINUTE")],
     "APPEND", "Stream-stream FullOuter join between two streaming DataFrame/Datasets is not supported"),
    ("left_semi_join_without_watermarks", NONE, [("j", "SELECT a.id FROM a LEFT SEMI JOIN b ON a.k = b.k")],
     "APPEND", "Stream-stream LeftSemi join between two streaming DataFrame/Datasets is not supported"),
    ("left_anti_join", BOTH,
     [("j", "SELECT a.id FROM a LEFT ANTI JOIN b ON a.k = b.k AND b.ts BETWEEN a.ts AND a.ts + INTERVAL 1 MINUTE")],
     "APPEND", "LeftAnti joins with a streaming DataFrame/Dataset on the right are not supported"),
    ("cross_join", BOTH, [("j", "SELECT a.id, b.v FROM a CROSS JOIN b")],
     "APPEND", "Stream-stream join without equality predicate is not supported"),
    ("join_then_aggregation_in_complete", NONE,
     [("j", "SELECT a.k FROM a JOIN b ON a.k = b.k"), ("n", "SELECT k, count(*) AS n FROM j GROUP BY k")],
     "COMPLETE", "Inner join between two streaming DataFrames/Datasets is not supported in Complete output mode"),
    ("aggregation_of_an_aggregation_in_complete", NONE,
     [("g", "SELECT k, count(*) AS n FROM a GROUP BY k"), ("h", "SELECT n, count(*) AS m FROM g GROUP BY n")],
     "COMPLETE", "Detected pattern of possible 'correctness' issue due to global watermark"),
    ("aggregation_of_distinct_rows_in_complete", NONE,
     [("d", "SELECT DISTINCT k, id FROM a"), ("n", "SELECT k, count(*) AS n FROM d GROUP BY k")],
     "COMPLETE", "Detected pattern of possible 'correctness' issue due to global watermark"),
    ("count_distinct", NONE, [("n", "SELECT k, count(DISTINCT id) AS d FROM a GROUP BY k")],
     "COMPLETE", "Distinct aggregations are not supported on streaming DataFrames/Datasets"),
    ("window_function", BOTH, [("r", "SELECT id, row_number() OVER (PARTITION BY k ORDER BY ts) AS r FROM a")],
     "APPEND", "Window function is not supported in ROW_NUMBER()"),
    ("order_by_without_aggregation", BOTH, [("s", "SELECT * FROM a ORDER BY ts")],
     "APPEND", "Sorting is not supported on streaming DataFrames/Datasets, unless it is on aggregated"),
    ("intersect", BOTH, [("x", "SELECT k FROM a INTERSECT SELECT k FROM b")],
     "APPEND", "Intersect of streaming DataFrames/Datasets is not supported"),
    ("except", BOTH, [("x", "SELECT k FROM a EXCEPT SELECT k FROM b")],
     "APPEND", "Except on a streaming DataFrame/Dataset on the right is not supported"),
    ("distinct_without_watermark_in_append", NONE, [("d", "SELECT DISTINCT k FROM a")],
     "APPEND", "not supported for streaming aggregations without watermark"),
    ("aggregation_without_watermark_in_append", NONE, [("n", "SELECT k, count(*) AS n FROM a GROUP BY k")],
     "APPEND", "not supported for streaming aggregations without watermark"),
    ("complete_without_aggregation", NONE, [("s", "SELECT * FROM a")],
     "COMPLETE", "This output mode is not supported for no streaming aggregations"),
    # near misses: dslc accepts them and Spark runs them
    ("left_join_with_watermark_and_range", LEFT_ONLY | {"b": "ts"},
     [("j", "SELECT a.id, b.v FROM a LEFT JOIN b ON a.k = b.k AND b.ts BETWEEN a.ts AND a.ts + INTERVAL 1 MINUTE")],
     "APPEND", None),
    ("left_join_upper_bound_only", BOTH,
     [("j", "SELECT a.id, b.v FROM a LEFT JOIN b ON a.k = b.k AND b.ts <= a.ts + INTERVAL 1 MINUTE")], "APPEND", None),
    ("left_join_watermark_in_the_keys", BOTH, [("j", "SELECT a.id, b.v FROM a LEFT JOIN b ON a.k = b.k AND a.ts = b.ts")],
     "APPEND", None),
    ("full_join_one_watermark_and_range", LEFT_ONLY,
     [("j", "SELECT a.id, b.v FROM a FULL JOIN b ON a.k = b.k AND b.ts BETWEEN a.ts AND a.ts + INTERVAL 1 MINUTE")],
     "APPEND", None),
    ("left_semi_join_with_watermark_and_range", BOTH,
     [("j", "SELECT a.id FROM a LEFT SEMI JOIN b ON a.k = b.k AND b.ts BETWEEN a.ts AND a.ts + INTERVAL 1 MINUTE")],
     "APPEND", None),
    ("inner_join_without_watermarks", NONE, [("j", "SELECT a.id, b.v FROM a JOIN b ON a.k = b.k")], "APPEND", None),
    ("windows_of_windows_in_append", BOTH,
     [("g", "SELECT window(ts, '1 minute') AS w, k, count(*) AS n FROM a GROUP BY window(ts, '1 minute'), k"),
      ("h", "SELECT window(window_time(w), '1 minute') AS w2, count(*) AS c FROM g "
            "GROUP BY window(window_time(w), '1 minute')")], "APPEND", None),
    ("order_by_of_an_aggregation_in_complete", NONE,
     [("n", "SELECT k, count(*) AS n FROM a GROUP BY k ORDER BY n")], "COMPLETE", None),
    ("distinct_with_watermark_in_append", BOTH, [("d", "SELECT DISTINCT k, ts FROM a")], "APPEND", None),
]


def _flow(watermarks: dict, statements: list[tuple[str, str]], mode: str) -> str:
    lines = ["PIPELINE p MODE STREAMING CHECKPOINT 'chk';"]
    for name, mark in watermarks.items():
        lines.append(f"SOURCE {name} FROM JSON 'in/{name}' SCHEMA ({SCHEMA})"
                     + (f" WATERMARK {mark} DELAY 0s;" if mark else ";"))
    lines += [f"STREAM {name} = {sql};" for name, sql in statements]
    lines.append(f"SINK {statements[-1][0]} TO PARQUET 'out' MODE {mode};")
    return "\n".join(lines) + "\n"


def _spark_refusal(spark, tmp_path, watermarks: dict, statements: list[tuple[str, str]], mode: str) -> str | None:
    """Start the same query on Spark (one row per source, AVAILABLE NOW): its error, or None."""
    for name, mark in watermarks.items():
        folder = tmp_path / "in" / name
        folder.mkdir(parents=True)
        (folder / "1.json").write_text(json.dumps({"id": f"{name}1", "k": "x", "ts": "2026-01-01T00:00:00", "v": 1}))
        df = spark.readStream.schema(SCHEMA).json(str(folder))
        (df.withWatermark(mark, "0 seconds") if mark else df).createOrReplaceTempView(name)
    for name, sql in statements:
        spark.sql(sql).createOrReplaceTempView(name)
    try:
        query = (spark.table(statements[-1][0]).writeStream.format("noop").outputMode(mode.lower())
                 .option("checkpointLocation", str(tmp_path / "chk")).trigger(availableNow=True).start())
        query.awaitTermination()
    except Exception as exc:  # noqa: BLE001 - the refusal is what the test looks at
        return str(exc)
    finally:
        for name in [*watermarks, *(n for n, _ in statements)]:
            spark.catalog.dropTempView(name)
    return None


@pytest.mark.parametrize("case, watermarks, statements, mode, rule", CASES, ids=[c[0] for c in CASES])
def test_dslc_check_and_spark_agree(spark, tmp_path, case, watermarks, statements, mode, rule):
    text = _flow(watermarks, statements, mode)
    try:
        check_text(text, str(tmp_path / "pipeline.flow"))
        found = []
    except CompileError as exc:
        found = exc.diagnostics
    refusal = _spark_refusal(spark, tmp_path, watermarks, statements, mode)
    if rule is None:
        assert found == [], "dslc rejects what Spark runs: " + "; ".join(d.message for d in found)
        assert refusal is None, refusal[:600]
        return
    assert [d.code for d in found] == ["E0311"], [d.message for d in found]
    assert rule in found[0].message and found[0].hint, found[0].message
    assert refusal is not None, "Spark ran what dslc rejects"
    assert rule in re.sub(r"\s+", " ", refusal), refusal[:600]
