"""A tiny code emitter (pegen's): lines, indentation, safe Python literals, and the runtime's
configuration objects written back as the constructor calls that rebuild them."""
from __future__ import annotations

import ast
import dataclasses
import io
import re
import textwrap
import tokenize
from contextlib import contextmanager
from enum import Enum
from typing import Iterable, Iterator

WIDTH = 100     # generated lines longer than this are broken (calls, chains, literals, comments)


class Emitter:
    """Collects generated lines; `with indent():` nests them. The one place generated lines are
    broken: calls, chains, string literals and the runtime's configuration values (`value`)."""

    def __init__(self, width: int = WIDTH) -> None:
        self._lines: list[str] = []
        self._depth = 0
        self.width = width

    def line(self, text: str = "") -> None:
        """One line at the current indentation (blank lines stay blank); a line too long for
        WIDTH because of a string literal has that literal broken over the following lines."""
        if len(text) > self.room() and self._break_literal(text):
            return
        self._lines.append(("    " * self._depth + text) if text else "")

    def _break_literal(self, text: str) -> bool:
        """Write `text` with its longest string literal as adjacent literals, one line each (in
        parentheses unless a bracket is open there); False when no literal is to blame."""
        tokens: list[tokenize.TokenInfo] = []
        try:
            for token in tokenize.generate_tokens(io.StringIO(text).readline):
                tokens.append(token)
        except (tokenize.TokenError, SyntaxError):
            pass                # an unclosed bracket (`f(`): the tokens up to there will do
        strings = [t for t in tokens if t.type == tokenize.STRING and t.start[0] == t.end[0] == 1
                   and t.string[:1] in "'\""]       # no prefix: not an f-string or bytes
        if not strings:
            return False
        token = max(strings, key=lambda t: len(t.string))
        before, after = text[:token.start[1]].rstrip(), text[token.end[1]:]
        if len(before) + len(after) + 2 > self.room():
            return False        # the line is long without the literal too
        depth = 0
        for t in tokens:
            if t.type == tokenize.OP and t.end[1] <= token.start[1]:
                depth += (t.string in "([{") - (t.string in ")]}")
        bracket = depth <= 0    # a statement (`x = '...'`): parentheses make the pieces one value
        opening = (f"{before} (" if before else "(") if bracket else before
        self._lines.append("    " * self._depth + opening)
        with self.indent():
            for piece in wrapped(ast.literal_eval(token.string), self.room()):
                self._lines.append("    " * self._depth + piece)
        self._lines.append("    " * self._depth + (")" + after if bracket else after.lstrip()))
        return True

    def lines(self, texts: list[str]) -> None:
        """Several lines at the current indentation."""
        for text in texts:
            self.line(text)

    def room(self) -> int:
        """Characters left on a line at the current indentation."""
        return self.width - 4 * self._depth

    def append(self, text: str) -> None:
        """Add `text` at the end of the last line (a comma after a multi-line value)."""
        self._lines[-1] += text

    def comment(self, text: str) -> None:
        """`# text`, with line breaks and other unprintable characters escaped so it stays one
        comment, wrapped at word boundaries into several `#` lines when it is too long."""
        for part in textwrap.wrap(printable(text), self.room() - 2, break_long_words=False,
                                  break_on_hyphens=False) or [""]:
            self.line("# " + part)

    def keyword(self, label: str, value: str) -> None:
        """`label=value,` as one argument line of a broken call; a long string `value` as
        adjacent literals in parentheses, one line each."""
        one = f"{label}={lit(value)},"
        if len(one) <= self.room():
            self.line(one)
            return
        self.line(f"{label}=(")
        with self.indent():
            self.lines(wrapped(value, self.room()))
        self.line("),")

    def docstring(self, text: str) -> None:
        """A docstring: triple-quoted when that is safe, else repr() (DSL names may hold quotes)."""
        safe = printable(text) == text and '"' not in text and "\\" not in text
        self.line(f'"""{text}"""' if safe else lit(text))

    def call(self, head: str, args: list[str], tail: str = "") -> None:
        """`head(arg, ...)tail` on one line when it fits in WIDTH characters, else one argument a
        line (each argument is already Python text)."""
        one = f"{head}({', '.join(args)}){tail}"
        if not args or len(one) <= self.room():
            self.line(one)
            return
        self.line(f"{head}(")
        with self.indent():
            for arg in args:
                self.line(f"{arg},")
        self.line(f"){tail}")

    def chain(self, head: str, calls: list[str | StringCall]) -> None:
        """A method chain `head.call().call()`: one line when it fits in WIDTH characters, else
        in parentheses with one call a line, as Spark's own examples write readers and writers
        (a call of one long string argument broken into adjacent literals)."""
        one = head + "".join(map(str, calls))
        if len(one) <= self.room():
            self.line(one)
            return
        assign, _, receiver = head.rpartition(" = ")
        self.line(f"{assign} = (" if assign else "(")
        with self.indent():
            for index, call in enumerate(calls):
                self._chained(receiver if index == 0 else "", call)
        self.line(")")

    def _chained(self, receiver: str, call: str | StringCall) -> None:
        """One call of a broken chain: on its line, or its long string argument broken."""
        if not isinstance(call, StringCall) or len(receiver + str(call)) <= self.room():
            self.line(receiver + str(call))
            return
        self.line(f"{receiver}{call.head}(")
        with self.indent():
            if call.before:
                self.line(call.before)
            self.lines(wrapped(call.value, self.room()))
        self.line(")")

    def value(self, value: object, label: str = "", tail: str = "", prefix: str = "C.") -> None:
        """`label` then the source that rebuilds `value` (see `construct`), then `tail`: on one
        line when it fits, else one field (or item) a line, each the same way one level deeper,
        and a string too long for its line as adjacent literals in parentheses."""
        one = label + _inline(value, prefix) + tail
        parts = _parts(value, prefix)
        if len(one) <= self.room():
            self.line(one)
        elif parts is not None:
            head, items, close = parts
            self.line(label + head)
            with self.indent():
                for item_label, item in items:
                    self.value(item, item_label, ",", prefix)
            self.line(close + tail)
        elif isinstance(value, str) and not isinstance(value, Code):    # Code is source: its literals break
            self.line(f"{label}(")
            with self.indent():
                self.lines(wrapped(value, self.room()))
            self.line(")" + tail)
        else:
            self.line(one)

    @contextmanager
    def indent(self) -> Iterator[None]:
        """Nest the lines emitted inside the block one level deeper."""
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1

    def text(self) -> str:
        """The generated source, ending in one newline."""
        return "\n".join(self._lines).rstrip("\n") + "\n"


