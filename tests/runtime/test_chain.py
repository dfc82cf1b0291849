"""Operator chain: lifecycle order, direct chaining, streaming output, failures and dispose."""
from __future__ import annotations

from typing import Any

import pytest

from dslc.runtime.core.chain import OperatorChain
from dslc.runtime.core.operator import Output, Row, Watermark


class Recording:
    """A test operator: records lifecycle calls, maps rows, can fail on demand or hold rows until finish."""

    def __init__(self, name: str, log: list[str], *, fail_in: str | None = None, hold: bool = False,
                 tag: str | None = None, dead_letter_if: Any = None) -> None:
        self.name = name
        self.log = log
        self.fail_in = fail_in
        self.hold = hold
        self.tag = tag
        self.dead_letter_if = dead_letter_if
        self.held: list[Row] = []
        self.output: Output | None = None
        self.count = 0

    def _step(self, step: str) -> None:
        self.log.append(f"{step}:{self.name}")
        if self.fail_in == step:
            raise RuntimeError(f"{self.name} failed in {step}")

    def open(self, output: Output) -> None:
        self.output = output
        self._step("open")

    def process_element(self, row: Row) -> None:
        self.count += 1
        self._step("process")
        if self.dead_letter_if is not None and row.get("x") == self.dead_letter_if:
            self.output.emit_dead_letter({"operator": self.name, "x": row["x"]})
            return
        row = {**row, "path": row.get("path", "") + self.name}
        if self.hold:
            self.held.append(row)
        else:
            self.output.emit(row)

    def process_watermark(self, watermark: Watermark) -> None:
        self.log.append(f"watermark:{self.name}:{watermark.timestamp}")
        self.output.emit_watermark(watermark)

    def finish(self) -> None:
        self._step("finish")
        for row in self.held:
            self.output.emit(row)
        self.held.clear()

    def close(self) -> None:
        self._step("close")

    def dispose(self) -> None:
        self._step("dispose")

    def metrics(self) -> dict[str, Any]:
        return {"count": self.count}


def lifecycle(log: list[str]) -> list[str]:
    return [entry for entry in log if not entry.startswith(("process", "watermark"))]


def test_lifecycle_order_and_direct_chaining() -> None:
    log: list[str] = []
    chain = OperatorChain([Recording("a", log), Recording("b", log), Recording("c", log)])
    result = chain.run_all([{"x": 1}, Watermark(5.0), {"x": 2}])
    assert [row["path"] for row in result.rows] == ["abc", "abc"]
    assert lifecycle(log) == [
        "open:c", "open:b", "open:a",
        "finish:a", "finish:b", "finish:c",
        "close:a", "close:b", "close:c",
        "dispose:c", "dispose:b", "dispose:a",
    ]
    # an element goes through the whole chain before the next one enters
    assert [e for e in log if e.startswith(("process", "watermark"))] == [
        "process:a", "process:b", "process:c",
        "watermark:a:5.0", "watermark:b:5.0", "watermark:c:5.0",
        "process:a", "process:b", "process:c",
    ]
    assert chain.collector.watermark == Watermark(5.0)
    assert chain.metrics() == {"a": {"count": 2}, "b": {"count": 2}, "c": {"count": 2}}


def test_finish_flushes_held_rows_into_open_downstream() -> None:
    log: list[str] = []
    chain = OperatorChain([Recording("a", log, hold=True), Recording("b", log)])
    outputs = list(chain.run([[{"x": 1}], [{"x": 2}]]))
    # nothing comes out while 'a' holds its rows; finish flushes both through 'b', still open
    assert len(outputs) == 1
    assert [row["path"] for row in outputs[0].rows] == ["ab", "ab"]
    assert log.index("process:b") > log.index("finish:a")
    assert log.index("process:b") < log.index("close:b")


def test_run_yields_after_each_chunk_not_at_the_end() -> None:
    log: list[str] = []
    chain = OperatorChain([Recording("a", log)])

    def chunks():
        yield [{"x": 1}, {"x": 2}]
        log.append("second chunk requested")
        yield [{"x": 3}]

    runner = chain.run(chunks())
    first = next(runner)
    assert [row["x"] for row in first.rows] == [1, 2]
    assert "second chunk requested" not in log
    second = next(runner)
    assert [row["x"] for row in second.rows] == [3]
    with pytest.raises(StopIteration):
        next(runner)
    assert lifecycle(log)[-1] == "dispose:a"


def test_dead_letters_go_to_the_collector_past_downstream_operators() -> None:
    log: list[str] = []
    chain = OperatorChain([Recording("a", log, dead_letter_if=2), Recording("b", log)])
    result = chain.run_all([{"x": 1}, {"x": 2}, {"x": 3}])
    assert [row["x"] for row in result.rows] == [1, 3]
    assert result.dead_letters == [{"operator": "a", "x": 2}]
    assert chain.metrics()["b"] == {"count": 2}


@pytest.mark.parametrize("step", ["open", "process", "finish", "close"])
def test_dispose_always_runs_and_the_original_error_propagates(step: str) -> None:
    log: list[str] = []
    chain = OperatorChain([Recording("a", log), Recording("b", log, fail_in=step), Recording("c", log)])
    with pytest.raises(RuntimeError, match=f"b failed in {step}"):
        chain.run_all([{"x": 1}])
    assert lifecycle(log)[-3:] == ["dispose:c", "dispose:b", "dispose:a"]


def test_dispose_error_does_not_hide_the_original() -> None:
    log: list[str] = []
    chain = OperatorChain([Recording("a", log, fail_in="dispose"), Recording("b", log, fail_in="process")])
    with pytest.raises(RuntimeError, match="b failed in process") as info:
        chain.run_all([{"x": 1}])
    assert any("a failed in dispose" in note for note in info.value.__notes__)
    assert lifecycle(log)[-2:] == ["dispose:b", "dispose:a"]


def test_dispose_error_alone_is_raised_after_disposing_everything() -> None:
    log: list[str] = []
    chain = OperatorChain([Recording("a", log, fail_in="dispose"), Recording("b", log, fail_in="dispose")])
    with pytest.raises(RuntimeError, match="b failed in dispose") as info:
        chain.run_all([{"x": 1}])
    assert any("a failed in dispose" in note for note in info.value.__notes__)


def test_abandoned_run_disposes() -> None:
    log: list[str] = []
    chain = OperatorChain([Recording("a", log)])
    runner = chain.run([[{"x": 1}], [{"x": 2}]])
    next(runner)
    runner.close()
    assert lifecycle(log) == ["open:a", "dispose:a"]


def test_repeated_operator_names_get_positions_in_metrics() -> None:
    log: list[str] = []
    chain = OperatorChain([Recording("a", log), Recording("a", log)])
    chain.run_all([{"x": 1}])
    assert set(chain.metrics()) == {"a", "a#1"}


def test_empty_chain_is_rejected() -> None:
    with pytest.raises(ValueError):
        OperatorChain([])
