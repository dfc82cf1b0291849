"""mapInArrow adapter: Arrow batches through PROCESS (and ENRICH) with broadcast snapshots, no Spark."""
from __future__ import annotations

import datetime as dt
import json
import textwrap
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark import cloudpickle

from dslc.runtime import config as C
from dslc.runtime.broadcast.state import BroadcastState, BroadcastStateError
from dslc.runtime.core.arrow_chain import (
    ChainFunction,
    WatermarkGenerator,
    chain_function,
    event_seconds,
)
from dslc.runtime.core.operator import Watermark
from dslc.runtime.schema.arrow import to_arrow_schema, to_arrow_type

USER_CODE = '''
import datetime as dt

def score(row, rules):
    for rule in rules.values():
        if row["country"] == rule["country"] and row["amount"] > rule["max_amount"]:
            yield {"order_id": row["order_id"], "rule_id": rule["rule_id"], "score": row["amount"] / rule["max_amount"],
                   "ts": row["ts"]}

def fail_on_o3(row):
    if row["order_id"] == "o3":
        raise ValueError("o3 is bad")
    return {"order_id": row["order_id"]}

def copy(row):
    return {"order_id": row["order_id"]}

async def customer(row):
    return {"tier": "gold" if row["amount"] > 100 else "silver"}

async def picky(row):
    if row["amount"] < 0:
        raise ValueError("negative amount")
    return {"tier": "gold"}

def tiered(row):
    return {"order_id": row["order_id"], "tier": row["tier"], "amount": row["amount"]}

def watermarks_seen(row):
    return {"order_id": row["order_id"]}
'''

INPUT = (
    C.Column("order_id", "STRING"), C.Column("country", "STRING"),
    C.Column("amount", "DOUBLE"), C.Column("ts", "TIMESTAMP"),
)
SCORED = (C.Column("order_id", "STRING"), C.Column("rule_id", "STRING"),
          C.Column("score", "DOUBLE"), C.Column("ts", "TIMESTAMP"))
T0 = dt.datetime(2024, 5, 1, 12, 0, tzinfo=dt.timezone.utc)


@pytest.fixture()
def search_path(tmp_path: Path) -> tuple[str, ...]:
    (tmp_path / "arrow_user_fns.py").write_text(textwrap.dedent(USER_CODE))
    return (str(tmp_path),)


def call(search_path: tuple[str, ...], name: str) -> C.PythonCall:
    return C.PythonCall(f"arrow_user_fns:{name}", search_path)


