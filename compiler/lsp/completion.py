"""textDocument/completion: the REPL's completer (dslc.compiler.interactive.completion) on the text of
the statement before the cursor, with the columns of the relations that statement reads."""
from __future__ import annotations

from lsprotocol import types

from dslc.compiler.frontend.lexical import split_statements
from dslc.compiler.interactive.completion import complete
from dslc.compiler.lsp.analysis import MAX_CHECKED_CHARS, Analysis
from dslc.compiler.lsp.positions import LineIndex
from dslc.compiler.lsp.scope import Scope, kind_of

_KINDS = {"stream": types.CompletionItemKind.Class, "column": types.CompletionItemKind.Field,
          "keyword": types.CompletionItemKind.Keyword}


def completions(analysis: Analysis, index: LineIndex, offset: int) -> types.CompletionList:
    """Keywords, stream/source/broadcast names and columns in scope for the word at `offset` of
    `index.text`, the newest text (`analysis` may be of an earlier version: names come from it)."""
    start, statement = _statement_at(index.text, offset)
    scope = Scope(analysis, statement)
    items = []
    for rank, candidate in enumerate(complete(index.text[start:offset], scope)):
        items.append(types.CompletionItem(
            label=candidate.text,
            kind=_KINDS[candidate.kind],
            detail=_detail(candidate.text, candidate.kind, scope),
            sort_text=f"{rank:05d}",
            text_edit=types.TextEdit(index.range(offset - candidate.replaces, offset), candidate.text),
        ))
    return types.CompletionList(is_incomplete=False, items=items)


def _statement_at(text: str, offset: int) -> tuple[int, str]:
    """Where the statement around `offset` starts, and its text (in a file too large to split
    into statements, the line)."""
    if len(text) <= MAX_CHECKED_CHARS:
        for chunk in split_statements(text):
            if chunk.start <= offset <= chunk.start + len(chunk.text):
                return chunk.start, chunk.text
    start = text.rfind("\n", 0, offset) + 1
    end = text.find("\n", offset)
    return start, text[start:end if end >= 0 else len(text)]


def _detail(text: str, kind: str, scope: Scope) -> str:
    if kind == "stream":
        node = scope.find_node(text)
        return f"{kind_of(node)} ({len(node.schema)} columns)" if node is not None else "stream"
    if kind == "column":
        found = scope.column_type(text)
        return f"{found[0]} (from {found[1]})" if found else "column"
    return "keyword"
