"""Text → AST. Lark (LALR, contextual lexer) parses one statement at a time, so one bad
statement never hides the errors of the next; Lark's exceptions become diagnostics here and
nowhere else."""
from __future__ import annotations

import re
from functools import lru_cache

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from dslc.grammar import grammar_text

from dslc.compiler.frontend import ast
from dslc.compiler.diagnostics import CompileError, Diagnostic, did_you_mean, error
from dslc.compiler.frontend.lexical import Chunk, leading_space, split_statements, unescape_string
from dslc.compiler.source import SourceFile, Span

STATEMENT_KEYWORDS = ("PIPELINE", "SET", "SOURCE", "BROADCAST", "STREAM", "SINK")

# How Lark's terminal names read in a message.
_TERMINAL_WORDS = {
    "NAME": "a name", "QUOTED_NAME": "a name", "STRING": "a string", "NUMBER": "a number",
    "CONF_KEY": "a configuration key", "SQL_QUERY": "a SELECT query",
    "SQL_PREDICATE": "a condition", "LPAR": "'('", "RPAR": "')'", "COMMA": "','",
    "EQUAL": "'='", "LESSTHAN": "'<'", "MORETHAN": "'>'", "COLON": "':'", "MINUS": "'-'",
    "$END": "';'", "RETRY_KW": "'RETRY'",
}

# The SQL terminals match almost anything, so Lark's fallback lexer reports a whole run of text
# as one token; only its first word is what the parser could not take.
_CATCH_ALL = ("SQL_QUERY", "SQL_PREDICATE")
_FIRST_WORD = re.compile(r"[A-Za-z0-9_]+|`(?:[^`]|``)*`?|'(?:[^'\\]|\\.)*'?|\"(?:[^\"\\]|\\.)*\"?|\S")
_PUNCTUATION = set("(),=<>:-;'\"`")


@lru_cache(maxsize=1)
def _lark() -> Lark:
    return Lark(grammar_text(), start="statement", parser="lalr", lexer="contextual",
                propagate_positions=True, maybe_placeholders=False)


def parse(source: SourceFile) -> ast.Program:
    """Parse a whole file; raise CompileError with every syntax error found."""
    statements: list[ast.Statement] = []
    problems: list[Diagnostic] = []
    for chunk in split_statements(source.text):
        try:
            tree = _lark().parse(chunk.text)
        except UnexpectedInput as exc:
            problems.append(_syntax_error(exc, chunk, source))
            continue
        statement = _ToAst(chunk.start).transform(tree)
        statements.append(statement)
        if not chunk.terminated:
            end = chunk.start + len(chunk.text.rstrip())
            problems.append(error("E0104", Span(max(end - 1, 0), end),
                                  hint="add ';' after the statement"))
    if problems:
        raise CompileError(source, problems)
    return ast.Program(tuple(statements))


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


def _syntax_error(exc: UnexpectedInput, chunk: Chunk, source: SourceFile) -> Diagnostic:
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