def orders(*rows: tuple[str, str, float, int]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist(
        [{"order_id": o, "country": c, "amount": a, "ts": T0 + dt.timedelta(seconds=s)} for o, c, a, s in rows],
        schema=to_arrow_schema(INPUT),
    )


def rules_snapshot():
    state = BroadcastState(["rules"])
    state.apply_changelog("rules", [
        {"rule_id": "r1", "op": "upsert", "country": "NL", "max_amount": 100.0},
        {"rule_id": "r2", "op": "upsert", "country": "NL", "max_amount": 200.0},
        {"rule_id": "r3", "op": "upsert", "country": "DE", "max_amount": 10.0},
    ], key="rule_id", op="op")
    return state.snapshot()


def scoring_chain(search_path, batch_size: int = 1024) -> C.Chain:
    process = C.Process("scored", 12, call(search_path, "score"), SCORED, ("rules",), ("order_id",))
    return C.Chain("chain_scored", (process,), INPUT, SCORED, batch_size=batch_size)


def test_process_with_broadcast_snapshot_over_arrow_batches(search_path) -> None:
    metrics: list[dict[str, Any]] = []
    fn = chain_function(scoring_chain(search_path, batch_size=2), {"rules": rules_snapshot()}, metrics.append)
    out = list(fn(iter([
        orders(("o1", "NL", 150.0, 0), ("o2", "NL", 250.0, 1), ("o3", "DE", 5.0, 2)),
        orders(("o4", "DE", 50.0, 3)),
    ])))
    assert [batch.num_rows for batch in out] == [2, 1, 1]   # at most batch_size rows per batch
    assert all(batch.schema == to_arrow_schema(SCORED) for batch in out)
    rows = [row for batch in out for row in batch.to_pylist()]
    assert [(r["order_id"], r["rule_id"], r["score"]) for r in rows] == [
        ("o1", "r1", 1.5), ("o2", "r1", 2.5), ("o2", "r2", 1.25), ("o4", "r3", 5.0),
    ]
    assert rows[0]["ts"] == T0
    assert _counts(metrics) == [{"scored": {"elements_in": 4, "elements_out": 4, "errors": 0}}]
    assert metrics[0]["scored"]["task_seconds"] > 0 and metrics[0]["scored"]["cpu_seconds"] >= 0


def test_output_streams_after_each_input_batch(search_path) -> None:
    fn = chain_function(scoring_chain(search_path), {"rules": rules_snapshot()})
    pulled: list[int] = []

    def batches():
        pulled.append(1)
        yield orders(("o1", "NL", 150.0, 0))
        pulled.append(2)
        yield orders(("o2", "NL", 150.0, 0))

    out = fn(batches())
    first = next(out)
    assert first.to_pylist()[0]["order_id"] == "o1" and pulled == [1]
    assert next(out).to_pylist()[0]["order_id"] == "o2"


def test_function_pickles_with_cloudpickle(search_path) -> None:
    fn = chain_function(scoring_chain(search_path), {"rules": rules_snapshot()})
    clone = cloudpickle.loads(cloudpickle.dumps(fn))
    rows = [r for b in clone(iter([orders(("o1", "DE", 20.0, 0))])) for r in b.to_pylist()]
    assert [r["rule_id"] for r in rows] == ["r3"]


def test_empty_partition_and_empty_batches(search_path) -> None:
    metrics: list[dict[str, Any]] = []
    fn = chain_function(scoring_chain(search_path), {"rules": rules_snapshot()}, metrics.append)
    assert list(fn(iter([]))) == []
    assert list(fn(iter([orders()]))) == []
    assert len(metrics) == 2


def test_missing_snapshot_is_a_clear_error(search_path) -> None:
    with pytest.raises(BroadcastStateError, match="reads broadcast state 'rules'"):
        list(chain_function(scoring_chain(search_path))(iter([orders(("o1", "NL", 1.0, 0))])))


def test_user_failure_propagates_and_metrics_are_still_reported(search_path) -> None:
    process = C.Process("checked", 3, call(search_path, "fail_on_o3"), (C.Column("order_id", "STRING"),),
                        key_columns=("order_id",))
    metrics: list[dict[str, Any]] = []
    fn = chain_function(C.Chain("c", (process,), INPUT, process.returns), {}, metrics.append)
    out = fn(iter([orders(("o1", "NL", 1.0, 0)), orders(("o2", "NL", 1.0, 0), ("o3", "NL", 1.0, 0))]))
    assert next(out).to_pylist() == [{"order_id": "o1"}]
    with pytest.raises(Exception, match="operator 'checked' \\(line 3\\) failed on element order_id='o3'"):
        next(out)
    assert _counts(metrics) == [{"checked": {"elements_in": 3, "elements_out": 2, "errors": 1}}]


class DeadLettering:
    """A stand-in operator that dead-letters negative amounts (ENRICH's DEAD LETTER outcome)."""

    name = "dl"

    def open(self, output) -> None:
        self.output = output

    def process_element(self, row) -> None:
        if row["amount"] < 0:
            self.output.emit_dead_letter({"operator": "dl", "reason": "negative", "row": row})
        else:
            self.output.emit(row)

    def process_watermark(self, watermark) -> None:
        self.output.emit_watermark(watermark)

    def finish(self) -> None: ...

    def close(self) -> None: ...

    def dispose(self) -> None: ...

    def metrics(self) -> dict[str, Any]:
        return {}


def test_dead_letter_column_shape(search_path, monkeypatch) -> None:
    enrich = C.Enrich("enriched", 4, call(search_path, "customer"), (C.Column("tier", "STRING"),), ("order_id",),
                      on_error=C.Outcome.DEAD_LETTER)
    process = C.Process("copied", 5, call(search_path, "copy"), (C.Column("order_id", "STRING"),))
    chain = C.Chain("c", (enrich, process), INPUT, process.returns)
    assert chain.dead_letters
    from dslc.runtime.core import arrow_chain

    monkeypatch.setitem(arrow_chain._FACTORIES, C.Enrich, lambda op, views: DeadLettering())
    out = list(chain_function(chain)(iter([orders(("o1", "NL", 1.0, 0), ("o2", "NL", -1.0, 0))])))
    (batch,) = out
    assert batch.schema.names == ["order_id", C.DEAD_LETTER_COLUMN]
    assert batch.schema.field(C.DEAD_LETTER_COLUMN).type == pa.string()
    assert batch.schema.field(C.DEAD_LETTER_COLUMN).nullable
    normal, letter = batch.to_pylist()
    assert normal == {"order_id": "o1", C.DEAD_LETTER_COLUMN: None}
    assert letter["order_id"] is None
    decoded = json.loads(letter[C.DEAD_LETTER_COLUMN])
    assert decoded["reason"] == "negative" and decoded["row"]["order_id"] == "o2"
    assert decoded["row"]["ts"] == str(T0)   # default=str for values JSON cannot hold
    assert letter[C.DEAD_LETTER_COLUMN] == json.dumps(
        {"operator": "dl", "reason": "negative", "row": {"order_id": "o2", "country": "NL", "amount": -1.0, "ts": T0}},
        sort_keys=True, default=str)


# -- watermarks -------------------------------------------------------------------------------------

class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_watermark_generator_is_periodic_and_bounded_out_of_order() -> None:
    clock = FakeClock()
    gen = WatermarkGenerator(C.Watermark("ts", delay_s=30, interval_s=1.0), clock)
    assert gen.on_row({"ts": T0}) is None                   # interval not yet elapsed
    clock.now = 1.0
    first = gen.on_row({"ts": T0 + dt.timedelta(seconds=10)})
    assert first == Watermark(T0.timestamp() + 10 - 30)
    clock.now = 1.5
    assert gen.on_row({"ts": T0 + dt.timedelta(seconds=100)}) is None   # too soon
    clock.now = 2.5
    assert gen.on_row({"ts": T0}) == Watermark(T0.timestamp() + 100 - 30)   # max, not the latest row
    clock.now = 5.0
    assert gen.on_row({"ts": T0}) is None                   # did not advance
    assert gen.on_row({"ts": None}) is None


def test_event_seconds_accepts_datetimes_dates_and_numbers() -> None:
    assert event_seconds(dt.datetime(1970, 1, 1, 0, 1)) == 60.0
    assert event_seconds(dt.date(1970, 1, 2)) == 86400.0
    assert event_seconds(12) == 12.0
    with pytest.raises(TypeError):
        event_seconds("soon")


class WatermarkRecorder(DeadLettering):
    name = "wm"

    def __init__(self) -> None:
        self.seen: list[Any] = []

    def process_element(self, row) -> None:
        self.seen.append(row["order_id"])
        self.output.emit({"order_id": row["order_id"]})

    def process_watermark(self, watermark) -> None:
        self.seen.append(watermark)
        self.output.emit_watermark(watermark)


def test_chain_function_pushes_watermarks_into_the_chain(search_path, monkeypatch) -> None:
    process = C.Process("p", 1, call(search_path, "copy"), (C.Column("order_id", "STRING"),))
    chain = C.Chain("c", (process,), INPUT, process.returns, watermark=C.Watermark("ts", delay_s=5, interval_s=0))
    recorder = WatermarkRecorder()
    from dslc.runtime.core import arrow_chain

    monkeypatch.setitem(arrow_chain._FACTORIES, C.Process, lambda op, views: recorder)
    list(ChainFunction(chain)(iter([orders(("o1", "NL", 1.0, 10), ("o2", "NL", 1.0, 4), ("o3", "NL", 1.0, 20))])))
    base = T0.timestamp()
    assert recorder.seen == ["o1", Watermark(base + 5), "o2", "o3", Watermark(base + 15)]


# -- types ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("spark, arrow", [
    ("STRING", pa.string()), ("int", pa.int32()), ("INTEGER", pa.int32()), ("BIGINT", pa.int64()),
    ("LONG", pa.int64()), ("DOUBLE", pa.float64()), ("FLOAT", pa.float32()), ("BOOLEAN", pa.bool_()),
    ("TIMESTAMP", pa.timestamp("us", tz="UTC")), ("DATE", pa.date32()), ("DECIMAL(10,2)", pa.decimal128(10, 2)),
    ("decimal", pa.decimal128(10, 0)), ("SMALLINT", pa.int16()), ("TINYINT", pa.int8()), ("BINARY", pa.binary()),
    ("ARRAY<STRING>", pa.list_(pa.string())),
    ("MAP<STRING, ARRAY<DOUBLE>>", pa.map_(pa.string(), pa.list_(pa.float64()))),
    ("STRUCT<a: INT, b: DECIMAL(5, 1)>", pa.struct([("a", pa.int32()), ("b", pa.decimal128(5, 1))])),
])
def test_spark_types_map_to_arrow(spark, arrow) -> None:
    assert to_arrow_type(spark) == arrow


