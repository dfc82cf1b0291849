"""The names around the cursor: every stream, source and broadcast the document defines, and the
columns of the relations the current statement reads, from the salvaged plan (completion and
hover share it; it is what the REPL's Session offers the completer, narrowed to one statement)."""
from __future__ import annotations

import re

from dslc.compiler.lsp.analysis import Analysis, definition_name
from dslc.compiler.plan.logical import BroadcastState, PlanNode, Source

_IDENT = re.compile(r"`((?:[^`]|``)+)`|([A-Za-z_][A-Za-z0-9_]*)")


class Scope:
    """`dslc.compiler.interactive.completion.Names` for one statement of one document."""

    def __init__(self, analysis: Analysis, statement_text: str = ""):
        self.analysis = analysis
        self.plan = analysis.plan
        self.defined = analysis.defined
        self.statement_text = statement_text

    def node_names(self) -> list[str]:
        names = {n.name.lower(): n.name for n in self.plan.nodes} if self.plan else {}
        for key, statement in self.defined.items():
            names.setdefault(key, definition_name(statement).value)
        return list(names.values())

    def find_node(self, name: str) -> PlanNode | None:
        if self.plan is None:
            return None
        try:
            return self.plan.node(name)
        except KeyError:
            return None

    def read_nodes(self) -> list[PlanNode]:
        """Relations the current statement names (its own name left out), in order of mention."""
        own = _defined_here(self.statement_text)
        seen: dict[str, PlanNode] = {}
        for match in _IDENT.finditer(self.statement_text):
            word = (match.group(1) or "").replace("``", "`") or match.group(2)
            if word.lower() == own or word.lower() in seen:
                continue
            node = self.find_node(word)
            if node is not None:
                seen[word.lower()] = node
        return list(seen.values())

    def columns(self, node: str | None = None) -> list[str]:
        """`node`'s columns; without one, the columns of what the statement reads (every
        relation's when it names none yet)."""
        if node is not None:
            found = self.find_node(node)
            return [c.name for c in found.schema] if found is not None else []
        nodes = self.read_nodes() or (list(self.plan.nodes) if self.plan else [])
        return list(dict.fromkeys(c.name for n in nodes for c in n.schema))

    def column_type(self, column: str) -> tuple[str, str] | None:
        """(type, relation) of a column the current statement can read."""
        for node in self.read_nodes():
            for c in node.schema:
                if c.name.lower() == column.lower():
                    return c.type, node.name
        return None


_OWN = re.compile(r"^\s*(?:--[^\n]*\n\s*)*(?:STREAM|SOURCE|BROADCAST)\s+(`(?:[^`]|``)+`|[A-Za-z_][A-Za-z0-9_]*)", re.I)


def _defined_here(statement: str) -> str:
    match = _OWN.match(statement)
    return match.group(1).strip("`").lower() if match else ""


def kind_of(node: PlanNode) -> str:
    """'source', 'broadcast' or 'stream', as the statement that defines it says."""
    return "source" if isinstance(node, Source) else "broadcast" if isinstance(node, BroadcastState) else "stream"
