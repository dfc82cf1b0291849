"""PROCESS: a user function maps each row to zero or more RETURNS rows, reading broadcast states."""
from __future__ import annotations

import inspect
import types
from collections.abc import Iterable, Mapping
from typing import Any

from dslc.runtime import user_code
from dslc.runtime.config import Process
from dslc.runtime.core.operator import ElementFailure, Output, Row, Watermark
from dslc.runtime.schema import results as result_types

_PLAIN_ITERABLES = (list, tuple, types.GeneratorType)


class ProcessOperator:
    """Calls `fn(row, *states)` per row; a user exception fails the element with its key and line."""

    def __init__(self, config: Process, states: Mapping[str, Mapping[Any, Any]] | None = None) -> None:
        states = states or {}
        missing = [name for name in config.states if name not in states]
        if missing:
            raise ValueError(
                f"PROCESS {config.name} (line {config.line}) reads broadcast state "
                f"{', '.join(repr(m) for m in missing)}, which this chain was not given"
            )
        self.name = config.name
        self.config = config
        self._state_args = tuple(states[name] for name in config.states)
        self._columns = tuple(column.name for column in config.returns)
        self._column_set = frozenset(self._columns)
        self._check = result_types.checker(config.returns)
        self._output: Output | None = None
        self._emit: Any = None   # the output's emit, bound once at open
        self._target: Any = None
        self._fn: Any = None
        self._user_open = False
        self.elements_in = 0
        self.elements_out = 0
        self.errors = 0

    def open(self, output: Output) -> None:
        self._output = output
        self._emit = output.emit
        target = user_code.resolve(self.config.call)
        self._target = target
        self._fn = target
        if not callable(target):
            raise user_code.UserCodeError(f"'{self.config.call.ref}' is not callable")
        if not (inspect.isroutine(target) or isinstance(target, type)):
            user_code.lifecycle(target, "open")
            self._user_open = True

    def process_element(self, row: Row) -> None:
        self.elements_in += 1
        try:
            value = self._fn(row, *self._state_args)
            # the usual answer, one dict, makes one row without a list of results
            one = self._row(value) if type(value) is dict else None
            results = self._results(value) if one is None else None
        except Exception as exc:
            self.errors += 1
            key = {column: row.get(column) for column in self.config.key_columns}
            raise ElementFailure(self.config.name, self.config.line, key, exc) from exc
        # emitted outside the `try`: a failure downstream is the downstream operator's
        if one is not None:
            self.elements_out += 1
            self._emit(one)
        elif results:
            self.elements_out += len(results)
            emit = self._emit
            for result in results:
                emit(result)

    def _results(self, value: Any) -> list[Row]:
        """Normalise any other answer than one dict to a list of rows with exactly the RETURNS
        columns."""
        if value is None:
            return []
        if type(value) in _PLAIN_ITERABLES:   # the usual ones first: no ABC checks per row
            items: Iterable[Any] = value
        elif isinstance(value, Mapping):
            items = (value,)
        elif isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
            raise TypeError(f"PROCESS function must return a dict, an iterable of dicts or None, got {type(value).__name__}")
        else:
            items = value
        rows = []
        to_row = self._row
        for item in items:  # iterating runs a generator's body, so its errors land here too
            if type(item) is not dict and not isinstance(item, Mapping):
                raise TypeError(f"PROCESS function produced a {type(item).__name__}, expected a dict")
            rows.append(to_row(item))
        return rows

    def _row(self, item: Mapping[str, Any]) -> Row:
        """A copy of one result (the user may reuse the dict) with exactly the RETURNS columns,
        their types checked; copying whole is cheaper when the keys are those already, as they
        usually are."""
        columns = self._columns
        row = dict(item) if item.keys() == self._column_set else dict(zip(columns, map(item.get, columns)))
        check = self._check
        if check is not None:
            problem = check(row)
            if problem:
                raise TypeError(f"PROCESS result {problem}")
        return row

    def process_watermark(self, watermark: Watermark) -> None:
        assert self._output is not None, "process_watermark before open"
        self._output.emit_watermark(watermark)

    def finish(self) -> None:
        pass

    def close(self) -> None:
        self._close_user()

    def dispose(self) -> None:
        self._close_user()  # close() after a failure too, as the language contract says

    def _close_user(self) -> None:
        if self._user_open:
            self._user_open = False
            user_code.lifecycle(self._target, "close")

    def metrics(self) -> dict[str, Any]:
        return {"elements_in": self.elements_in, "elements_out": self.elements_out, "errors": self.errors}