def test_unknown_type_is_rejected() -> None:
    with pytest.raises(ValueError, match="unsupported Spark SQL type 'INTERVAL'"):
        to_arrow_type("INTERVAL")


def test_loose_python_values_are_coerced_to_the_declared_types(search_path) -> None:
    from dslc.runtime.core.arrow_chain import rows_to_batch

    schema = to_arrow_schema((C.Column("d", "DECIMAL(6,2)"), C.Column("f", "DOUBLE"), C.Column("i", "BIGINT"),
                              C.Column("m", "MAP<STRING,INT>"), C.Column("a", "ARRAY<INT>")))
    batch = rows_to_batch([{"d": 1.5, "f": 2, "i": 3.0, "m": {"k": 1}, "a": [1, 2]}], schema)
    assert batch.to_pylist() == [{"d": Decimal("1.50"), "f": 2.0, "i": 3, "m": [("k", 1)], "a": [1, 2]}]
    from dslc.runtime.broadcast.state import FrozenDict, FrozenList

    schema2 = to_arrow_schema((C.Column("a", "ARRAY<STRING>"), C.Column("s", "STRUCT<x: INT>")))
    frozen = {"a": FrozenList("rules", ["p", "q"]), "s": FrozenDict("rules", {"x": 1})}
    assert rows_to_batch([frozen], schema2).to_pylist() == [{"a": ["p", "q"], "s": {"x": 1}}]
    with pytest.raises(ValueError, match="column 'i'"):
        rows_to_batch([{"i": "many"}], schema, "c")


