"""Lexical helpers shared by the parser: statement splitting and Spark SQL string literals."""
from __future__ import annotations

import re
from dataclasses import dataclass

# Spark SQL's escapes (sql/catalyst/.../util/SparkParserUtils.unescapeSQLString).
_ESCAPES = {"0": "\0", "'": "'", '"': '"', "b": "\b", "n": "\n", "r": "\r", "t": "\t",
            "Z": "\x1a", "\\": "\\", "%": "\\%", "_": "\\_"}
_ESCAPE_RE = re.compile(r"\\(u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|[0-7]{3}|.)", re.S)


def unescape_string(literal: str) -> str:
    """The value of one quoted Spark SQL string literal (quotes included in `literal`)."""
    body = literal[1:-1]

    def replace(match: re.Match[str]) -> str:
        code = match.group(1)
        if len(code) > 1 and code[0] in "uU":
            return chr(int(code[1:], 16))
        if len(code) == 3:
            return chr(int(code, 8))
        return _ESCAPES.get(code, code)

    return _ESCAPE_RE.sub(replace, body)


@dataclass(frozen=True, slots=True)
class Chunk:
    """One statement's text and where it starts; `terminated` is False when ';' is missing."""

    text: str
    start: int
    terminated: bool


def split_statements(text: str) -> list[Chunk]:
    """Split at top-level ';', skipping strings, back-quoted names and `--` comments."""
    chunks: list[Chunk] = []
    start = 0
    i = 0
    n = len(text)
    while i < n:
        ch = text[i]
        if ch in "'\"`":
            i = _skip_quoted(text, i)
            continue
        if ch == "-" and text.startswith("--", i):
            newline = text.find("\n", i)
            i = n if newline < 0 else newline + 1
            continue
        if ch == ";":
            chunks.append(Chunk(text[start:i], start, True))
            start = i + 1
        i += 1
    if _has_code(text[start:]):
        chunks.append(Chunk(text[start:], start, False))
    return [c for c in chunks if _has_code(c.text) or not c.terminated]


def _skip_quoted(text: str, i: int) -> int:
    quote = text[i]
    i += 1
    while i < len(text):
        ch = text[i]
        if ch == "\\" and quote != "`":
            i += 2
            continue
        if ch == quote:
            return i + 1
        i += 1
    return len(text)


def _has_code(text: str) -> bool:
    """True when the text has anything but white space and comments."""
    return bool(re.sub(r"--[^\n]*", "", text).strip())


def leading_space(text: str) -> int:
    """Characters of white space and comments before the first token."""
    i = 0
    while i < len(text):
        if text[i].isspace():
            i += 1
        elif text.startswith("--", i):
            newline = text.find("\n", i)
            i = len(text) if newline < 0 else newline + 1
        else:
            break
    return i