def lit(value: object) -> str:
    """A Python literal for a value from the DSL: repr() cannot be broken out of."""
    return repr(value)


def lit_dict(pairs: Iterable[tuple[object, object]]) -> str:
    """A dict literal of DSL key/value pairs, each through lit()."""
    return "{" + ", ".join(f"{lit(k)}: {lit(v)}" for k, v in pairs) + "}"


def printable(text: str) -> str:
    """`text` with each unprintable character (newline, carriage return, ...) as its escape."""
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


@dataclasses.dataclass(frozen=True)
class StringCall:
    """A method call of one string argument in a chain (`.schema('...')`), which the emitter may
    break into adjacent literals when the line would be too long."""

    head: str           # `.schema`, `.option`, ...
    value: str
    before: str = ""    # the arguments before the string, as Python text with their comma

    def __str__(self) -> str:
        return f"{self.head}({self.before and self.before + ' '}{lit(self.value)})"


def wrapped(text: str, width: int = WIDTH) -> list[str]:
    """`text` as adjacent string literals, one source line each: a piece per line of the text,
    a longer piece split after a comma (a column of a schema, an item of a select list), else
    after a space or a slash (a path), else anywhere. The literals join back into exactly `text` (user SQL and
    schemas run as written) and all use the same quote when they can."""
    quote = '"' if "'" in text and '"' not in text else "'"

    def literal(piece: str) -> str:
        written = lit(piece)
        if quote == '"' and written[0] == "'" and "'" not in piece:    # so no escape changes
            written = '"' + written[1:-1] + '"'
        return written

    def fits(piece: str) -> bool:
        return len(literal(piece)) <= width

    out: list[str] = []
    for line in text.splitlines(keepends=True) or [""]:
        piece = ""
        for chunk in re.findall(r"[^,]*,\s*|[^,]+", line):
            if fits(piece + chunk):
                piece += chunk
                continue
            if piece:
                out.append(literal(piece))
            piece = ""
            for word in re.findall(r"[^\s/]*[\s/]*", chunk):     # after a space or a /
                if piece and not fits(piece + word):
                    out.append(literal(piece))
                    piece = ""
                piece += word
                while not fits(piece) and len(piece) > 1:     # a word longer than a line
                    cut = max(n for n in range(1, min(len(piece), width)) if fits(piece[:n]) or n == 1)
                    out.append(literal(piece[:cut]))
                    piece = piece[cut:]
        if piece or not out:
            out.append(literal(piece))
    return out


def ident(name: str) -> str:
    """A Python variable name for a DSL relation, as close to the user's name as Python allows
    (DSL names may be back-quoted anything): `paid` stays `paid`, `raw-orders` is `raw_orders`."""
    safe = "".join(ch if (ch.isalnum() or ch == "_") and ("_" + ch).isidentifier() else "_" for ch in name)
    return safe if safe.isidentifier() else "_" + safe


class Code(str):
    """Python text to write as it is (a name of the job such as FOLDER), not as a literal."""


def construct(value: object, width: int = WIDTH, prefix: str = "C.") -> list[str]:
    """Source lines that rebuild `value`: a dataclass as a keyword constructor call (fields at
    their default left out), an enum as its member, tuples of those, else a literal; on one line
    when it fits in `width` characters, else broken as `Emitter.value` breaks it."""
    out = Emitter(width)
    out.value(value, prefix=prefix)
    return out.text().splitlines()


def _fields(value: object) -> list[tuple[str, object]]:
    """A dataclass's fields that differ from their defaults, in declaration order."""
    shown = []
    for f in dataclasses.fields(value):
        current = getattr(value, f.name)
        if f.default is not dataclasses.MISSING and current == f.default:
            continue
        if f.default_factory is not dataclasses.MISSING and current == f.default_factory():
            continue
        shown.append((f"{f.name}=", current))
    return shown


def _parts(value: object, prefix: str) -> tuple[str, list[tuple[str, object]], str] | None:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return f"{prefix}{type(value).__name__}(", _fields(value), ")"
    if isinstance(value, tuple) and value:
        return "(", [("", item) for item in value], ")"
    return None


def _inline(value: object, prefix: str) -> str:
    if isinstance(value, Code):
        return str(value)
    if isinstance(value, Enum):
        return f"{prefix}{type(value).__name__}.{value.name}"
    parts = _parts(value, prefix)
    if parts is None:
        return lit(value)
    head, items, close = parts
    inner = ", ".join(label + _inline(item, prefix) for label, item in items)
    if head == "(" and len(items) == 1:
        inner += ","      # a one-item tuple
    return head + inner + close
