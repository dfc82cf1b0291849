"""One document as dslc sees it: the diagnostics `dslc check` reports, and (for completion, hover
and definitions) the syntax tree and plan of the statements that do check, so that one bad
statement in the middle of a file leaves the rest of it known to the editor.

Nothing here re-implements a check: the compiler's own `parse` and `to_partial_plan` (the planner
run of `dslc check`, which also keeps the plan of the statements that checked) run on the text,
with the document's EditorCache supplying what an earlier version already computed.
A syntax error stops the check before planning, as in `dslc check`; to still know the rest of the
file, the statements with syntax errors are blanked out (every character but line breaks becomes
a space, so offsets stay put) and the rest is parsed and planned again."""
from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property

from dslc.compiler.diagnostics import CompileError, Diagnostic
from dslc.compiler.frontend import ast
from dslc.compiler.frontend.lexical import Chunk, split_statements
from dslc.compiler.frontend.parser import parse
from dslc.compiler.lsp.incremental import EditorCache
from dslc.compiler.pipeline import collector_paused
from dslc.compiler.plan.logical import Plan
from dslc.compiler.plan.planner import to_partial_plan
from dslc.compiler.source import Span, TextSource

# Larger files are not checked as the user types (a check is 0.6-2 ms of CPU a statement, and a
# file this big is generated, not typed): the editor says so and `dslc check` still works.
MAX_CHECKED_CHARS = 1_000_000
_SALVAGE_ROUNDS = 8
_BLANK = re.compile(r"[^\r\n]")


@dataclass
class Analysis:
    """The checked state of one document version."""

    source: TextSource
    diagnostics: list[Diagnostic]
    too_large: bool = False
    failure: str | None = None      # a bug in dslc stopped the check: what to tell the user
    _program: ast.Program | None = field(default=None, repr=False)
    _plan: Plan | None = field(default=None, repr=False)
    _parsed_text: str = field(default="", repr=False)    # the text `program` was parsed from
    _cache: EditorCache | None = field(default=None, repr=False)    # the document's remembered steps

    @cached_property
    def chunks(self) -> list[Chunk]:
        """The statements of the text, as the parser splits them."""
        return [] if self.too_large else split_statements(self.source.text)

    def chunk_at(self, offset: int) -> Chunk | None:
        """The statement holding `offset` (its ';' included), or None between statements."""
        for chunk in self.chunks:
            if chunk.start <= offset <= chunk.start + len(chunk.text):
                return chunk
        return None

    @cached_property
    def program(self) -> ast.Program:
        """Syntax trees of every statement that parses (those with syntax errors left out)."""
        if self._program is not None:
            return self._program
        if self.too_large or self.failure:
            return ast.Program(())
        text = self.source.text
        for _ in range(_SALVAGE_ROUNDS):
            try:
                program = _parse(self._with_text(text), self._cache)
                self._parsed_text = text
                return program
            except CompileError as exc:
                blanked = _blank(text, self.chunks, exc.diagnostics)
                if blanked == text:
                    break
                text = blanked
        self._parsed_text = ""
        return ast.Program(())

    @cached_property
    def plan(self) -> Plan | None:
        """The plan of the statements that check (no SINK needed), or None when nothing parses."""
        if self._plan is not None:
            return self._plan
        if self.too_large or self.failure:
            return None
        program = self.program
        source = self._with_text(self._parsed_text)
        with collector_paused():
            plan, _ = to_partial_plan(program, source, require_sink=False,
                                      sql=self._cache and self._cache.sql)
        return plan

    @cached_property
    def defined(self) -> dict[str, object]:
        """lower-case name → the first statement defining it (`definitions` of the program, once
        per version: hover and completion ask on every request)."""
        return definitions(self.program)

    @property
    def complete(self) -> bool:
        """True when the program and plan are known without more work (the text checked whole)."""
        return (self._program is not None and self._plan is not None) or "plan" in self.__dict__

    @contextmanager
    def checking(self, current: Callable[[], bool]) -> Iterator[None]:
        """While the program and plan are computed: they give up (Superseded) once `current` is
        False, as a check does."""
        if self._cache is None:
            yield
            return
        with self._cache.checking(current):
            yield

    def _with_text(self, text: str) -> TextSource:
        return TextSource(self.source.path, text, base=self.source.base)


def analyze(text: str, path: str, base: str, cache: EditorCache | None = None, *, db: bool = False) -> Analysis:
    """Check a document as `dslc check` does: the same diagnostics, in the same order. With a
    `cache` (the document's, kept from version to version), what an edit left unchanged is
    taken from it (compiler/lsp/incremental.py); it may raise Superseded when the cache says a
    newer version is waiting. `db` (dslc lsp --db): a document the fast check passes is also
    checked against its live DATABASEs, as `dslc check --db` does (answers kept a minute)."""
    source = TextSource(path, text, base=base)
    if len(text) > MAX_CHECKED_CHARS:
        return Analysis(source, [], too_large=True)
    try:
        with collector_paused():
            program = _parse(source, cache)
    except CompileError as exc:
        return Analysis(source, exc.diagnostics, _cache=cache)
    with collector_paused():
        checked, problems = to_partial_plan(program, source, require_sink=True, sql=cache and cache.sql)
    if db and not problems and checked.databases:
        from dslc.compiler.plan.database_check import check as check_databases
        problems = check_databases(source, checked)
    return Analysis(source, problems, _program=program, _plan=checked, _parsed_text=text, _cache=cache)


def _parse(source: TextSource, cache: EditorCache | None) -> ast.Program:
    if cache is None:
        return parse(source)
    with cache.parsing():
        return parse(source, statement=cache.statement)


def _blank(text: str, chunks: list[Chunk], diagnostics: list[Diagnostic]) -> str:
    """The text with every statement a diagnostic points into turned into spaces."""
    hit: list[Chunk] = []
    for d in diagnostics:
        for chunk in chunks:
            if chunk.start <= d.span.start <= chunk.start + len(chunk.text) and chunk not in hit:
                hit.append(chunk)
                break
    for chunk in hit:
        end = chunk.start + len(chunk.text)
        text = text[:chunk.start] + _BLANK.sub(" ", chunk.text) + text[end:]
    return text


def definition_name(statement: object) -> ast.Name | None:
    """The name a statement defines (SOURCE, BROADCAST, STREAM), or None."""
    if isinstance(statement, (ast.Source, ast.Broadcast, ast.Select, ast.Enrich, ast.Match, ast.Process)):
        return statement.name
    return None


def definitions(program: ast.Program) -> dict[str, object]:
    """lower-case name → the first statement defining it."""
    out: dict[str, object] = {}
    for statement in program.statements:
        name = definition_name(statement)
        if name is not None:
            out.setdefault(name.value.lower(), statement)
    return out


_WORD = re.compile(r"`(?:[^`]|``)+`|[A-Za-z_][A-Za-z0-9_]*")


def word_at(text: str, offset: int) -> tuple[str, Span] | None:
    """The identifier under (or just before) the cursor, back-quotes removed, and its span."""
    line_start = text.rfind("\n", 0, offset) + 1
    line_end = text.find("\n", offset)
    line_end = len(text) if line_end < 0 else line_end
    for match in _WORD.finditer(text, line_start, line_end):
        if match.start() <= offset <= match.end():
            word = match.group(0)
            if word.startswith("`"):
                word = word[1:-1].replace("``", "`")
            return word, Span(match.start(), match.end())
    return None
