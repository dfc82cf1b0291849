"""The function Spark's mapInArrow calls: one partition of Arrow batches through one operator chain.

Each call builds the chain's operators from its frozen config, gives PROCESS operators read-only
views of the broadcast snapshots, generates periodic bounded-out-of-orderness watermarks when the
chain has one, and yields output batches after every input batch so the partition streams.
"""
from __future__ import annotations

import datetime as dt
import json
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from dslc.runtime import config as C
from dslc.runtime.broadcast.state import (
    BroadcastState,
    BroadcastStateError,
    FrozenDict,
    FrozenList,
    ReadOnlyView,
    Snapshot,
    thaw,
)
from dslc.runtime.core.chain import Emitted, OperatorChain
from dslc.runtime.core.operator import Operator, Row, Watermark
from dslc.runtime.core.process_operator import ProcessOperator
from dslc.runtime.core.stored_answers import stored_answers
from dslc.runtime.schema.arrow import to_arrow_schema

MetricsSink = Callable[[dict[str, Any]], None]


def _build_process(op: C.Process, views: Mapping[str, ReadOnlyView]) -> Operator:
    return ProcessOperator(op, {name: views[name] for name in op.states})


def _build_enrich(op: C.Enrich, views: Mapping[str, ReadOnlyView]) -> Operator:
    from dslc.runtime.core.async_operator import (
        EnrichOperator,  # imported lazily: a separate module
    )

    return EnrichOperator(op)


def _build_expect(op: C.Expect, views: Mapping[str, ReadOnlyView]) -> Operator:
    from dslc.runtime.core.expect_operator import ExpectOperator

    return ExpectOperator(op)


_FACTORIES: dict[type, Callable[[Any, Mapping[str, ReadOnlyView]], Operator]] = {
    C.Process: _build_process,
    C.Enrich: _build_enrich,
    C.Expect: _build_expect,
}


def build_operators(chain: C.Chain, views: Mapping[str, ReadOnlyView]) -> list[Operator]:
    """Fresh operator instances for one run of the chain."""
    operators = []
    for op in chain.operators:
        factory = _FACTORIES.get(type(op))
        if factory is None:
            raise TypeError(f"chain '{chain.name}': no runtime operator for {type(op).__name__}")
        operators.append(factory(op, views))
    return operators


def state_views(chain: C.Chain, states: Mapping[str, Snapshot]) -> dict[str, ReadOnlyView]:
    """Read-only views of every broadcast state the chain's operators read."""
    needed = [name for op in chain.operators if isinstance(op, C.Process) for name in op.states]
    views: dict[str, ReadOnlyView] = {}
    for name in dict.fromkeys(needed):
        snapshot = states.get(name)
        if snapshot is None:
            raise BroadcastStateError(f"chain '{chain.name}' reads broadcast state '{name}' but got no snapshot of it")
        restored = BroadcastState.restore(snapshot)
        if name not in restored.names and len(restored.names) == 1:
            name_in_snapshot = restored.names[0]  # a snapshot of a single state under another name
        else:
            name_in_snapshot = name
        views[name] = ReadOnlyView(name, restored._map(name_in_snapshot))
    return views


def event_seconds(value: Any) -> float | None:
    """Event time as epoch seconds: datetimes (naive = UTC), dates, numbers; None for null."""
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.timezone.utc)
        return value.timestamp()
    if isinstance(value, dt.date):
        return dt.datetime(value.year, value.month, value.day, tzinfo=dt.timezone.utc).timestamp()
    if isinstance(value, (int, float, Decimal)) and not isinstance(value, bool):
        return float(value)
    raise TypeError(f"cannot use a {type(value).__name__} as event time: {value!r}")


class WatermarkGenerator:
    """Flink's periodic bounded-out-of-orderness generator: max(event time) - delay, every interval."""

    def __init__(self, spec: C.Watermark, clock: Callable[[], float] = time.monotonic) -> None:
        self.spec = spec
        self._clock = clock
        self._max: float | None = None
        self._last_emitted: float | None = None
        self._last_check = clock()

    def on_row(self, row: Row) -> Watermark | None:
        """Record the row's event time; return a watermark when the interval is due and it advanced."""
        seconds = event_seconds(row.get(self.spec.column))
        if seconds is not None and (self._max is None or seconds > self._max):
            self._max = seconds
        now = self._clock()
        if now - self._last_check < self.spec.interval_s or self._max is None:
            return None
        self._last_check = now
        candidate = self._max - self.spec.delay_s
        if self._last_emitted is not None and candidate <= self._last_emitted:
            return None
        self._last_emitted = candidate
        return Watermark(candidate)


