"""textDocument/hover: on a stream, source or broadcast name, the line of the statement that
defines it and its inferred schema; on a column, its type; on an ENRICH (the keyword or any of
its option keywords), every option with its value, the defaults marked; on an EXPECT (its
keywords, a constraint's name), each constraint's action, where it runs and what the model is asked."""
from __future__ import annotations

from lsprotocol import types

from dslc.compiler.frontend import ast
from dslc.compiler.lsp import expect_hover
from dslc.compiler.lsp.analysis import Analysis, definition_name, word_at
from dslc.compiler.lsp.positions import LineIndex
from dslc.compiler.lsp.scope import Scope, kind_of
from dslc.compiler.lsp.stale import Edit, edit_between
from dslc.compiler.plan.enrich_options import EnrichOptions, read_options
from dslc.runtime.config import Outcome

# Keywords that hovering shows the ENRICH's options for (inside an ENRICH statement).
_ENRICH_WORDS = {"ENRICH", "STORE", "BUDGET", "CALLS", "OUTAGE", "PAUSE", "CONTINUE", "TOKENS", "MINUTE", "ASYNC", "ORDERED", "UNORDERED", "CAPACITY", "ADAPTIVE", "TIMEOUT", "RETRY", "BACKOFF",
                 "EXPONENTIAL", "FIXED", "CACHE", "TTL", "RATE", "PER", "SECOND", "BATCH", "WITHIN", "ON",
                 "MISS", "ERROR", "DEAD", "LETTER", "TIER", "PRICE", "USD", "FAILURE"}


def hover(analysis: Analysis, index: LineIndex, offset: int,
          spark: dict[str, tuple[tuple[str, str], ...]] | None = None) -> types.Hover | None:
    """`spark`: Spark's analyzer's schemas of this version (lower-case name → (column, type)),
    shown instead of the fast check's when given (`dslc lsp --spark`)."""
    found = word_at(index.text, offset)
    if found is None:
        return None
    word, span = found
    # `analysis` may be of an older version (a check of the newest is under way): its offsets are
    # found across the edit; the word is always the newest text's
    edit = None if analysis.source.text is index.text or analysis.source.text == index.text \
        else edit_between(analysis.source.text, index.text)
    at = offset if edit is None else edit.to_old(offset)
    at = edit.start if at is None else at
    statement = _statement_at(analysis.program, at)
    if isinstance(statement, ast.Enrich) and word.upper() in _ENRICH_WORDS and not _is_name_in(statement, span, edit):
        return _markdown(_enrich_text(statement), index, span)
    if expect_hover.wants(statement, word):
        return _markdown(expect_hover.text(statement, analysis.plan), index, span)
    chunk = analysis.chunk_at(at)
    scope = Scope(analysis, chunk.text if chunk else "")
    text = _name_text(word, analysis, scope, index, spark, edit)
    if text is None:
        column = scope.column_type(word)
        if column is None:
            return None
        type_, relation = column
        theirs = {n.lower(): t for n, t in (spark or {}).get(relation.lower(), ())}
        by = ""
        if word.lower() in theirs:
            type_, by = theirs[word.lower()], " (type from Spark's analyzer)"
        text = f"column `{word}` {type_}, from `{relation}`{by}"
    return _markdown(text, index, span)


def _markdown(text: str, index: LineIndex, span) -> types.Hover:
    return types.Hover(types.MarkupContent(types.MarkupKind.Markdown, text), index.range(span.start, span.end))


def _statement_at(program: ast.Program, offset: int):
    for statement in program.statements:
        if statement.span.start <= offset <= statement.span.end:
            return statement
    return None


def _is_name_in(statement: ast.Enrich, span, edit: Edit | None = None) -> bool:
    names = (statement.name.span.start, statement.input.span.start)
    return span.start in (names if edit is None else tuple(edit.to_new(n) for n in names))


def _name_text(word: str, analysis: Analysis, scope: Scope, index: LineIndex,
               spark: dict | None = None, edit: Edit | None = None) -> str | None:
    """The definition line and schema of a stream/source/broadcast name, or None."""
    statement = scope.defined.get(word.lower())
    node = scope.find_node(word)
    if statement is None and node is None:
        return None
    start = statement.span.start if statement is not None else node.span.start
    if edit is not None:                  # where that statement is in the newest text
        start = edit.to_new(start)
        start = edit.start if start is None else start
    line = index.position(start).line
    first = index.line_text(line).strip()
    kind = kind_of(node) if node is not None else _kind_of_statement(statement)
    name = definition_name(statement).value if statement is not None else node.name
    parts = [f"**{kind}** `{name}`, line {line + 1}", "```flow\n" + first + "\n```"]
    if node is None:
        parts.append("schema unknown: its statement (or one it reads) does not check yet")
    else:
        columns = [(c.name, c.type) for c in node.schema]
        if spark and node.name.lower() in spark:
            columns = list(spark[node.name.lower()])
            parts.append("types from Spark's analyzer")
        rows = "\n".join(f"| {n} | {t} |" for n, t in columns)
        parts.append("| column | type |\n|---|---|\n" + rows if rows else "(no columns)")
    return "\n\n".join(parts)


