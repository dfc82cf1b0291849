"""Operators run as one chain in one pass, so rows cross no serialisation between them (Flink's OperatorChain).

Lifecycle, as in Flink's StreamTask: `open` tail to head (an operator's downstream is ready before
it can emit), elements pushed through ChainingOutputs that call the next operator directly,
`finish` head to tail at end of input (an operator flushes what it holds into a downstream that is
still open), `close` head to tail, and `dispose` tail to head, always, even after an exception; an
exception in `dispose` never hides the one that caused it. A chain with an ENRICH runs its
elements, `finish` included, on the worker's event loop (loop_chain.py); the rest of the
lifecycle stays on the calling thread.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from dslc.runtime.core.operator import Operator, Output, Row, Watermark, runs_on_loop

Element = Row | Watermark


def _note(error: BaseException, text: str) -> None:
    """Attach context to an exception without replacing it (PEP 678 notes, Python 3.11+)."""
    add_note = getattr(error, "add_note", None)
    if callable(add_note):
        add_note(text)


@dataclass(slots=True)
class Emitted:
    """What the chain produced since the last drain: output rows and dead letters, in order."""

    rows: list[Row] = field(default_factory=list)
    dead_letters: list[Row] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.rows or self.dead_letters)


class Collector:
    """The chain's tail output: gathers rows and dead letters until drained.

    Operators emit from `process_element`, `process_watermark` and `finish`, in the thread that
    drives the chain (the loop, for a chain with an ENRICH, while the chain's thread waits for
    it); the chain's thread drains between, so a row costs one list append and no lock."""

    def __init__(self) -> None:
        self._rows: list[Row] = []
        self._dead_letters: list[Row] = []
        self.emit = self._rows.append   # no method call of ours per row
        self.watermark: Watermark | None = None

    def emit_watermark(self, watermark: Watermark) -> None:
        if self.watermark is None or watermark.timestamp > self.watermark.timestamp:
            self.watermark = watermark

    def emit_dead_letter(self, letter: Row) -> None:
        self._dead_letters.append(letter)

    def drain(self) -> Emitted:
        """Return and forget everything collected so far (the lists stay, so `emit` stays bound)."""
        pending = Emitted(self._rows.copy(), self._dead_letters.copy())
        self._rows.clear()
        self._dead_letters.clear()
        return pending


class ChainingOutput:
    """Output that hands elements straight to the next operator; dead letters skip to the collector."""

    def __init__(self, operator: Operator, collector: Collector) -> None:
        self._operator = operator
        self._collector = collector
        self.emit = operator.process_element   # a row goes straight to the next operator

    def emit_watermark(self, watermark: Watermark) -> None:
        self._operator.process_watermark(watermark)

    def emit_dead_letter(self, letter: Row) -> None:
        self._collector.emit_dead_letter(letter)


class OperatorChain:
    """A sequence of operators driven through Flink's lifecycle in one pass over the input."""

    def __init__(self, operators: Sequence[Operator]) -> None:
        if not operators:
            raise ValueError("an operator chain needs at least one operator")
        self.operators: tuple[Operator, ...] = tuple(operators)
        self.collector = Collector()
        self.elements_in = 0
        self._opened = False
        self._ended = False
        self._disposed = False
        self._driver: Any = None   # a LoopDriver, set by `open` when the chain has an ENRICH (loop_chain.py)

    # -- lifecycle, step by step -------------------------------------------------------------

    def open(self) -> None:
        """Open tail to head, giving each operator the output that feeds its successor."""
        if self._opened:
            raise RuntimeError("operator chain is already open")
        self._opened = True
        if any(runs_on_loop(operator) for operator in self.operators):
            from dslc.runtime.core.loop_chain import (
                LoopDriver,  # imported lazily: only a chain with an ENRICH needs the loop
            )

            self._driver = LoopDriver(self.operators)
        output: Output = self.collector
        for operator in reversed(self.operators):
            operator.open(output)
            output = ChainingOutput(operator, self.collector)

    def end_input(self) -> None:
        """End of input: finish head to tail, then close head to tail."""
        if self._ended:
            return
        self._ended = True
        if self._driver is not None:
            self._driver.call(self._driver.finish())
        else:
            for operator in self.operators:
                operator.finish()
        for operator in self.operators:
            operator.close()

    def dispose(self, error: BaseException | None = None) -> None:
        """Dispose tail to head, every operator; errors here are attached to `error` if one is given."""
        if self._disposed:
            return
        self._disposed = True
        failures: list[BaseException] = []
        for operator in reversed(self.operators):
            try:
                operator.dispose()
            except Exception as exc:  # keep disposing the rest
                failures.append(exc)
        if not failures:
            return
        if error is not None:
            for failure in failures:
                _note(error, f"while disposing after this error: {type(failure).__name__}: {failure}")
            return
        first = failures[0]
        for failure in failures[1:]:
            _note(first, f"another operator also failed to dispose: {type(failure).__name__}: {failure}")
        raise first

    def drain(self) -> Emitted:
        """Rows and dead letters emitted since the last drain."""
        return self.collector.drain()

    # -- whole runs -------------------------------------------------------------------------

    def run(self, chunks: Iterable[Iterable[Element]], every_chunk: bool = False) -> Iterator[Emitted]:
        """Run the whole lifecycle over chunks of elements, yielding output after each chunk
        (`every_chunk`: even when there is none, so the caller gets a turn after each).

        Output still held by an operator (e.g. in-flight async calls) comes out in a later chunk
        or after end of input. Closing the generator early disposes the chain.
        """
        error: BaseException | None = None
        try:
            self.open()
            head = self.operators[0]
            process_element, process_watermark = head.process_element, head.process_watermark
            driver = self._driver
            flushes = [op.flush for op in self.operators if hasattr(op, "flush")]
            for chunk in chunks:
                if driver is not None:       # the whole chunk, on the loop
                    self.elements_in += driver.call(driver.chunk(chunk))
                else:
                    for element in chunk:    # a row or a watermark, to the head operator
                        if type(element) is Watermark:
                            process_watermark(element)
                        else:
                            self.elements_in += 1
                            process_element(element)
                    for flush in flushes:    # an operator holding rows for a batch judges them
                        flush()
                emitted = self.drain()
                if emitted or every_chunk:
                    yield emitted
            self.end_input()
            emitted = self.drain()
            if emitted:
                yield emitted
        except BaseException as exc:
            error = exc
            raise
        finally:
            self.dispose(error)

    def run_all(self, elements: Iterable[Element]) -> Emitted:
        """Run the lifecycle over all elements as one chunk and return everything emitted."""
        total = Emitted()
        for emitted in self.run([elements]):
            total.rows.extend(emitted.rows)
            total.dead_letters.extend(emitted.dead_letters)
        return total

    def metrics(self) -> dict[str, dict[str, Any]]:
        """Each operator's metrics by name (a repeated name gets '#<position>')."""
        result: dict[str, dict[str, Any]] = {}
        for position, operator in enumerate(self.operators):
            name = operator.name if operator.name not in result else f"{operator.name}#{position}"
            result[name] = dict(operator.metrics())
        return result
