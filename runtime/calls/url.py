"""`{column}` placeholders of HTTP URL templates: one definition for the checker and the runtime,
so a URL that `dslc check` accepts is filled exactly the same way on the executors.

The compiler imports this module, so it imports nothing else of the runtime."""
from __future__ import annotations

import functools
import re
import urllib.parse
from collections.abc import Mapping
from typing import Any

# `${NAME}` is a secret (runtime/secrets.py), not a column: the `$` before it keeps it out
PLACEHOLDER = re.compile(r"(?<!\$)\{([A-Za-z_][A-Za-z0-9_]*)\}")


def placeholders(url: str) -> tuple[str, ...]:
    """Column names of the `{col}` placeholders in a URL template, in order, without repeats."""
    return tuple(dict.fromkeys(PLACEHOLDER.findall(url)))


class UnfillableUrl(ValueError):
    """A row value cannot fill the template (null, missing, a dot segment); the call kind makes it
    the element's error."""


def fill_url(template: str, row: Mapping[str, Any]) -> str:
    """The URL with every placeholder replaced by its fully percent-encoded row value.

    Encoding keeps a value inside its piece of the URL ('/', '?', '#', '@', ':' are escaped), but
    a whole path segment of '.' or '..' needs no escape and would move the request elsewhere once
    a server or proxy normalises the path ('/users/../admin' is '/admin'); an empty segment is
    merged away by many. Such a value is an error of the element (ON ERROR decides), never a call.
    """
    literals, columns = _template(template)
    if not columns:
        return template
    parts = [literals[0]]
    suspect = False         # only values '', '.' or '..' can make such a segment
    for column, literal in zip(columns, literals[1:]):
        if column not in row:
            raise UnfillableUrl(f"placeholder column {column} is not in the row")
        v = row[column]
        if v is None:
            raise UnfillableUrl(f"placeholder column {column} is null")
        encoded = urllib.parse.quote(str(v), safe="")
        suspect = suspect or encoded in _DOT_VALUES
        parts.append(encoded)
        parts.append(literal)
    url = "".join(parts)
    if suspect:
        _check_path_segments(template, url)
    return url


_DOT_VALUES = frozenset(("", ".", ".."))


@functools.lru_cache(maxsize=256)
def _template(template: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """A URL template split once into its literal pieces and the placeholder columns between them."""
    pieces = PLACEHOLDER.split(template)
    return tuple(pieces[0::2]), tuple(pieces[1::2])


def _path_segments(url: str) -> list[str]:
    rest = url.split("://", 1)[-1]
    rest = re.split(r"[?#]", rest, maxsplit=1)[0]
    return rest.split("/")[1:]          # [0] is the authority


def _check_path_segments(template: str, url: str) -> None:
    """Values cannot contain '/', '?' or '#' once encoded, so the template's segments and the
    URL's correspond one to one; refuse a segment that a placeholder turned into '.', '..' or ''."""
    for before, after in zip(_path_segments(template), _path_segments(url)):
        if before == after or not PLACEHOLDER.search(before):
            continue
        if after in (".", ".."):
            raise UnfillableUrl(f"placeholder value makes the path segment {after!r}, a dot segment "
                            f"that would change the path")
        if after == "":
            raise UnfillableUrl("placeholder value makes an empty path segment")


def redact_url(url: str) -> str:
    """The URL without credentials, query or fragment: what an error message may show."""
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path, "", ""))
