"""`{column}` placeholders of MODEL prompts and EMBEDDING inputs, filled with the row's text: one
definition for the checker, the runtime and the call key of recordings and `dslc test`.

The compiler imports this module, so it imports nothing else of the runtime."""
from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from .url import PLACEHOLDER


class UnfillableText(ValueError):
    """A placeholder's column is null or missing: the element cannot make its request."""


@functools.lru_cache(maxsize=256)
def _template(template: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    pieces = PLACEHOLDER.split(template)
    return tuple(pieces[0::2]), tuple(pieces[1::2])


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (bytes, bytearray)):
        return value.decode("utf-8", "replace")
    return str(value)


def fill(template: str, row: Mapping[str, Any]) -> str:
    """The template with every `{column}` replaced by the row value's text; UnfillableText when
    a value is null or missing (a prompt about nothing is not sent)."""
    literals, columns = _template(template)
    if not columns:
        return template
    parts = [literals[0]]
    for column, literal in zip(columns, literals[1:]):
        value = row.get(column)
        if value is None:
            raise UnfillableText(f"placeholder column {column} is {'null' if column in row else 'missing'}")
        parts.append(_text(value))
        parts.append(literal)
    return "".join(parts)


def fill_text(template: str, row: Mapping[str, Any]) -> str | None:
    """`fill`, or None when it cannot be filled (a call key never raises)."""
    try:
        return fill(template, row)
    except UnfillableText:
        return None