def _coerce(value: Any, arrow_type: pa.DataType) -> Any:
    """Loose Python values to what pyarrow accepts for the declared type (ints to floats, floats to decimals)."""
    if value is None:
        return None
    if isinstance(value, (FrozenDict, FrozenList)):
        value = thaw(value)  # a broadcast state value passed through by user code
    if pa.types.is_decimal(arrow_type) and isinstance(value, (int, float, str)) and not isinstance(value, bool):
        return Decimal(str(value))
    if pa.types.is_floating(arrow_type) and isinstance(value, (int, Decimal, str)) and not isinstance(value, bool):
        return float(value)
    if pa.types.is_integer(arrow_type) and isinstance(value, float) and value.is_integer():
        return int(value)
    if pa.types.is_string(arrow_type) and not isinstance(value, str):
        return _text(value)
    return value


def _text(value: Any) -> str:
    """A value answered for a STRING column as text: an object, a list or a boolean as its JSON
    (compact, as Spark's to_json writes it: `{"name":"gold"}`, `true`), never Python's repr
    (`{'name': 'gold'}`, `True`); a number as it prints."""
    if isinstance(value, (dict, list, tuple, bool)):
        try:
            return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
        except (TypeError, ValueError):
            pass
    return str(value)


def rows_to_batch(rows: list[Row], schema: pa.Schema, chain_name: str = "") -> pa.RecordBatch:
    """One RecordBatch with exactly `schema`; a value that does not fit names its column."""
    try:
        if any(pa.types.is_struct(field.type) for field in schema):
            return _with_struct_tuples(rows, schema)
        return pa.RecordBatch.from_pylist(rows, schema=schema)
    except Exception:  # noqa: BLE001 - slow path below coerces, or names the column that does not fit
        pass
    arrays = []
    for field in schema:
        values = [row.get(field.name) for row in rows]
        try:
            arrays.append(pa.array([_coerce(v, field.type) for v in values], type=field.type))
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError, ArithmeticError) as exc:
            bad = next((v for v in values if v is not None), None)
            raise ValueError(
                f"chain '{chain_name}': column '{field.name}' is declared {field.type} "
                f"but got {type(bad).__name__} {bad!r}: {exc}"
            ) from exc
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _with_struct_tuples(rows: list[Row], schema: pa.Schema) -> pa.RecordBatch:
    """`rows` column by column, a struct column's dicts handed to pyarrow as tuples of its fields:
    pyarrow converts a dict holding a timezone-aware datetime (PROVENANCE's `answered_at`) about ten
    times slower than a tuple (15 us a row against 1.6), which made that column most of a live
    run's cost of PROVENANCE. A missing field is NULL and an extra key ignored, as from_pylist
    does; a column whose values are not all dicts goes as it is."""
    arrays = []
    for field in schema:
        values = [row.get(field.name) for row in rows]
        if pa.types.is_struct(field.type) and all(v is None or type(v) is dict for v in values):
            names = [child.name for child in field.type]
            values = [None if v is None else tuple(map(v.get, names)) for v in values]
        arrays.append(pa.array(values, type=field.type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


class ChainFunction:
    """Picklable callable for mapInArrow: Iterator[RecordBatch] -> Iterator[RecordBatch] per partition."""

    def __init__(
        self,
        chain: C.Chain,
        states: Mapping[str, Snapshot] | None = None,
        metrics_sink: MetricsSink | None = None,
        clock: Callable[[], float] = time.monotonic,
        progress: str | None = None,
    ) -> None:
        self.chain = chain
        self.states = dict(states or {})
        self.metrics_sink = metrics_sink
        self.clock = clock
        self.progress = progress     # 'host:port/token' of the driver's live progress collector
        extra = [(C.DEAD_LETTER_COLUMN, pa.string())] if chain.dead_letters else []
        self.schema = to_arrow_schema(chain.output_columns, extra)

    def __call__(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        operators = build_operators(self.chain, state_views(self.chain, self.states))
        chain = OperatorChain(operators)
        generator = WatermarkGenerator(self.chain.watermark, self.clock) if self.chain.watermark else None
        # the task's clock (wall, CPU) starts with its first input batch: what came before (opening
        # the operators, Spark handing over the first rows) is start-up, not what limits the chain
        started = [time.perf_counter(), busy_seconds()]
        reporter = None
        if self.progress:
            from dslc.runtime.progress import TaskReporter
            reporter = TaskReporter(self.progress, self.chain.name, lambda: task_figures(chain, started)).start()
        failed = False
        joined: list[pa.RecordBatch] = []     # rows with joined answers, in order with the chain's output
        batches = _clocked(batches, started)
        chunks = self._chunks(batches, generator) if self.chain.joined is None else \
            self._joined_chunks(batches, operators[0], joined)
        try:
            for emitted in chain.run(chunks, every_chunk=self.chain.joined is not None):
                yield from joined
                joined.clear()
                yield from self._to_batches(emitted)
            yield from joined
        except BaseException:
            failed = True
            raise
        finally:
            if reporter is not None:
                reporter.stop()
            self._report(chain, failed, started)

    def _chunks(self, batches: Iterable[pa.RecordBatch], generator: WatermarkGenerator | None) -> Iterator[Iterable[Any]]:
        for batch in batches:
            rows = batch.to_pylist()
            yield rows if generator is None else self._elements(rows, generator)

    def _joined_chunks(self, batches: Iterable[pa.RecordBatch], head: Operator,
                       joined: list[pa.RecordBatch]) -> Iterator[Iterable[Any]]:
        """The rows with a stored answer (joined by Spark, or looked up here) leave at once, Arrow
        to Arrow, counted by the head ENRICH as store hits (`joined`, handed out before the
        chain's next output); the others go through the chain. ORDERED: only a batch of hits
        alone, with nothing in flight ahead of it, may leave at once; any other batch goes
        through the chain whole (the store answers its hits there)."""
        spec = self.chain.joined
        assert spec is not None
        stored = stored_answers(spec.table, len(spec.keys)) if spec.table is not None else None
        for batch in batches:
            if stored is None:         # Spark joined them: the flag says which rows have an answer
                hit = pc.fill_null(batch.column(spec.flag), False)
                positions = None
            else:                      # looked up here
                positions = pa.array(stored.positions(batch, spec.keys), pa.int64())
                hit = pc.greater_equal(positions, 0)
            hits = pc.sum(hit).as_py() or 0
            if spec.ordered and (hits < batch.num_rows or head.busy):
                hits = 0
            if hits:
                whole = hits == batch.num_rows
                answered = batch if whole else batch.filter(hit)
                if stored is not None:
                    answered = stored.answered(answered, positions if whole else positions.filter(hit))
                joined.append(self._as_output(answered))
                head.count_joined(hits)
                batch = batch.slice(0, 0) if whole else batch.filter(pc.invert(hit))
            yield batch.select(list(spec.columns)).to_pylist()

    def _as_output(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """A batch of joined rows with exactly the chain's output schema."""
        arrays = []
        for field in self.schema:
            if field.name == C.DEAD_LETTER_COLUMN:
                arrays.append(pa.nulls(batch.num_rows, field.type))
            else:
                column = batch.column(field.name)
                arrays.append(column if column.type == field.type else column.cast(field.type))
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)

    @staticmethod
    def _elements(rows: list[Row], generator: WatermarkGenerator | None) -> Iterator[Any]:
        for row in rows:
            yield row
            if generator is not None:
                watermark = generator.on_row(row)
                if watermark is not None:
                    yield watermark

    def _to_batches(self, emitted: Emitted) -> Iterator[pa.RecordBatch]:
        rows = emitted.rows
        if emitted.dead_letters and not self.chain.dead_letters:
            raise RuntimeError(
                f"chain '{self.chain.name}' got a dead letter but no operator routes to DEAD LETTER: "
                f"{emitted.dead_letters[0]!r}"
            )
        if emitted.dead_letters:
            rows = rows + [
                {C.DEAD_LETTER_COLUMN: json.dumps(letter, sort_keys=True, default=str)}
                for letter in emitted.dead_letters
            ]
        size = max(1, self.chain.batch_size)
        for start in range(0, len(rows), size):
            yield rows_to_batch(rows[start:start + size], self.schema, self.chain.name)

    def _report(self, chain: OperatorChain, failed: bool, started: list[float]) -> None:
        if self.metrics_sink is None:
            return
        try:
            self.metrics_sink(task_figures(chain, started))
        except Exception:
            if not failed:
                raise  # after a failure, the original error matters more than the metrics


def _clocked(batches: Iterable[pa.RecordBatch], started: list[float]) -> Iterator[pa.RecordBatch]:
    """`batches`, setting `started` (wall, CPU) when the first one arrives."""
    first = True
    for batch in batches:
        if first:
            first = False
            started[:] = [time.perf_counter(), busy_seconds()]
        yield batch


def busy_seconds() -> float:
    """Seconds this process's threads were on a CPU or runnable and waiting for one (Linux's
    schedstat: a worker starved by a busy machine counts as busy too); CPU time elsewhere."""
    total = 0.0
    try:
        for task in os.scandir("/proc/self/task"):
            with open(f"{task.path}/schedstat", "rb") as handle:
                on_cpu, waiting, _ = handle.read().split()
            total += (int(on_cpu) + int(waiting)) / 1e9
    except (OSError, ValueError):
        return time.process_time()
    return total


def task_figures(chain: OperatorChain, started: list[float]) -> dict[str, dict[str, Any]]:
    """Each operator's metrics with the task's wall and CPU seconds so far, from its first input
    batch (the Python worker runs one task at a time, so its process CPU time is this task's;
    `cpu` in runtime/diagnosis.py)."""
    wall, cpu = time.perf_counter() - started[0], busy_seconds() - started[1]
    return {name: {**m, "task_seconds": round(wall, 6), "cpu_seconds": round(cpu, 6)}
            for name, m in chain.metrics().items()}


def chain_function(
    chain: C.Chain,
    states: Mapping[str, Snapshot] | None = None,
    metrics_sink: MetricsSink | None = None,
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The mapInArrow function running `chain` over one partition's batches."""
    return ChainFunction(chain, states, metrics_sink)
