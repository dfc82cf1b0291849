"""A tiny code emitter (pegen's): lines, indentation, safe Python literals, and the runtime's
configuration objects written back as the constructor calls that rebuild them."""
from __future__ import annotations

import dataclasses
from contextlib import contextmanager
from enum import Enum
from typing import Iterable, Iterator


WIDTH = 100     # generated lines longer than this are broken (calls, method chains)


class Emitter:
    """Collects generated lines; `with indent():` nests them."""

    def __init__(self) -> None:
        self._lines: list[str] = []
        self._depth = 0

    def line(self, text: str = "") -> None:
        """One line at the current indentation (blank lines stay blank)."""
        self._lines.append(("    " * self._depth + text) if text else "")

    def lines(self, texts: list[str]) -> None:
        """Several lines at the current indentation."""
        for text in texts:
            self.line(text)

    def room(self) -> int:
        """Characters left on a line at the current indentation."""
        return WIDTH - 4 * self._depth

    def append(self, text: str) -> None:
        """Add `text` at the end of the last line (a comma after a multi-line value)."""
        self._lines[-1] += text

    def comment(self, text: str) -> None:
        """`# text`, with line breaks and other unprintable characters escaped so it stays one comment."""
        self.line("# " + printable(text))

    def docstring(self, text: str) -> None:
        """A docstring: triple-quoted when that is safe, else repr() (DSL names may hold quotes)."""
        safe = printable(text) == text and '"' not in text and "\\" not in text
        self.line(f'"""{text}"""' if safe else lit(text))

    def call(self, head: str, args: list[str], tail: str = "") -> None:
        """`head(arg, ...)tail` on one line when it fits in WIDTH characters, else one argument a
        line (each argument is already Python text)."""
        one = f"{head}({', '.join(args)}){tail}"
        if not args or len("    " * self._depth + one) <= WIDTH:
            self.line(one)
            return
        self.line(f"{head}(")
        with self.indent():
            for arg in args:
                self.line(f"{arg},")
        self.line(f"){tail}")

    def chain(self, head: str, calls: list[str]) -> None:
        """A method chain `head.call().call()`: one line when it fits in WIDTH characters, else
        in parentheses with one call a line, as Spark's own examples write readers and writers."""
        one = head + "".join(calls)
        if len("    " * self._depth + one) <= WIDTH:
            self.line(one)
            return
        assign, _, receiver = head.rpartition(" = ")
        self.line(f"{assign} = (" if assign else "(")
        with self.indent():
            self.line(receiver + calls[0] if receiver else calls[0])
            for call in calls[1:]:
                self.line(call)
        self.line(")")

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


def multiline(text: str) -> list[str]:
    """A long string as adjacent literals, one source line each (readable, still safe)."""
    parts = text.split("\n")
    return [repr(p + ("\n" if i < len(parts) - 1 else "")) for i, p in enumerate(parts)]


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
    when it fits in `width` characters, else one field (or item) a line."""
    one = _inline(value, prefix)
    parts = _parts(value, prefix)
    if len(one) <= width or parts is None:
        return [one]
    head, items, close = parts
    lines = [head]
    for label, item in items:
        sub = construct(item, width - 5 - len(label), prefix)     # 4 of indentation, 1 for the comma
        lines.append("    " + label + sub[0])
        lines += ["    " + line for line in sub[1:]]
        lines[-1] += ","
    return lines + [close]


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
