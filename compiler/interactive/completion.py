"""Completion of .flow text, shared by the REPL (prompt_toolkit) and `dslc lsp`: keywords,
stream/source names and column names from whatever knows the pipeline's names, with no
terminal or protocol in it."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Protocol

KEYWORDS = (
    "PIPELINE", "SET", "SOURCE", "FROM", "OPTIONS", "SCHEMA", "WATERMARK", "DELAY", "BROADCAST", "KEY", "OP",
    "USING", "PYTHON", "STREAM", "SELECT", "ENRICH", "WITH", "HTTP", "GET", "POST", "BODY", "WITHIN", "ADAPTIVE", "RETURNS", "ASYNC", "ORDERED",
    "UNORDERED", "CAPACITY", "TIMEOUT", "RETRY", "BACKOFF", "EXPONENTIAL", "FIXED", "CACHE", "TTL", "RATE", "PER",
    "SECOND", "ON", "MISS", "ERROR", "FAIL", "NULL", "DROP", "DEAD", "LETTER", "MATCH", "AGAINST", "AS", "WHERE",
    "PROCESS", "SINK", "TO", "MODE", "PARTITION", "BY", "BATCH", "STREAMING", "CHECKPOINT", "TRIGGER", "EVERY",
    "AVAILABLE", "NOW", "JSON", "CSV", "PARQUET", "TEXT", "CONSOLE", "KAFKA", "APPEND", "OVERWRITE", "COMPLETE",
    "MODEL", "EMBEDDING", "AT", "SYSTEM", "PROMPT", "INPUT", "HEADERS", "ANSWER", "PATH", "MINUTE", "TOKENS",
    "OUTAGE", "PAUSE", "CONTINUE", "ANSWERS", "STORE", "BUDGET", "CALLS", "TIER", "STANDARD", "FLEX", "PRICE",
    "CALL", "MILLION", "OUTPUT", "USD", "FAILURE", "ONLINE", "PROVENANCE",
    # Spark SQL words used in STREAM ... = SELECT
    "GROUP", "ORDER", "JOIN", "LEFT", "INNER", "AND", "OR", "NOT", "DISTINCT", "HAVING", "LIMIT", "UNION", "CASE",
    "WHEN", "THEN", "ELSE", "END", "CAST", "STRING", "INT", "BIGINT", "DOUBLE", "BOOLEAN", "TIMESTAMP", "DATE",
)

STATEMENT_KEYWORDS = ("SOURCE", "BROADCAST", "STREAM", "SINK", "SET", "PIPELINE")

IDENT_TAIL = re.compile(r"[A-Za-z_][A-Za-z0-9_]*$")
_QUALIFIED = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_]*)?$")


class Names(Protocol):
    """What completion needs to know of a pipeline (the REPL's Session has it; so does the LSP)."""

    def node_names(self) -> list[str]: ...

    def columns(self, node: str | None = None) -> list[str]: ...

    def find_node(self, name: str): ...


@dataclass(frozen=True, slots=True)
class Candidate:
    """One completion: the text, how many characters before the cursor it replaces, its kind
    ('stream', 'column' or 'keyword')."""

    text: str
    replaces: int
    kind: str


def complete(text_before_cursor: str, names: Names) -> list[Candidate]:
    """Candidates for the word before the cursor: after `NAME.` only NAME's columns; otherwise
    stream/source names, then columns, then keywords (each text once, keywords in the case typed);
    where no word is typed yet, the columns in scope, then names, then keywords."""
    qualified = _QUALIFIED.search(text_before_cursor)
    if qualified and names.find_node(qualified.group(1)) is not None:
        word = qualified.group(2) or ""
        return [Candidate(c, len(word), "column") for c in names.columns(qualified.group(1)) if _starts(c, word)]
    tail = IDENT_TAIL.search(text_before_cursor)
    if tail:
        word = tail.group(0)
        ordered = (*stream_names(word, names), *_columns(word, names), *_keywords(word))
    elif not _between_words(text_before_cursor):
        return []
    elif not _code(text_before_cursor).strip():
        return [Candidate(k, 0, "keyword") for k in STATEMENT_KEYWORDS]   # a statement starts here
    else:   # nothing typed yet (Ctrl-Space after `SELECT `): what the statement reads comes first
        ordered = (*_columns("", names), *stream_names("", names), *_keywords(""))
    seen: set[str] = set()
    out: list[Candidate] = []
    for candidate in ordered:
        if candidate.text not in seen:
            seen.add(candidate.text)
            out.append(candidate)
    return out


_WORD_MAY_START = re.compile(r"(?:^|[\s(,=<>+*/|-])$")
_COMMENT = re.compile(r"--[^\n]*")


def _code(text: str) -> str:
    """`text` without its line comments (good enough to see whether any code precedes the cursor)."""
    return _COMMENT.sub("", text)


def _between_words(text: str) -> bool:
    """True where a word may start at the end of `text`: after a space, `(`, `,` or an operator,
    and not inside a string literal, a quoted name or a comment."""
    if not _WORD_MAY_START.search(text):
        return False
    quote = None
    i = 0
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\" and quote != "`":
                i += 1
            elif c == quote:
                quote = None
        elif c in "'\"`":
            quote = c
        elif text.startswith("--", i):
            end = text.find("\n", i)
            if end < 0:
                return False
            i = end
        i += 1
    return quote is None


def stream_names(word: str, names: Names) -> Iterable[Candidate]:
    """Stream and source names starting with `word` (any case)."""
    return (Candidate(n, len(word), "stream") for n in names.node_names() if _starts(n, word))


def _columns(word: str, names: Names) -> Iterable[Candidate]:
    return (Candidate(c, len(word), "column") for c in names.columns() if _starts(c, word))


def _keywords(word: str) -> Iterable[Candidate]:
    lower = word.islower()
    return (Candidate(k.lower() if lower else k, len(word), "keyword") for k in KEYWORDS if _starts(k, word))


def _starts(text: str, word: str) -> bool:
    return text.lower().startswith(word.lower())
