"""One diagnostic format for every error, with messages kept in one table keyed by stable codes.

Codes are stable (tests and users grep for them); the text may improve. Errors are collected,
never raised one at a time, so a user sees every problem of a file in one run.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Iterable

from dslc.compiler.source import SourceFile, Span

MESSAGES: dict[str, str] = {
    # syntax
    "E0101": "unexpected {found}; expected {expected}",
    "E0102": "unexpected character {found!r}",
    "E0103": "input ended unexpectedly: {what}",
    "E0104": "statement does not end with ';'",
    "E0105": "unterminated {kind}: the closing quote is missing",
    # names and structure
    "E0201": "unknown {kind} '{name}'",
    "E0202": "'{name}' is defined twice",
    "E0203": "'{name}' depends on itself: {path}",
    "E0204": "unknown column '{column}' in {where}",
    "E0205": "unknown column '{column}' in URL placeholder",
    "E0206": "SQL error: {detail}",
    "E0207": "SINK of nothing: '{name}' is not a source or stream",
    "E0208": "pipeline has no SINK: nothing would be written",
    "E0209": "'{name}' is a {actual}, but {statement} needs a {expected}",
    "E0210": "PIPELINE is given twice",
    "E0211": "column '{column}' is declared twice in {where}",
    "E0212": "Spark rejects this query ({condition}): {detail}",
    # values and options
    "E0301": "bad duration '{text}': expected a whole number with ms, s, m, h or d",
    "E0302": "{option} must be {rule}, got '{text}'",
    "E0303": "option {option} is given twice",
    "E0304": "{first} contradicts {second}",
    "E0305": "unknown {kind} '{name}'",
    "E0306": "unknown type '{text}'",
    "E0307": "WATERMARK column '{column}' has type {type}, not TIMESTAMP",
    "E0308": "MODE STREAMING needs CHECKPOINT: {why}",
    "E0309": "'{text}' is not a valid {what}",
    "E0310": "{connector} {role} needs {what}",
    "E0311": "{feature} is not supported in {mode} mode: {why}",
    "E0312": "column '{column}' of {where} must be {what}",
    "E0313": "RETURNS column '{column}' has type {type}, which a model's JSON schema cannot express",
    "E0314": "an EMBEDDING RETURNS one column (the vector), got {count}",
    "E0315": "unknown option '{name}' for a {connector} {role}: {why}",
    # services: headers, secrets, answer paths (E032x, apart from the codes other work adds)
    "E0320": "HTTP header '{name}' has no value",
    "E0321": "'{name}' is not a secret name",
    "E0322": "bad JMESPath expression in {where}: {detail}",
    "E0323": "'{name}' is not a valid HTTP header name",
    "E0324": "{clause} is given twice in one call",
    "E0325": "{clause} needs {what}",
    # the places a run writes, checked before it starts (E034x)
    "E0340": "{what} cannot be written: {why}",
    "E0341": "{what} cannot be written by a {mode} run: {why}",
    # databases (E033x; compiler/plan/databases.py, sql_lookup.py)
    "E0330": "not a PostgreSQL URL: {why}",
    "E0331": "{detail}",            # a lookup that is not one read-only SELECT (the message is built there)
    "E0332": "{detail}",            # a syntax error inside the query string
    "E0333": "{detail}",            # a query BATCH cannot split by key
    "E0334": "{detail}",            # a RETURNS column the query does not give
    "E0335": "{detail}",            # a placeholder that is not an input column, or of a type no parameter has
    "E0336": "{detail}",            # a database table, source or sink that does not fit (dslc check --db)
    "E0337": "the columns of {what} are read from DATABASE {database}, which cannot tell them: {why}",
    # notes (not errors)
    "N0301": "{what} is read once, when the STREAMING job starts: {why}",
    # expectations (E035x; compiler/plan/expectations.py)
    "E0350": "'{name}' has an EXPECT already",
    "E0351": "EXPECT ON {name} has no CONSTRAINT",
    "E0352": "ON VIOLATION is given twice for the statement",
    "E0353": "QUARANTINE '{path}' is a folder {other} writes too",
    "E0354": "CHECK of constraint '{name}' is {type}, not BOOLEAN",
    "E0355": "constraint '{name}' uses {what}",
    "E0356": "constraint '{name}' calls {function}(), which is not deterministic",
}


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """One error at one place, with an optional hint."""

    code: str
    message: str
    span: Span
    hint: str | None = None
    severity: str = "error"     # or "note": something to know that is not wrong (exit status 0)

    def render(self, source: SourceFile) -> str:
        """`file:line:col: error[CODE]: message` (or `note[CODE]`), the source line, a caret, then the hint."""
        line, col = source.line_col(self.span.start)
        text = source.line_text(line)
        end_line, end_col = source.line_col(self.span.end)
        width = (end_col - col) if end_line == line else len(text) - col + 1
        width = max(1, width)
        gutter = " " * len(str(line))
        out = [
            f"{source.path}:{line}:{col}: {self.severity}[{self.code}]: {self.message}",
            f"   {line} | {shown_line(text)}",
            f"   {gutter} | {' ' * (col - 1)}{'^' * width}",
        ]
        if self.hint:
            out.append(f"   {gutter} = hint: {self.hint}")
        return "\n".join(out)


def error(code: str, span: Span, hint: str | None = None, **params: object) -> Diagnostic:
    """Build a diagnostic from the message table."""
    return Diagnostic(code, MESSAGES[code].format(**params), span, hint)


def shown_line(text: str) -> str:
    """A source line as a diagnostic shows it: a tab as one space and any other control character
    (a CR inside a string) as its Unicode picture (U+2400...), one column each, so the line
    stays one line and the caret under it stays in place."""
    text = text.expandtabs(1)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else chr(0x2400 + ord(c)) if ord(c) < 0x20 else "\u2421" if c == "\x7f"
                   else "\ufffd" for c in text)


def printable(text: str) -> str:
    """`text` with its control characters written as escapes (`\\r`, `\\n`, `\\x00`), so that a
    message quoting what the user wrote stays on its one line."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


def note(code: str, span: Span, hint: str | None = None, **params: object) -> Diagnostic:
    """A note from the message table: said by `dslc check` and the editor, not an error."""
    return Diagnostic(code, MESSAGES[code].format(**params), span, hint, severity="note")


def did_you_mean(word: str, candidates: Iterable[str]) -> str | None:
    """A `did you mean 'x'?` hint for the closest candidate, or None."""
    pool = {c.lower(): c for c in candidates}
    close = difflib.get_close_matches(word.lower(), list(pool), n=1, cutoff=0.6)
    return f"did you mean '{pool[close[0]]}'?" if close else None


class CompileError(Exception):
    """Every problem found in a file; rendered by the CLI, never shown as a traceback."""

    def __init__(self, source: SourceFile, diagnostics: list[Diagnostic]):
        self.source = source
        self.diagnostics = sorted(diagnostics, key=lambda d: (d.span.start, d.code))
        super().__init__(self.render())

    def render(self) -> str:
        """All diagnostics, in file order, then a count."""
        parts = [d.render(self.source) for d in self.diagnostics]
        count = len(self.diagnostics)
        parts.append(f"{count} error{'s' if count != 1 else ''} found")
        return "\n".join(parts)


class ToolError(Exception):
    """A problem outside the .flow file that the user can fix, e.g. a program that is not installed."""