def test_a_struct_column_of_dicts_is_written_as_from_pylist_writes_it(search_path) -> None:
    """The struct path (dicts as tuples: pyarrow's dict-with-datetime path is ten times slower)
    writes what from_pylist writes: a missing field NULL, an extra key ignored, a NULL struct."""
    from dslc.runtime.core.arrow_chain import rows_to_batch

    schema = to_arrow_schema((C.Column("id", "STRING"),
                              C.Column("how", "STRUCT<source: STRING, line: INT, answered_at: TIMESTAMP>")))
    at = dt.datetime(2026, 11, 28, 17, 0, 0, 123456, tzinfo=dt.timezone.utc)
    rows = [{"id": "a", "how": {"source": "call", "line": 3, "answered_at": at}},
            {"id": "b", "how": {"source": "store", "answered_at": at, "extra": 1}},
            {"id": "c", "how": None}, {"id": "d"}]
    batch = rows_to_batch(rows, schema)
    assert batch.equals(pa.RecordBatch.from_pylist(rows, schema=schema))
    assert batch.to_pylist()[1]["how"] == {"source": "store", "line": None, "answered_at": at}


def test_operator_chain_is_reusable_per_call(search_path) -> None:
    fn = chain_function(scoring_chain(search_path), {"rules": rules_snapshot()})
    for _ in range(2):
        assert len([r for b in fn(iter([orders(("o1", "DE", 20.0, 0))])) for r in b.to_pylist()]) == 1


