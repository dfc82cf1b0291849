"""Reading a statement's option clauses, the same way for PIPELINE, SOURCE, ENRICH and SINK:
each clause at most once (a repeat is E0303, the first one counts), and OPTIONS (k = v, ...)
with each key at most once."""
from __future__ import annotations

from dslc.compiler.diagnostics import Diagnostic, error
from dslc.compiler.frontend import ast
from dslc.compiler.plan import values


def title(key: str) -> str:
    """An option's key as the user writes it: `on_miss` → `ON MISS`."""
    return key.replace("_", " ").upper()


def first_of_each(opts: tuple[ast.Opt, ...], problems: list[Diagnostic]) -> dict[str, ast.Opt]:
    """The clauses by key, in the order written; every repeat reported."""
    seen: dict[str, ast.Opt] = {}
    for opt in opts:
        if opt.key in seen:
            problems.append(error("E0303", opt.span, option=title(opt.key), hint="keep one of them"))
            continue
        seen[opt.key] = opt
    return seen


def key_values(opt: ast.Opt, problems: list[Diagnostic]) -> tuple[tuple[str, str], ...]:
    """OPTIONS (k = v, ...) as (key, text) pairs; a key given twice reported (the first one counts)."""
    pairs: dict[str, str] = {}
    for key, value in opt.args:
        if key.value in pairs:
            problems.append(error("E0303", key.span, option=f"'{key.value}'", hint="keep one of them"))
            continue
        pairs[key.value] = values.literal_text(value)
    return tuple(pairs.items())
