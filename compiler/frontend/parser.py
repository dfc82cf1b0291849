"""Text → AST. Lark (LALR, contextual lexer) parses one statement at a time, so one bad
statement never hides the errors of the next; Lark's exceptions become diagnostics here and
nowhere else."""
from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from dslc.compiler.diagnostics import CompileError, Diagnostic, did_you_mean, error
from dslc.compiler.frontend import ast
from dslc.compiler.frontend.lexical import Chunk, leading_space, split_statements, unescape_string
from dslc.compiler.source import SourceFile, Span
from dslc.grammar import grammar_text

STATEMENT_KEYWORDS = ("PIPELINE", "SET", "SOURCE", "BROADCAST", "STREAM", "SINK", "DATABASE", "EXPECT")

# How Lark's terminal names read in a message.
_TERMINAL_WORDS = {
    "NAME": "a name", "QUOTED_NAME": "a name", "STRING": "a string", "NUMBER": "a number",
    "CONF_KEY": "a configuration key", "SQL_QUERY": "a SELECT query",
    "SQL_PREDICATE": "a condition", "LPAR": "'('", "RPAR": "')'", "COMMA": "','",
    "EQUAL": "'='", "LESSTHAN": "'<'", "MORETHAN": "'>'", "COLON": "':'", "MINUS": "'-'",
    "$END": "';'", "RETRY_KW": "'RETRY'", "CHECK_EXPR": "a condition in parentheses",
}

# The SQL terminals match almost anything, so Lark's fallback lexer reports a whole run of text
# as one token; only its first word is what the parser could not take.
_CATCH_ALL = ("SQL_QUERY", "SQL_PREDICATE")
_FIRST_WORD = re.compile(r"[A-Za-z0-9_]+|`(?:[^`]|``)*`?|'(?:[^'\\]|\\.)*'?|\"(?:[^\"\\]|\\.)*\"?|\S")
_PUNCTUATION = set("(),=<>:-;'\"`")


@lru_cache(maxsize=1)
def _lark() -> Lark:
    return Lark(grammar_text(), start="statement", parser="lalr", lexer="contextual",
                propagate_positions=True, maybe_placeholders=True)


def parse(source: SourceFile, *, statement: StatementParser | None = None) -> ast.Program:
    """Parse a whole file; raise CompileError with every syntax error found. `statement` parses
    one statement (default `parse_statement`; the editor passes one that remembers results)."""
    statements: list[ast.Statement] = []
    problems: list[Diagnostic] = []
    for chunk in split_statements(source.text):
        parsed, found = (statement or parse_statement)(chunk)
        if parsed is not None:
            statements.append(parsed)
        problems.extend(found)
    if problems:
        raise CompileError(source, problems)
    return ast.Program(tuple(statements))


def parse_statement(chunk: Chunk) -> tuple[ast.Statement | None, list[Diagnostic]]:
    """One statement's syntax tree (None when it does not parse) and its syntax errors; a
    function of the chunk's text, `terminated` and `start` only."""
    try:
        tree = _lark().parse(chunk.text)
    except UnexpectedInput as exc:
        return None, [_syntax_error(exc, chunk)]
    statement = _ToAst(chunk.start).transform(tree)
    if chunk.terminated:
        return statement, []
    end = chunk.start + len(chunk.text.rstrip())
    return statement, [error("E0104", Span(max(end - 1, 0), end), hint="add ';' after the statement")]


StatementParser = Callable[[Chunk], tuple["ast.Statement | None", list[Diagnostic]]]


def _describe(names: set[str]) -> tuple[str, list[str]]:
    """Readable list of at most four expected tokens, and the keywords among them."""
    words = sorted({_TERMINAL_WORDS.get(n, f"'{n}'") for n in names if not n.startswith("__")})
    keywords = sorted(n for n in names if n.isupper() and n not in _TERMINAL_WORDS)
    shown = words[:4]
    text = ", ".join(shown[:-1]) + (" or " if len(shown) > 1 else "") + shown[-1] if shown else "nothing"
    if len(words) > 4:
        text = ", ".join(shown) + ", ..."
    return text, keywords