def test_enrich_then_process_in_one_chain(search_path) -> None:
    enrich = C.Enrich("enriched", 4, call(search_path, "customer"), (C.Column("tier", "STRING"),), ("order_id",),
                      mode=C.Mode.UNORDERED, capacity=4, timeout_s=5)
    returns = (C.Column("order_id", "STRING"), C.Column("tier", "STRING"), C.Column("amount", "DOUBLE"))
    process = C.Process("tiered", 5, call(search_path, "tiered"), returns, key_columns=("order_id",))
    metrics: list[dict[str, Any]] = []
    fn = chain_function(C.Chain("c", (enrich, process), INPUT, returns, batch_size=3), {}, metrics.append)
    batches = [orders(*[(f"o{b}{i}", "NL", 50.0 + 40 * i, i) for i in range(4)]) for b in range(3)]
    rows = [row for batch in fn(iter(batches)) for row in batch.to_pylist()]
    assert sorted(r["order_id"] for r in rows) == sorted(f"o{b}{i}" for b in range(3) for i in range(4))
    assert all(r["tier"] == ("gold" if r["amount"] > 100 else "silver") for r in rows)
    (sink,) = metrics
    assert set(sink) == {"enriched", "tiered"}
    assert sink["tiered"]["elements_in"] == 12


def test_real_enrich_dead_letters_reach_the_dead_letter_column(search_path) -> None:
    enrich = C.Enrich("enriched", 4, call(search_path, "picky"), (C.Column("tier", "STRING"),), ("order_id",),
                      on_error=C.Outcome.DEAD_LETTER, timeout_s=5)
    returns = (C.Column("order_id", "STRING"), C.Column("tier", "STRING"), C.Column("amount", "DOUBLE"))
    process = C.Process("tiered", 5, call(search_path, "tiered"), returns)
    fn = chain_function(C.Chain("c", (enrich, process), INPUT, returns))
    rows = [r for b in fn(iter([orders(("o1", "NL", 1.0, 0), ("o2", "NL", -1.0, 0))])) for r in b.to_pylist()]
    normal = [r for r in rows if r[C.DEAD_LETTER_COLUMN] is None]
    letters = [r for r in rows if r[C.DEAD_LETTER_COLUMN] is not None]
    assert normal == [{"order_id": "o1", "tier": "gold", "amount": 1.0, C.DEAD_LETTER_COLUMN: None}]
    (letter,) = letters
    assert {k: v for k, v in letter.items() if k != C.DEAD_LETTER_COLUMN} == dict.fromkeys(["order_id", "tier", "amount"])
    assert "negative amount" in letter[C.DEAD_LETTER_COLUMN]
    assert json.loads(letter[C.DEAD_LETTER_COLUMN])


def _counts(metrics: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The reported metrics without the task's wall and CPU seconds (which vary run to run)."""
    return [{name: {k: v for k, v in m.items() if k not in ("task_seconds", "cpu_seconds")} for name, m in item.items()}
            for item in metrics]


def test_an_object_answered_for_a_string_column_is_written_as_json_text(search_path) -> None:
    """#48 item 25: `{'name': 'gold'}` (Python's repr) was written; the text is JSON, as
    Spark's to_json would write it."""
    from dslc.runtime.core.arrow_chain import rows_to_batch

    schema = to_arrow_schema((C.Column("tier", "STRING"), C.Column("tags", "STRING"), C.Column("vip", "STRING"),
                              C.Column("n", "STRING")))
    rows = [{"tier": {"name": "gold", "level": 2, "note": "ü"}, "tags": ["a", None], "vip": True, "n": 1.5},
            {"tier": "plain", "tags": None, "vip": False, "n": 7}]
    assert rows_to_batch(rows, schema).to_pylist() == [
        {"tier": '{"name":"gold","level":2,"note":"ü"}', "tags": '["a",null]', "vip": "true", "n": "1.5"},
        {"tier": "plain", "tags": None, "vip": "false", "n": "7"}]
    assert json.loads(rows_to_batch(rows, schema).to_pylist()[0]["tier"]) == rows[0]["tier"]
