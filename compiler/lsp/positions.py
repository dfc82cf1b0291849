"""Character offsets (what dslc's spans hold) ↔ LSP positions (line, character in the client's
units: UTF-16 code units unless the client chose UTF-8 or UTF-32). Lines end at \\n, \\r\\n or \\r,
as the protocol says; one index per document version, so a big file costs one pass."""
from __future__ import annotations

import bisect
import re

from lsprotocol import types

_LINE_END = re.compile(r"\r\n|\n|\r")


class LineIndex:
    """Line starts of one text, and conversions in the client's position encoding."""

    def __init__(self, text: str, encoding: str = types.PositionEncodingKind.Utf16):
        self.text = text
        self.encoding = str(encoding)
        self.starts = [0] + [m.end() for m in _LINE_END.finditer(text)]

    def _line_end(self, line: int) -> int:
        """Offset of the end of a line's content (before its line break)."""
        if line + 1 < len(self.starts):
            end = self.starts[line + 1]
            return end - 2 if self.text.startswith("\r\n", end - 2) else end - 1
        return len(self.text)

    def line_text(self, line: int) -> str:
        """A 0-based line's text without its line break."""
        return self.text[self.starts[line]:self._line_end(line)]

    def _units(self, chars: str) -> int:
        if self.encoding == types.PositionEncodingKind.Utf32 or chars.isascii():
            return len(chars)
        if self.encoding == types.PositionEncodingKind.Utf8:
            return len(chars.encode("utf-8", errors="surrogatepass"))
        return len(chars.encode("utf-16-le", errors="surrogatepass")) // 2

    def position(self, offset: int) -> types.Position:
        """The LSP position of a character offset (clamped to the text)."""
        offset = max(0, min(offset, len(self.text)))
        line = bisect.bisect_right(self.starts, offset) - 1
        start = self.starts[line]
        return types.Position(line, self._units(self.text[start:min(offset, self._line_end(line))]))

    def range(self, start: int, end: int) -> types.Range:
        return types.Range(self.position(start), self.position(end))

    def offset(self, position: types.Position) -> int:
        """The character offset of an LSP position (past the end of a line: the line's end)."""
        if position.line >= len(self.starts):
            return len(self.text)
        start = self.starts[position.line]
        line = self.text[start:self._line_end(position.line)]
        if line.isascii() or self.encoding == types.PositionEncodingKind.Utf32:
            return start + min(position.character, len(line))
        units = 0
        for index, char in enumerate(line):
            if units >= position.character:
                return start + index
            units += self._units(char)
        return start + len(line)
