"""A tiny code emitter (pegen's): lines, indentation, and safe Python literals."""
from __future__ import annotations

from contextlib import contextmanager
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