def _kind_of_statement(statement) -> str:
    return "source" if isinstance(statement, ast.Source) else \
        "broadcast" if isinstance(statement, ast.Broadcast) else "stream"


def _enrich_text(statement: ast.Enrich) -> str:
    """The ENRICH's call and options as they will run: values written, and defaults marked."""
    options = read_options(statement.options, [])
    written = {o.key for o in statement.options}
    call = _call_text(statement.call)
    mode = options.mode.value + (f" BY ({', '.join(n.value for n in options.order_by)})" if options.order_by else "")
    rows = [
        ("ASYNC", mode, "async"),
        ("CAPACITY", f"{options.capacity}{' ADAPTIVE' if options.adaptive else ''}", "capacity"),
        ("TIMEOUT", _duration(options.timeout_s), "timeout"),
        ("RETRY", _retry(options), "retry"),
        ("CACHE", f"{options.cache.size} TTL {_duration(options.cache.ttl_s)}" if options.cache else "none", "cache"),
        ("RATE", _rate(options), "rate"),
        ("BATCH", f"{options.batch.size} WITHIN {_duration(options.batch.within_s)}" if options.batch else "none",
         "batch"),
        ("ON MISS", _outcome(options.on_miss, options), "on_miss"),
        ("ON TIMEOUT", _outcome(options.on_timeout, options), "on_timeout"),
        ("ON ERROR", _outcome(options.on_error, options), "on_error"),
        ("ON OUTAGE", _outage(options), "on_outage"),
    ]
    if hasattr(options, "store"):       # STORE and BUDGET (the answer store)
        ttl = getattr(options, "store_ttl_s", None)
        store = ("yes" + (f", TTL {_duration(ttl)}" if ttl else "")) if options.store else "no"
        budget = getattr(options, "budget", None)
        rows += [("STORE", store, "store"),
                 ("BUDGET", f"{budget.amount} {budget.unit}" if budget else "none", "budget")]
    if hasattr(options, "tier"):        # TIER and PRICE (plan/tiers.py)
        rows += [("TIER", options.tier, "tier"), ("PRICE", _price(options.price), "price")]
    lines = [f"**ENRICH** `{statement.input.value}` → `{statement.name.value}`", f"WITH {call}", "",
             "| option | value | |", "|---|---|---|"]
    for label, value, key in rows:
        lines.append(f"| {label} | {value} | {'' if key in written else 'default'} |")
    returns = ", ".join(f"{c.name.value} {c.type.text}" for c in statement.returns)
    lines += ["", f"RETURNS ({returns})"]
    return "\n".join(lines)


def _price(price) -> str:
    if price is None:
        return "none"
    if price.per_call:
        return f"{price.per_call:g} PER CALL"
    return (f"{price.input_per_million:g} PER MILLION INPUT TOKENS, {price.output_per_million:g} PER MILLION "
            "OUTPUT TOKENS")


def _call_text(call) -> str:
    """The call as written, in one line (the prompt or input template left out)."""
    if isinstance(call, ast.HttpCall):
        return f"HTTP {call.method.value.upper()} '{call.url.value}'"
    if isinstance(call, ast.PythonCall):
        return f"PYTHON '{call.ref.value}'"
    kind = "MODEL" if isinstance(call, ast.ModelCall) else "EMBEDDING"
    at = f" AT '{call.at.value}'" if getattr(call, "at", None) is not None else ""
    return f"{kind} '{call.model.value}'{at}"


def _rate(options: EnrichOptions) -> str:
    rate = options.rate
    if rate is None:
        return "none"
    text = f"{rate.per_second:g} PER SECOND ({rate.per_second * 60:g} PER MINUTE)"
    tokens = getattr(rate, "tokens_per_minute", None)
    return text + (f", {tokens:g} TOKENS PER MINUTE" if tokens else "")


def _outage(options: EnrichOptions) -> str:
    outage = getattr(options, "outage", None)
    if outage is None:
        return "CONTINUE"
    return f"PAUSE {_duration(outage.pause_s)}" if outage.action == "PAUSE" else outage.action


def _duration(seconds: float) -> str:
    """A duration as the language writes it, in its largest whole unit (300.0 → 5m)."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size and float(seconds / size).is_integer():
            return f"{int(seconds / size)}{unit}"
    return f"{seconds * 1000:g}ms"


def _retry(options: EnrichOptions) -> str:
    if options.retry is None:
        return "none"
    r = options.retry
    return f"{r.attempts} BACKOFF {_duration(r.backoff_s)} {'EXPONENTIAL' if r.exponential else 'FIXED'}"


def _outcome(outcome: Outcome, options: EnrichOptions) -> str:
    if outcome is Outcome.DEAD_LETTER:
        return f"DEAD LETTER '{options.dead_letter}'"
    return outcome.value

