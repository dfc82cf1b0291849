"""ANSWER 'jmespath' and RETURNS (col TYPE PATH 'jmespath'): where the result sits in a JSON
answer, and where each column sits in one result.

Real APIs wrap what they answer (`{"data": {"customer": {...}}}`) and nest what a row needs
(`scores.risk`); the compiler has checked that every expression compiles, so here they are
compiled once per operator and applied per answer. A shape the expressions cannot use (a string
where an object is needed, a value that does not fit its column) is the element's error, named
by column and path, so ON ERROR decides instead of the task failing.

`jmespath` is pure Python; executors without it get it from the runtime zip (spark/runtime_zip.py).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import jmespath

from dslc.runtime.config import Enrich

from .base import BadItem, CallError, check_result_types


class AnswerShape:
    """One operator's ANSWER and PATHs, compiled; `result(answer)` is what a call returns."""

    def __init__(self, config: Enrich, check: Callable[[Mapping[str, Any]], str | None] | None) -> None:
        expression = getattr(config.call, "answer", None)
        self.answer_text = expression
        self.answer = jmespath.compile(expression) if expression else None
        self.paths = tuple((column, path, jmespath.compile(path)) for column, path in config.paths)
        self.path_of = {column: path for column, path, _ in self.paths}
        self.plain = tuple(c.name for c in config.returns if c.name not in self.path_of)
        self.check = check

    def found(self, answer: Any) -> Any:
        """What ANSWER finds in a whole answer (the answer itself without ANSWER)."""
        return self.answer.search(answer) if self.answer is not None else answer

    def result(self, answer: Any) -> Any:
        """The result of one element's answer: None (a miss), an object, or a list of objects,
        with PATH columns read and every column's type checked."""
        value = self.found(answer)
        if value is None or value == []:
            return None
        if isinstance(value, dict):
            return self._checked(self._columns(value))
        if isinstance(value, list):
            return [self._checked(self._columns(item, index)) for index, item in enumerate(value)]
        raise CallError(f"{self._where()} found a {_kind(value)} where an object or a list of objects is needed")

    def _columns(self, item: Any, index: int | None = None) -> dict[str, Any]:
        if not isinstance(item, dict):
            at = f" at index {index}" if index is not None else ""
            raise CallError(f"{self._where()} found a list holding a {_kind(item)}{at} where objects are needed")
        if not self.paths:
            return item
        row = {column: item.get(column) for column in self.plain}
        for column, path, compiled in self.paths:
            row[column] = compiled.search(item)
        return row

    def _checked(self, row: dict[str, Any]) -> dict[str, Any]:
        try:
            return check_result_types(row, self.check)
        except CallError as exc:
            message = str(exc)
            for column, path in self.path_of.items():     # name the path the value came from
                message = message.replace(f"field '{column}'", f"field '{column}' (PATH '{path}')", 1)
            raise CallError(message) from None

    def batch(self, answer: Any, rows: int) -> list[Any]:
        """BATCH: ANSWER applies to the whole answer and must find the array of per-element answers."""
        items = self.found(answer)
        if not isinstance(items, list):
            raise CallError(f"{self._where()} found a {_kind(items)} in the batch answer, expected a list of "
                            f"{rows} items (one per row)")
        if len(items) != rows:
            raise CallError(f"{self._where()} found {len(items)} items for {rows} rows")
        return items

    def item(self, answer: Any) -> Any:
        """One element's part of a batch answer (ANSWER already applied): PATHs read and types
        checked, or a BadItem that fails that element only."""
        try:
            if answer is None or answer == []:
                return None
            if isinstance(answer, dict):
                return self._checked(self._columns(answer))
            if isinstance(answer, list):
                return [self._checked(self._columns(item, index)) for index, item in enumerate(answer)]
            raise CallError(f"{self._where()} found a batch item that is a {_kind(answer)} where an object is needed")
        except CallError as exc:
            return BadItem(str(exc))

    def _where(self) -> str:
        return f"ANSWER '{self.answer_text}'" if self.answer_text else "the answer"


def shape_for(config: Enrich, check: Callable[[Mapping[str, Any]], str | None] | None) -> AnswerShape | None:
    """The operator's AnswerShape, or None when it has neither ANSWER nor PATH (the answer is used as is)."""
    if getattr(config.call, "answer", None) or config.paths:
        return AnswerShape(config, check)
    return None


def _kind(value: Any) -> str:
    """A JSON value's kind as a user reads it."""
    if value is None:
        return "null"
    return {dict: "object", list: "list", str: "string", bool: "boolean", int: "number",
            float: "number"}.get(type(value), type(value).__name__)
