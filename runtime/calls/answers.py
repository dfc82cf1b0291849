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

import re
from collections.abc import Callable, Mapping
from typing import Any

import jmespath
from jmespath import visitor

from dslc.runtime.config import Enrich

from .base import BadItem, CallError, answer_error, check_result_types

_DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*\Z")


def compiled(expression: str) -> Callable[[Any], Any]:
    """`expression` as a function of a JSON value. The usual path (`data.customer`, `scores.risk`)
    is a walk through objects, which is what JMESPath does with it (a key of something that is not
    an object is null); anything else runs through jmespath's interpreter, made once."""
    if _DOTTED.match(expression):
        keys = tuple(expression.split("."))
        if len(keys) == 1:
            key = keys[0]
            return lambda value: value.get(key) if type(value) is dict else None

        def walk(value: Any) -> Any:
            for key in keys:
                if type(value) is not dict:
                    return None
                value = value.get(key)
            return value
        return walk
    tree = jmespath.compile(expression).parsed
    interpreter = visitor.TreeInterpreter()
    return lambda value: interpreter.visit(tree, value)


class AnswerShape:
    """One operator's ANSWER and PATHs, compiled; `result(answer)` is what a call returns."""

    def __init__(self, config: Enrich, check: Callable[[Mapping[str, Any]], str | None] | None) -> None:
        expression = getattr(config.call, "answer", None)
        self.answer_text = expression
        self.answer = compiled(expression) if expression else None
        self.paths = tuple((column, path, compiled(path)) for column, path in config.paths)
        self.path_of = {column: path for column, path, _ in self.paths}
        self.plain = tuple(c.name for c in config.returns if c.name not in self.path_of)
        self.check = check

    def found(self, answer: Any) -> Any:
        """What ANSWER finds in a whole answer (the answer itself without ANSWER)."""
        return self.answer(answer) if self.answer is not None else answer

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
        raise answer_error(f"{self._where()} found {_a(value)} where an object or a list of objects is needed")

    def _columns(self, item: Any, index: int | None = None) -> dict[str, Any]:
        if not isinstance(item, dict):
            at = f" at index {index}" if index is not None else ""
            raise answer_error(f"{self._where()} found a list holding {_a(item)}{at} where objects are needed")
        if not self.paths:
            return item
        row = {column: item.get(column) for column in self.plain}
        for column, _, find in self.paths:
            row[column] = find(item)
        return row

    def _checked(self, row: dict[str, Any]) -> dict[str, Any]:
        try:
            return check_result_types(row, self.check)
        except CallError as exc:
            message = str(exc)
            for column, path in self.path_of.items():     # name the path the value came from
                message = message.replace(f"field '{column}'", f"field '{column}' (PATH '{path}')", 1)
            raise answer_error(message) from None

    def batch(self, answer: Any, rows: int) -> list[Any]:
        """BATCH: ANSWER applies to the whole answer and must find the array of per-element answers."""
        items = self.found(answer)
        if not isinstance(items, list):
            raise CallError(f"{self._where()} found {_a(items)} in the batch answer, expected a list of "
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
            raise CallError(f"{self._where()} found a batch item that is {_a(answer)} where an object is needed")
        except CallError as exc:
            return BadItem(str(exc))

    def _where(self) -> str:
        return f"ANSWER '{self.answer_text}'" if self.answer_text else "the answer"


def shape_for(config: Enrich, check: Callable[[Mapping[str, Any]], str | None] | None) -> AnswerShape | None:
    """The operator's AnswerShape, or None when it has neither ANSWER nor PATH (the answer is used as is)."""
    if getattr(config.call, "answer", None) or config.paths:
        return AnswerShape(config, check)
    return None


def _a(value: Any) -> str:
    """'an object', 'a string', ...: a JSON value's kind with its article."""
    kind = _kind(value)
    return ("an " if kind[0] in "aeiou" else "a ") + kind


def _kind(value: Any) -> str:
    """A JSON value's kind as a user reads it."""
    if value is None:
        return "null"
    return {dict: "object", list: "list", str: "string", bool: "boolean", int: "number",
            float: "number"}.get(type(value), type(value).__name__)