@v_args(meta=True)
class _ToAst(Transformer):
    """Lark tree → AST nodes; the only place that turns Lark positions into Spans."""

    def __init__(self, offset: int):
        super().__init__()
        self.offset = offset

    def _span(self, meta) -> Span:
        if getattr(meta, "empty", True):
            return Span(self.offset, self.offset)
        return Span(self.offset + meta.start_pos, self.offset + meta.end_pos)

    def _tok(self, token: Token) -> Span:
        return Span(self.offset + token.start_pos, self.offset + token.end_pos)

    # ---- lexical
    def name(self, meta, children):
        token = children[0]
        value = str(token)
        if token.type == "QUOTED_NAME":
            value = value[1:-1].replace("``", "`")
        return ast.Name(value, self._tok(token))

    def string(self, meta, children):
        return ast.Str("".join(unescape_string(str(t)) for t in children), self._span(meta))

    def lit_string(self, meta, children):
        return children[0]

    def lit_number(self, meta, children):
        return ast.Num(str(children[0]), self._tok(children[0]))

    def lit_negative(self, meta, children):
        return ast.Num("-" + str(children[0]), self._span(meta))

    def lit_word(self, meta, children):
        return ast.Word(children[0].value, children[0].span)

    def _num(self, token: Token) -> ast.Num:
        return ast.Num(str(token), self._tok(token))

    # ---- types and columns
    def type(self, meta, children):
        base = children[0].value.upper()
        args = children[1] if len(children) > 1 else ""
        return ast.TypeRef(base + args, self._span(meta))

    def type_params(self, meta, children):
        return "(" + ",".join(str(c) for c in children) + ")"

    def type_elements(self, meta, children):
        return "<" + ",".join(c.text if isinstance(c, ast.TypeRef) else c for c in children) + ">"

    def struct_field(self, meta, children):
        return f"{children[0].value}:{children[1].text}"

    def column_def(self, meta, children):
        return ast.ColumnDef(children[0], children[1], self._span(meta))

    def returns(self, meta, children):
        return tuple(children)

    # ---- options
    def _opt(self, key: str, meta, args) -> ast.Opt:
        return ast.Opt(key, tuple(args), self._span(meta))

    def opt_mode(self, meta, c): return self._opt("mode", meta, c)
    def opt_checkpoint(self, meta, c): return self._opt("checkpoint", meta, c)
    def opt_trigger_every(self, meta, c): return self._opt("trigger", meta, [self._num(c[0])])
    def opt_trigger_now(self, meta, c): return self._opt("trigger", meta, [])
    def opt_schema(self, meta, c): return self._opt("schema", meta, c)
    def opt_watermark(self, meta, c): return self._opt("watermark", meta, [c[0], self._num(c[1])])
    def opt_capacity(self, meta, c): return self._opt("capacity", meta, [self._num(c[0])])
    def opt_timeout(self, meta, c): return self._opt("timeout", meta, [self._num(c[0])])
    def opt_cache(self, meta, c): return self._opt("cache", meta, [self._num(c[0]), self._num(c[1])])
    def opt_rate(self, meta, c): return self._opt("rate", meta, [self._num(c[0])])
    def opt_on_miss(self, meta, c): return self._opt("on_miss", meta, c)
    def opt_on_timeout(self, meta, c): return self._opt("on_timeout", meta, c)
    def opt_on_error(self, meta, c): return self._opt("on_error", meta, c)
    def opt_sink_mode(self, meta, c): return self._opt("mode", meta, c)
    def opt_partition_by(self, meta, c): return self._opt("partition_by", meta, c)

    def opt_async(self, meta, c):
        return self._opt("async", meta, c)

    def opt_async_keyed(self, meta, c):
        """ASYNC ORDERED BY (col, ...): the ORDERED word, then the key columns' names."""
        return self._opt("async", meta, [ast.Word("ORDERED", self._tok(c[0])), *c[1:]])

    def order(self, meta, c):
        return ast.Word(str(c[0]).upper(), self._tok(c[0]))

    def backoff_kind(self, meta, c):
        return ast.Word(str(c[0]).upper(), self._tok(c[0]))

    def opt_retry(self, meta, c):
        args = [self._num(c[0])]
        if len(c) > 1:
            args.append(self._num(c[1]))
        if len(c) > 2:
            args.append(c[2])
        return self._opt("retry", meta, args)

    def outcome(self, meta, c):
        return ast.Word(str(c[0]).upper(), self._tok(c[0]))

    def dead_letter(self, meta, c):
        return ast.Opt("dead_letter", (c[0],), self._span(meta))

    def options(self, meta, children):
        return self._opt("options", meta, children)

    def option(self, meta, children):
        return (children[0], children[1])

    def option_key(self, meta, children):
        token = children[0]
        if isinstance(token, ast.Str):
            return token
        return ast.Str(str(token), self._tok(token))

    # ---- statements
    def pipeline(self, meta, c):
        return ast.Pipeline(c[0], tuple(c[1:]), self._span(meta))

    def set_stmt(self, meta, c):
        return ast.SetConf(ast.Name(str(c[0]), self._tok(c[0])), c[1], self._span(meta))

    def connector(self, meta, c):
        return ast.Connector(c[0], c[1] if len(c) > 1 else None, self._span(meta))

    def source(self, meta, c):
        return ast.Source(c[0], c[1], tuple(c[2:]), self._span(meta))

    def apply_changelog(self, meta, c):
        return ("changelog", c[0], c[1] if len(c) > 1 else None)

    def apply_python(self, meta, c):
        return ("python", c[0])

    def broadcast(self, meta, c):
        how = c[2]
        if how[0] == "changelog":
            return ast.Broadcast(c[0], c[1], how[1], how[2], None, self._span(meta))
        return ast.Broadcast(c[0], c[1], None, None, how[1], self._span(meta))

    def select(self, meta, c):
        token = c[0]
        text = str(token).rstrip()
        start = self.offset + token.start_pos
        return ast.Sql(text, Span(start, start + len(text)))

    def http_call(self, meta, c):
        return ast.HttpCall(c[0], c[1], self._span(meta))

    def python_call(self, meta, c):
        return ast.PythonCall(c[0], self._span(meta))

    def enrich(self, meta, c):
        return ("enrich", c[0], c[1], c[2], tuple(c[3:]), self._span(meta))

    def match(self, meta, c):
        alias = c[2] if len(c) == 4 else None
        token = c[-1]
        raw = str(token)
        lead = len(raw) - len(raw.lstrip())
        text = raw.strip()
        start = self.offset + token.start_pos + lead
        return ("match", c[0], c[1], alias, ast.Sql(text, Span(start, start + len(text))), self._span(meta))

    def process(self, meta, c):
        return ("process", c[0], tuple(c[1:-2]), c[-2], c[-1], self._span(meta))

    def stream(self, meta, c):
        name, body = c
        span = self._span(meta)
        if isinstance(body, ast.Sql):
            return ast.Select(name, body, span)
        kind, *rest = body
        if kind == "enrich":
            return ast.Enrich(name, rest[0], rest[1], rest[2], rest[3], span)
        if kind == "match":
            return ast.Match(name, rest[0], rest[1], rest[2], rest[3], span)
        return ast.Process(name, rest[0], rest[1], rest[2], rest[3], span)

    def sink(self, meta, c):
        return ast.Sink(c[0], c[1], tuple(c[2:]), self._span(meta))


def parse_text(text: str, path: str = "<input>") -> ast.Program:
    """Parse text that is not (yet) a file, e.g. in the REPL."""
    return parse(SourceFile(path, text))


__all__ = ["parse", "parse_text", "CompileError", "STATEMENT_KEYWORDS"]
