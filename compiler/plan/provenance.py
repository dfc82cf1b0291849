"""`PROVENANCE AS col` on an ENRICH: the struct column it appends after RETURNS, typed by the kind
of call (runtime/schema/provenance.py), its name checked against the columns already there."""
from __future__ import annotations

from typing import Any

from dslc.compiler.diagnostics import error
from dslc.compiler.frontend import ast
from dslc.compiler.plan import logical as plan
from dslc.runtime.schema.provenance import struct_type


def provenance_column(planner: Any, name: ast.Name | None, call: Any, taken: set[str]) -> plan.Schema | None:
    """The column PROVENANCE AS adds: () without the clause, None when its name is taken (reported)."""
    if name is None:
        return ()
    if name.value.lower() in taken:
        planner.add(error("E0211", name.span, column=name.value, where="PROVENANCE AS",
                          hint="the input or RETURNS already has it; name the provenance column otherwise"))
        return None
    return (plan.Column(name.value, struct_type(call)),)