def _expected(exc: UnexpectedInput) -> set[str]:
    """What the parser could take at the error: its own view (`accepts`), not the lexer's."""
    accepts = getattr(exc, "accepts", None)
    return set(accepts or getattr(exc, "expected", None) or ())


def _syntax_error(exc: UnexpectedInput, chunk: Chunk) -> Diagnostic:
    if isinstance(exc, UnexpectedCharacters):
        at = chunk.start + exc.pos_in_stream
        return _bad_character(chunk.text, exc.pos_in_stream, at)
    if isinstance(exc, UnexpectedToken) and exc.token.type != "$END":
        token: Token = exc.token
        at = chunk.start + (token.start_pos or 0)
        text = str(token)
        if token.type in _CATCH_ALL:
            match = _FIRST_WORD.match(text)
            text = match.group(0) if match else text[:1]
            if len(text) == 1 and not text.isalnum() and text not in _PUNCTUATION:
                return error("E0102", Span(at, at + 1), found=text)
            if text[:1] in "'\"`" and (len(text) == 1 or text[-1] != text[0]):
                return _bad_character(chunk.text, token.start_pos or 0, at)
        expected, keywords = _describe(_expected(exc))
        if at == chunk.start + leading_space(chunk.text):
            expected, keywords = "a statement (" + ", ".join(STATEMENT_KEYWORDS) + ")", list(STATEMENT_KEYWORDS)
        hint = did_you_mean(text, keywords)
        if hint is None and keywords and text.upper() in STATEMENT_KEYWORDS:
            hint = "did you forget ';' after the previous statement?"
        if "CHECK_EXPR" in _expected(exc):
            hint = "put the condition in parentheses: CHECK (amount > 0)"
        if text.upper() == "ADAPTIVE":
            hint = "ADAPTIVE follows CAPACITY n: CAPACITY 64 ADAPTIVE (the limit moves between 1 and 64)"
        if text.upper() == "BY" and re.search(r"\bUNORDERED\s*$", chunk.text[:token.start_pos], re.I):
            hint = "only ORDERED takes BY (input order per key); UNORDERED keeps no order to key"
        return error("E0101", Span(at, at + max(len(text), 1)), hint=hint,
                     found=f"'{text}'", expected=expected)
    expected, _ = _describe(_expected(exc))
    end = chunk.start + len(chunk.text.rstrip())
    if chunk.terminated:
        return error("E0101", Span(end, end + 1), found="';'", expected=expected,
                     hint="the statement ends too early")
    return error("E0103", Span(max(end - 1, 0), end), what=f"expected {expected}")


def _bad_character(text: str, pos: int, at: int) -> Diagnostic:
    """A character no token starts with; an opening quote without its closing quote."""
    found = text[pos]
    if found in "'\"`":
        kind = "name" if found == "`" else "string"
        return error("E0105", Span(at, at + 1), kind=kind, hint=f"close it with {found}")
    return error("E0102", Span(at, at + 1), found=found)


def _spanned(method, _rule, children, meta):
    """The one place Lark's positions become Spans: every rule method is called with its node's
    span, then its children as named parameters."""
    return method(method.base_func.__self__.span(meta), *children)


def _sql(token: Token, offset: int) -> ast.Sql:
    """SQL text captured whole, without surrounding blanks, and where it starts in the file."""
    raw = str(token)
    lead = len(raw) - len(raw.lstrip())
    text = raw.strip()
    start = offset + token.start_pos + lead
    return ast.Sql(text, Span(start, start + len(text)))


