"""textDocument/definition and textDocument/documentSymbol: where each stream, source and
broadcast is defined (the name in its defining statement), and a Python function named by
`PYTHON 'module:fn'` in the module beside the file, found as the compiler finds it."""
from __future__ import annotations

import re
from pathlib import Path

from lsprotocol import types
from pygls.uris import from_fs_path

from dslc.compiler.frontend import ast
from dslc.compiler.lsp.analysis import Analysis, definition_name, word_at
from dslc.compiler.lsp.positions import LineIndex


def definition(analysis: Analysis, index: LineIndex, uri: str, offset: int) -> list[types.Location]:
    """The defining name of the stream/source/broadcast under the cursor, or the Python function
    of the `'module:fn'` string under it."""
    python = _python_ref_at(analysis.program, offset)
    if python is not None:
        return _python_definition(analysis, python)
    found = word_at(index.text, offset)
    if found is None:
        return []
    statement = analysis.defined.get(found[0].lower())
    if statement is None:
        return []
    name = definition_name(statement)
    return [types.Location(uri, index.range(name.span.start, name.span.end))]


def _python_refs(statement) -> list[ast.Str]:
    if isinstance(statement, ast.Source) and statement.connector.kind.value.upper() == "PYTHON":
        return [statement.connector.arg] if statement.connector.arg else []
    if isinstance(statement, ast.Broadcast) and statement.using is not None:
        return [statement.using]
    if isinstance(statement, ast.Enrich) and isinstance(statement.call, ast.PythonCall):
        return [statement.call.ref]
    if isinstance(statement, ast.Process):
        return [statement.ref]
    return []


def _python_ref_at(program: ast.Program, offset: int) -> ast.Str | None:
    for statement in program.statements:
        if statement.span.start <= offset <= statement.span.end:
            for ref in _python_refs(statement):
                if ref.span.start <= offset <= ref.span.end:
                    return ref
    return None


def _python_definition(analysis: Analysis, ref: ast.Str) -> list[types.Location]:
    """`def fn` / `class fn` in module.py beside the file (where the compiler looks first)."""
    module, _, name = ref.value.partition(":")
    path = analysis.source.folder / (module.replace(".", "/") + ".py")
    if not path.is_file():
        return []
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    match = re.search(rf"^[ \t]*(?:async[ \t]+)?(?:def|class)[ \t]+({re.escape(name)})\b", text, re.M)
    target = LineIndex(text)
    where = target.range(match.start(1), match.end(1)) if match else target.range(0, 0)
    return [types.Location(from_fs_path(str(Path(path).resolve())), where)]


_KINDS = {ast.Source: types.SymbolKind.Class, ast.Broadcast: types.SymbolKind.Struct,
          ast.Select: types.SymbolKind.Variable, ast.Enrich: types.SymbolKind.Function,
          ast.Match: types.SymbolKind.Variable, ast.Process: types.SymbolKind.Function,
          ast.Sink: types.SymbolKind.Event, ast.Pipeline: types.SymbolKind.Module,
          ast.Expect: types.SymbolKind.Interface}
_DETAIL = {ast.Source: "SOURCE", ast.Broadcast: "BROADCAST", ast.Select: "STREAM = SELECT",
           ast.Enrich: "STREAM = ENRICH", ast.Match: "STREAM = MATCH", ast.Process: "STREAM = PROCESS",
           ast.Sink: "SINK", ast.Pipeline: "PIPELINE", ast.Expect: "EXPECT ON"}


def document_symbols(analysis: Analysis, index: LineIndex) -> list[types.DocumentSymbol]:
    """One symbol per PIPELINE, SOURCE, BROADCAST, STREAM, SINK and EXPECT statement that parses;
    a stream's symbol lists its columns when its statement checks, an EXPECT's its constraints."""
    plan = analysis.plan
    first = analysis.defined
    symbols = []
    for statement in analysis.program.statements:
        kind = _KINDS.get(type(statement))
        if kind is None:
            continue
        name = statement.input if isinstance(statement, ast.Sink) else \
            statement.target if isinstance(statement, ast.Expect) else statement.name
        label = f"→ {name.value}" if isinstance(statement, ast.Sink) else \
            f"✓ {name.value}" if isinstance(statement, ast.Expect) else name.value
        children = None
        if isinstance(statement, ast.Expect):       # its constraints
            children = [types.DocumentSymbol(c.name.value, types.SymbolKind.Boolean, detail=c.check.text[:60],
                                             range=index.range(c.span.start, c.span.end),
                                             selection_range=index.range(c.name.span.start, c.name.span.end))
                        for c in statement.constraints]
        elif plan is not None and first.get(name.value.lower()) is statement:
            try:
                node = plan.node(name.value)
            except KeyError:
                node = None
            at = index.range(name.span.start, name.span.end)
            if node is not None:
                children = [types.DocumentSymbol(c.name, types.SymbolKind.Field, range=at, selection_range=at,
                                                 detail=c.type) for c in node.schema]
        symbols.append(types.DocumentSymbol(
            name=label, kind=kind, detail=_DETAIL[type(statement)],
            range=index.range(statement.span.start, statement.span.end),
            selection_range=index.range(name.span.start, name.span.end),
            children=children))
    return symbols
