"""Source text and spans: where every AST node, plan node and error points in the file."""
from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True, slots=True)
class Span:
    """Half-open character range [start, end) in one source file."""

    start: int
    end: int

    def __post_init__(self) -> None:
        if not 0 <= self.start <= self.end:
            raise ValueError(f"bad span {self.start}..{self.end}")

    def sub(self, offset: int, length: int) -> "Span":
        """A span inside this one, `offset` characters in."""
        start = self.start + offset
        return Span(start, min(start + max(length, 0), max(self.end, start)))


@dataclass(frozen=True)
class SourceFile:
    """The text of a .flow file with a line index for span → line/column."""

    path: str
    text: str
    _line_starts: tuple[int, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        starts = [0]
        starts.extend(i + 1 for i, ch in enumerate(self.text) if ch == "\n")
        object.__setattr__(self, "_line_starts", tuple(starts))

    @classmethod
    def read(cls, path: str | Path) -> "SourceFile":
        """Read a file as UTF-8 (undecodable bytes are replaced, so errors can still point)."""
        data = Path(path).read_bytes()
        return cls(str(path), data.decode("utf-8", errors="replace"))

    def line_col(self, offset: int) -> tuple[int, int]:
        """1-based line and column of a character offset."""
        offset = max(0, min(offset, len(self.text)))
        index = bisect.bisect_right(self._line_starts, offset) - 1
        return index + 1, offset - self._line_starts[index] + 1

    def line_text(self, line: int) -> str:
        """The text of a 1-based line, without its newline."""
        start = self._line_starts[line - 1]
        end = self.text.find("\n", start)
        return self.text[start:] if end < 0 else self.text[start:end]

    @property
    def folder(self) -> Path:
        """The folder holding the file: user modules and relative paths are looked up there."""
        return Path(self.path).resolve().parent


@dataclass(frozen=True)
class TextSource(SourceFile):
    """Program text that is not a saved file's: the REPL's statements (shown as `<repl>` in
    errors) or an editor's document. User modules (`PYTHON 'module:fn'`) and relative paths
    resolve in `base`: the folder of `dslc repl FILE` or of the document, else the working
    directory or the workspace."""

    base: str = "."

    @property
    def folder(self) -> Path:  # type: ignore[override]
        return Path(self.base).resolve()
