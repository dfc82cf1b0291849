"""Checks of what a call to a service says beyond its URL: `${NAME}` secrets, HEADERS, ANSWER and
PATH expressions (JMESPath), and the call's OPTIONS (ca_file, verify).

Each check reports at the exact place in the file (inside the string when it can) and returns the
checked value, so that the planner builds the call from what passed.
"""
from __future__ import annotations

import re

import jmespath
from jmespath import exceptions as jmespath_errors

from dslc.compiler.diagnostics import Diagnostic, did_you_mean, error, printable
from dslc.compiler.frontend import ast
from dslc.compiler.source import SourceFile, Span
from dslc.runtime.secrets import bad_names

# RFC 9110 token characters: what a header name may be made of
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+\Z")
# RFC 9110 field values: no control characters but a tab (a CR or LF would end the header early)
_BAD_HEADER_VALUE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
CALL_OPTIONS = ("ca_file", "verify")


class ServiceChecks:
    """The checks of one file: they need its text to point inside string literals."""

    def __init__(self, source: SourceFile, problems: list[Diagnostic]) -> None:
        self.source = source
        self.problems = problems

    def _inside(self, literal: ast.Str, needle: str, length: int, skip: int = 0) -> Span:
        """The span of `needle` (`length` characters from `skip` into it) inside a string literal as
        written; the whole literal when it cannot be found (an escape in between)."""
        raw = self.source.text[literal.span.start:literal.span.end]
        at = raw.find(needle)
        return literal.span.sub(at + skip, max(length, 1)) if at >= 0 else literal.span

    def secrets(self, literal: ast.Str) -> bool:
        """Every `${...}` in a literal names a secret (letters, digits, '_'); False if one does not."""
        ok = True
        for _, name in bad_names(literal.value):
            closed = "${" + name + "}" in literal.value
            span = self._inside(literal, "${" + name, len(name) + (3 if not name else 0), skip=2 if name else 0)
            hint = ("a secret is written ${NAME}, NAME made of letters, digits and _ (not starting with a "
                    "digit), set in the environment or in dslc run --secrets FILE")
            if not closed:
                hint = "close it with '}': ${NAME}"
            self.problems.append(error("E0321", span, name=name if closed else "${" + name, hint=hint))
            ok = False
        return ok

    def headers(self, clause: ast.Opt | None) -> tuple[tuple[str, str], ...]:
        """HEADERS (name = value, ...) as checked pairs; each problem reported."""
        if clause is None:
            return ()
        pairs: list[tuple[str, str]] = []
        seen: dict[str, ast.Str] = {}
        for name, value in clause.args:
            good = True
            if not _HEADER_NAME.match(name.value):
                self.problems.append(error("E0323", name.span, name=printable(name.value),
                                           hint="a header name is letters, digits and - (e.g. 'X-Api-Key')"))
                good = False
            if value is None:
                self.problems.append(error("E0320", name.span, name=printable(name.value),
                                           hint=f"write '{printable(name.value)}' = 'value' (a secret as '${{NAME}}')"))
                continue
            if not value.value.strip():
                self.problems.append(error("E0320", value.span, name=printable(name.value),
                                           hint="an empty header value sends nothing: drop the header"))
                continue
            if _BAD_HEADER_VALUE.search(value.value):
                self.problems.append(error(
                    "E0309", value.span, text=printable(value.value), what="header value (it holds a control "
                    "character; a CR or LF would end the header and start another)",
                    hint="write the value on one line without \\r, \\n or other control characters"))
                good = False
            if re.search(r"(?<!\$)\{[A-Za-z_][A-Za-z0-9_]*\}", value.value):
                self.problems.append(error(
                    "E0309", value.span, text=printable(value.value), what="header value (column placeholders are "
                    "filled in the URL and BODY only)",
                    hint="send the column in the URL or the BODY; a secret is written ${NAME}"))
                good = False
            good = self.secrets(value) and good
            if name.value.lower() in seen:
                self.problems.append(error("E0324", name.span, clause=f"header '{printable(name.value)}'",
                                           hint="keep one of them"))
                good = False
            seen[name.value.lower()] = name
            if good:
                pairs.append((name.value, value.value))
        return tuple(pairs)

    def jmespath(self, literal: ast.Str | None, where: str) -> str | None:
        """A JMESPath expression that compiles, else None (reported at the offending character)."""
        if literal is None:
            return None
        text = literal.value
        if not text.strip():
            self.problems.append(error("E0322", literal.span, where=where, detail="the expression is empty",
                                       hint="write where the value sits, e.g. 'data.customer'"))
            return None
        try:
            jmespath.compile(text)
        except jmespath_errors.LexerError as exc:
            self._bad_expression(literal, where, exc.lexer_position, str(exc.lexer_value),
                                 exc.message or "bad character")
            return None
        except jmespath_errors.ParseError as exc:
            ended = exc.token_type == "EOF" or exc.token_value is None
            detail = "the expression ends too early" if ended else f"unexpected {exc.token_value!r}"
            self._bad_expression(literal, where, exc.lex_position, str(exc.token_value or ""), detail)
            return None
        except jmespath_errors.JMESPathError as exc:     # e.g. an arity error found while compiling
            self.problems.append(error("E0322", literal.span, where=where, detail=str(exc).splitlines()[0],
                                       hint=_JMESPATH_HINT))
            return None
        return text

    def _bad_expression(self, literal: ast.Str, where: str, position: int | None, token: str, detail: str) -> None:
        raw = self.source.text[literal.span.start:literal.span.end]
        span = literal.span
        if position is not None and raw[1:-1] == literal.value:    # no escapes: offsets line up
            start = literal.span.start + 1 + min(position, len(literal.value))
            span = Span(start, min(start + max(len(token), 1), literal.span.end))
        self.problems.append(error("E0322", span, where=where, detail=detail, hint=_JMESPATH_HINT))

    def call_options(self, clause: ast.Opt | None, kind: str = "HTTP") -> tuple[str | None, bool]:
        """OPTIONS (ca_file = '...', verify = 'true'|'false') of a call that speaks HTTP (`kind`:
        HTTP, MODEL, EMBEDDING)."""
        if clause is None:
            return None, True
        ca_file, verify = None, True
        for key, value in clause.args:
            name = key.value.lower()
            text = value.value if isinstance(value, (ast.Str, ast.Word)) else getattr(value, "text", "")
            if name not in CALL_OPTIONS:
                self.problems.append(error("E0305", key.span, kind="call option", name=key.value,
                                           hint=did_you_mean(key.value, CALL_OPTIONS)
                                           or f"a {kind} call takes ca_file = 'ca.pem' and verify = 'false'"))
            elif name == "ca_file":
                if not isinstance(value, ast.Str) or not value.value:
                    self.problems.append(error("E0325", value.span, clause="ca_file",
                                               what="a file name: ca_file = 'certs/ca.pem'"))
                else:
                    ca_file = value.value
            elif str(text).lower() in ("true", "false"):
                verify = str(text).lower() == "true"
            else:
                self.problems.append(error("E0302", value.span, option="verify", rule="'true' or 'false'",
                                           text=text))
        if ca_file and not verify:
            self.problems.append(error("E0304", clause.span, first="verify = 'false'",
                                       second="ca_file (a CA is only read to verify)",
                                       hint="keep one of them"))
        return ca_file, verify


_JMESPATH_HINT = "ANSWER and PATH take JMESPath, e.g. 'data.customer', 'items[0]', 'scores.risk' (jmespath.org)"
