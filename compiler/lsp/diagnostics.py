"""dslc's diagnostics as LSP diagnostics: the same code, range and message as `dslc check`; the
hint is appended to the message (every client shows it) and also given as related information
pointing at the same range (clients that list related information show it under the error)."""
from __future__ import annotations

from lsprotocol import types

from dslc.compiler.diagnostics import Diagnostic
from dslc.compiler.lsp.analysis import MAX_CHECKED_CHARS, Analysis
from dslc.compiler.lsp.positions import LineIndex

SOURCE = "dslc"


def to_lsp(analysis: Analysis, uri: str, index: LineIndex) -> list[types.Diagnostic]:
    """Every diagnostic of the analysis, in file order."""
    if analysis.too_large:
        return [_too_large(analysis, index)]
    if analysis.failure:
        return [types.Diagnostic(index.range(0, min(1, len(index.text))), analysis.failure,
                                 severity=types.DiagnosticSeverity.Error, source=SOURCE)]
    return [_one(d, uri, index) for d in sorted(analysis.diagnostics, key=lambda d: (d.span.start, d.code))]


def from_spark(problems: list[Diagnostic], uri: str, index: LineIndex) -> list[types.Diagnostic]:
    """Spark's analyzer's diagnostics (compiler/lsp/spark_check.py), marked as Spark's."""
    from dslc.compiler.lsp.spark_check import SOURCE as SPARK
    return [_one(d, uri, index, SPARK) for d in sorted(problems, key=lambda d: (d.span.start, d.code))]


def _one(d: Diagnostic, uri: str, index: LineIndex, source: str = SOURCE) -> types.Diagnostic:
    where = index.range(d.span.start, d.span.end)
    if d.span.start == d.span.end:   # an empty span still gets a caret in `dslc check`
        where = index.range(d.span.start, d.span.start + 1)
    related = [types.DiagnosticRelatedInformation(types.Location(uri, where), f"hint: {d.hint}")] if d.hint else None
    return types.Diagnostic(
        range=where,
        message=d.message + (f"\nhint: {d.hint}" if d.hint else ""),
        severity=types.DiagnosticSeverity.Error,
        code=d.code,
        source=source,
        related_information=related,
        data={"hint": d.hint} if d.hint else None,
    )


def _too_large(analysis: Analysis, index: LineIndex) -> types.Diagnostic:
    size = len(analysis.source.text)
    return types.Diagnostic(
        range=index.range(0, min(1, size)),
        message=(f"not checked as you type: the file has {size / 1e6:.1f} million characters, the editor "
                 f"checks files up to {MAX_CHECKED_CHARS / 1e6:.0f} million\nhint: run dslc check FILE"),
        severity=types.DiagnosticSeverity.Warning,
        source=SOURCE,
    )
