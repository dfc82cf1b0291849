"""Helpers of the front-end tests (imported by name: pytest puts this folder on sys.path)."""
from __future__ import annotations

from pathlib import Path

import pytest

from dslc.compiler.diagnostics import CompileError, Diagnostic
from dslc.compiler.pipeline import check_text
from dslc.compiler.source import SourceFile

PROGRAMS = Path(__file__).parent / "programs"
VALID_PROGRAMS = sorted(PROGRAMS.glob("*/pipeline.flow"))

# A source most checks start from.
ORDERS = ("SOURCE orders FROM JSON 'data/orders/'\n"
          "  SCHEMA (order_id STRING, customer_id STRING, amount DOUBLE, country STRING, ts TIMESTAMP);\n")


def errors_of(text: str, folder: Path | None = None) -> list[tuple[str, int, int]]:
    """(code, line, col) of every diagnostic of `text`; [] when the program is valid."""
    path = str((folder or PROGRAMS / "fraud") / "test.flow")
    try:
        check_text(text, path)
    except CompileError as exc:
        return [(d.code, *exc.source.line_col(d.span.start)) for d in exc.diagnostics]
    return []


def diagnostics_of(text: str, folder: Path | None = None) -> tuple[SourceFile, list[Diagnostic]]:
    """The source and the diagnostics of a program that must fail."""
    path = str((folder or PROGRAMS / "fraud") / "test.flow")
    with pytest.raises(CompileError) as info:
        check_text(text, path)
    return info.value.source, info.value.diagnostics


def marked(text: str, mark: str, nth: int = 1) -> tuple[int, int]:
    """1-based (line, col) of the nth occurrence of `mark` in `text`."""
    at = -1
    for _ in range(nth):
        at = text.index(mark, at + 1)
    return SourceFile("x", text).line_col(at)
