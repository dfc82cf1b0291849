"""The operator protocol every runtime operator implements (Flink's StreamOperator, trimmed).

A chain calls, in this order: `open` (tail to head, so an operator's downstream is ready before
it emits), `process_element` / `process_watermark` for each input element, `finish` at end of
input (head to tail: an operator flushes what it holds, e.g. in-flight async requests, into the
next one, which is still open), `close` (head to tail), and `dispose` always, even after an
exception. Elements are plain dicts, one per row. An operator that holds rows to judge them
together (EXPECT, expect_operator.py) also has `flush`, which the chain calls head to tail at the
end of each chunk of input, so nothing waits in it from one chunk to the next.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

Row = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Watermark:
    """An event-time watermark flowing through the chain as an element."""

    timestamp: float  # seconds since the epoch


class Output(Protocol):
    """Where an operator emits: the next operator in the chain, or the chain's collector."""

    def emit(self, row: Row) -> None: ...

    def emit_watermark(self, watermark: Watermark) -> None: ...

    def emit_dead_letter(self, letter: Row) -> None: ...


class Operator(Protocol):
    """One step of a chain."""

    name: str

    def open(self, output: Output) -> None: ...

    def process_element(self, row: Row) -> None: ...

    def process_watermark(self, watermark: Watermark) -> None: ...

    def finish(self) -> None: ...

    def close(self) -> None: ...

    def dispose(self) -> None: ...

    def metrics(self) -> dict[str, Any]: ...


def runs_on_loop(operator: Operator) -> bool:
    """True for an operator a chain drives on the worker's event loop (an ENRICH: it has
    `run_on_loop`, see loop_chain.py)."""
    return hasattr(operator, "run_on_loop")


class ElementFailure(RuntimeError):
    """A failing element: names the operator, the DSL line and the element's key."""

    def __init__(self, operator: str, line: int, key: dict[str, Any], cause: BaseException | str):
        self.operator = operator
        self.line = line
        self.key = key
        self.cause = cause
        key_text = ", ".join(f"{k}={v!r}" for k, v in key.items()) or "<no key>"
        super().__init__(
            f"operator '{operator}' (line {line}) failed on element {key_text}: "
            f"{cause if isinstance(cause, str) else f'{type(cause).__name__}: {cause}'}"
        )