@v_args(wrapper=_spanned)
class _ToAst(Transformer):
    """Lark tree → AST nodes, one method per grammar rule (children by name, span first)."""

    def __init__(self, offset: int):
        super().__init__()
        self.offset = offset

    def span(self, meta) -> Span:
        """A rule's span in the file (the statement's offset added to Lark's positions)."""
        if getattr(meta, "empty", True):
            return Span(self.offset, self.offset)
        return Span(self.offset + meta.start_pos, self.offset + meta.end_pos)

    def _tok(self, token: Token) -> Span:
        return Span(self.offset + token.start_pos, self.offset + token.end_pos)

    def _num(self, token: Token) -> ast.Num:
        return ast.Num(str(token), self._tok(token))

    def _word(self, token: Token) -> ast.Word:
        return ast.Word(str(token).upper(), self._tok(token))

    # ---- lexical
    def name(self, span, token):
        value = str(token)
        if token.type == "QUOTED_NAME":
            value = value[1:-1].replace("``", "`")
        return ast.Name(value, self._tok(token))

    def string(self, span, *parts):
        return ast.Str("".join(unescape_string(str(t)) for t in parts), span)

    def lit_string(self, span, string):
        return string

    def lit_number(self, span, number):
        return self._num(number)

    def lit_negative(self, span, number):
        return ast.Num("-" + str(number), span)

    def lit_word(self, span, name):
        return ast.Word(name.value, name.span)

    # ---- types and columns
    def type(self, span, base, args=""):
        return ast.TypeRef(base.value.upper() + (args or ""), span)

    def interval_type(self, span, *words):
        # INTERVAL, INTERVAL DAY, INTERVAL DAY TO SECOND
        return ast.TypeRef(" TO ".join([f"INTERVAL {words[1].upper()}"] + [w.upper() for w in words[2:]])
                           if len(words) > 1 else "INTERVAL", span)

    def type_params(self, span, *numbers):
        return "(" + ",".join(str(n) for n in numbers) + ")"

    def type_elements(self, span, *elements):
        return "<" + ",".join(e.text if isinstance(e, ast.TypeRef) else e for e in elements) + ">"

    def struct_field(self, span, name, type_):
        return f"{name.value}:{type_.text}"

    def column_def(self, span, name, type_):
        return ast.ColumnDef(name, type_, span)

    def return_column(self, span, name, type_, path=None):
        return ast.ColumnDef(name, type_, span, path=path)

    def returns(self, span, *columns):
        return columns

    # ---- options: each becomes Opt(key, args), read by the planner's option reader
    def opt_mode(self, span, mode): return ast.Opt("mode", (mode,), span)
    def opt_checkpoint(self, span, path): return ast.Opt("checkpoint", (path,), span)
    def opt_trigger_every(self, span, every): return ast.Opt("trigger", (self._num(every),), span)
    def opt_trigger_now(self, span): return ast.Opt("trigger", (), span)
    def opt_answers(self, span, location): return ast.Opt("answers", (location,), span)
    def opt_store(self, span, ttl=None): return ast.Opt("store", (self._num(ttl),) if ttl is not None else (), span)
    def opt_budget(self, span, amount, unit): return ast.Opt("budget", (self._num(amount), unit), span)
    def opt_provenance(self, span, column): return ast.Opt("provenance", (column,), span)
    def opt_tier(self, span, tier): return ast.Opt("tier", (tier,), span)
    def opt_on_batch_failure(self, span, then): return ast.Opt("on_batch_failure", (then,), span)

    def opt_price(self, span, amount, basis):
        """PRICE n PER CALL | n PER MILLION INPUT TOKENS [, m ...]: the amount, CALL or TOKENS, the output price."""
        return ast.Opt("price", (self._num(amount), *basis), span)

    def price_per_call(self, span): return (ast.Word("CALL", span),)

    def price_per_tokens(self, span, output=None):
        return (ast.Word("TOKENS", span),) + ((self._num(output),) if output is not None else ())
    def opt_schema(self, span, *columns): return ast.Opt("schema", columns, span)
    def opt_watermark(self, span, column, delay): return ast.Opt("watermark", (column, self._num(delay)), span)
    def opt_capacity(self, span, capacity, adaptive=None):
        return ast.Opt("capacity", (self._num(capacity),) + ((self._word(adaptive),) if adaptive else ()), span)
    def opt_timeout(self, span, timeout): return ast.Opt("timeout", (self._num(timeout),), span)
    def opt_rate(self, span, count, unit, tokens=None):
        """RATE n PER SECOND|MINUTE [, m TOKENS PER MINUTE]: the count, the unit word, the tokens."""
        return ast.Opt("rate", (self._num(count), unit) + ((self._num(tokens),) if tokens is not None else ()), span)

    def rate_unit(self, span, word):
        return self._word(word)
    def opt_on_miss(self, span, outcome): return ast.Opt("on_miss", (outcome,), span)
    def opt_on_timeout(self, span, outcome): return ast.Opt("on_timeout", (outcome,), span)
    def opt_on_error(self, span, outcome): return ast.Opt("on_error", (outcome,), span)
    def opt_on_outage(self, span, outage): return ast.Opt("on_outage", outage, span)
    def outage_pause(self, span, duration): return (ast.Word("PAUSE", span), self._num(duration))
    def outage_word(self, span, word): return (self._word(word),)
    def opt_sink_mode(self, span, mode): return ast.Opt("mode", (mode,), span)
    def opt_partition_by(self, span, *columns): return ast.Opt("partition_by", columns, span)
    def opt_key(self, span, *columns): return ast.Opt("key", columns, span)
    def opt_partition_column(self, span, column, count):
        return ast.Opt("partition_column", (column, self._num(count)), span)

    def opt_batch(self, span, size, within=None):
        return ast.Opt("batch", (self._num(size),) + ((self._num(within),) if within is not None else ()), span)

    def opt_cache(self, span, size, ttl):
        return ast.Opt("cache", (self._num(size), self._num(ttl)), span)

    def opt_async(self, span, order=None):
        return ast.Opt("async", (order,) if order is not None else (), span)

    def opt_async_keyed(self, span, ordered, *keys):
        """ASYNC ORDERED BY (col, ...): the ORDERED word, then the key columns' names."""
        return ast.Opt("async", (self._word(ordered), *keys), span)

    def order(self, span, word):
        return self._word(word)

    def backoff_kind(self, span, word):
        return self._word(word)

    def budget_unit(self, span, word):
        return self._word(word)

    def opt_retry(self, span, attempts, backoff=None, kind=None):
        args = [self._num(attempts)]
        if backoff is not None:
            args.append(self._num(backoff))
        if kind is not None:
            args.append(kind)
        return ast.Opt("retry", tuple(args), span)

    def outcome(self, span, word):
        return self._word(word)

    def dead_letter(self, span, path, ceiling=None):
        return ast.Opt("dead_letter", (path,) + ((ceiling,) if ceiling is not None else ()), span)

    def ceiling_percent(self, span, number, _percent):
        return ast.Opt("ceiling", (self._num(number), ast.Word("%", self._tok(_percent))), span)

    def ceiling_rows(self, span, number, _rows):
        return ast.Opt("ceiling", (self._num(number), ast.Word("ROWS", self._tok(_rows))), span)

    def options(self, span, *pairs):
        return ast.Opt("options", pairs, span)

    def option(self, span, key, value):
        return (key, value)

    def option_key(self, span, key):
        return key if isinstance(key, ast.Str) else ast.Str(str(key), self._tok(key))

    # ---- statements
    def pipeline(self, span, name, *options):
        return ast.Pipeline(name, options, span)

    def set_stmt(self, span, key, value):
        return ast.SetConf(ast.Name(str(key), self._tok(key)), value, span)

    def connector(self, span, kind, arg=None):
        return ast.Connector(kind, arg, span)

    def source(self, span, name, connector, *options):
        return ast.Source(name, connector, options, span)

    def apply_changelog(self, span, key, op=None):
        return {"key": key, "op": op, "using": None}

    def apply_python(self, span, ref):
        return {"key": None, "op": None, "using": ref}

    def broadcast(self, span, name, source, *rest):
        parts = list(rest)
        schema = parts.pop(0) if isinstance(parts[0], ast.Opt) else None
        how = parts.pop(0)
        refresh = parts.pop(0) if parts else None
        if isinstance(source, ast.Connector):     # FROM DATABASE db TABLE 't' | QUERY '...'
            return ast.Broadcast(name, source.database, span=span, database=source, refresh=refresh,
                                 schema=schema, **how)
        return ast.Broadcast(name, source, span=span, refresh=refresh, **how)

    def broadcast_schema(self, span, *columns): return ast.Opt("schema", columns, span)

    def broadcast_refresh(self, span, every):
        return self._num(every)

    # ---- databases
    def database(self, span, name, url):
        return ast.Database(name, url, span)

    def database_connector(self, span, name, relation):
        word, arg = relation
        return ast.Connector(ast.Name("DATABASE", span.sub(0, 8)), arg, span, database=name, relation=word)

    def relation(self, span, word, arg):
        return ast.Name(str(word).upper(), self._tok(word)), arg

    def sql_call(self, span, database, query, options=None):
        return ast.SqlCall(database, query, span, options)

    # A stream's body is the statement without its name: `stream` gives it name and span.
    def select(self, span, query):
        sql = _sql(query, self.offset)
        return lambda name, stmt_span: ast.Select(name, sql, stmt_span)

    def http_call(self, span, method, url, *parts):
        """The clauses after the URL, in any order; a second one of a kind is kept for the checker."""
        found: dict[str, object] = {}
        repeated = []
        for part in parts:
            key = part.key if isinstance(part, ast.Opt) else "answer"
            if key in found:
                repeated.append(part if isinstance(part, ast.Opt) else ast.Opt("answer", (part,), part.span))
            else:
                found[key] = part
        return ast.HttpCall(method, url, span, body=found.get("body"), headers=found.get("headers"),
                            answer=found.get("answer"), options=found.get("options"), repeated=tuple(repeated))

    def call_headers(self, span, *headers):
        return ast.Opt("headers", headers, span)

    def header(self, span, name, value=None):
        return (name, value)

    def call_answer(self, span, expression):
        return expression

    def http_body(self, span, *columns):
        return ast.Opt("body", columns, span)

    def python_call(self, span, ref):
        return ast.PythonCall(ref, span)

    def model_call(self, span, model, at, headers, system, prompt, options=None):
        return ast.ModelCall(model, at, system, prompt, span, headers=headers, options=options)

    def embedding_call(self, span, model, at, headers, input_, options=None):
        return ast.EmbeddingCall(model, at, input_, span, headers=headers, options=options)

    def model_at(self, span, url):
        return url

    def model_system(self, span, text):
        return text

    def enrich(self, span, input_, call, returns, *options):
        return lambda name, stmt_span: ast.Enrich(name, input_, call, returns, options, stmt_span)

    def match(self, span, input_, state, alias, predicate):
        sql = _sql(predicate, self.offset)
        return lambda name, stmt_span: ast.Match(name, input_, state, alias, sql, stmt_span)

    def broadcast_states(self, span, *states):
        return states

    def process(self, span, input_, states, ref, returns):
        return lambda name, stmt_span: ast.Process(name, input_, states or (), ref, returns, stmt_span)

    def stream(self, span, name, body):
        return body(name, span)

    def sink(self, span, input_, connector, *options):
        return ast.Sink(input_, connector, options, span)

    # ---- EXPECT
    def constraint(self, span, name, check):
        return ast.Constraint(name, _sql(check, self.offset), span)

    def on_violation(self, span, violation):
        return ast.Violation(violation[0], violation[1], span)

    def violation_word(self, span, word):
        return (self._word(word), None)

    def quarantine(self, span, path):
        return (ast.Word("QUARANTINE", span.sub(0, len("QUARANTINE"))), path)

    def expect(self, span, target, *parts):
        """An ON VIOLATION right after a constraint without one is its own; any other is the
        statement's default (a second default is kept in `repeated` for the checker)."""
        constraints: list[ast.Constraint] = []
        default, repeated, previous = None, [], None
        for part in parts:
            if isinstance(part, ast.Constraint):
                constraints.append(part)
            elif isinstance(previous, ast.Constraint) and previous.violation is None:
                constraints[-1] = previous = ast.Constraint(previous.name, previous.check,
                                                            Span(previous.span.start, part.span.end), part)
                continue
            elif default is None:
                default = part
            else:
                repeated.append(part)
            previous = part
        return ast.Expect(target, tuple(constraints), default, span, tuple(repeated))


def parse_text(text: str, path: str = "<input>") -> ast.Program:
    """Parse text that is not (yet) a file, e.g. in the REPL."""
    return parse(SourceFile(path, text))


__all__ = ["parse", "parse_statement", "parse_text", "CompileError", "STATEMENT_KEYWORDS"]
