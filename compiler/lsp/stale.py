"""Answering from the last checked version while a newer one is being checked: hover and
completion must not wait for the check of a large file that typing keeps superseding. The edit
between the two texts is found as the part that differs (common prefix and suffix), and offsets
are carried across it: before the edit they are the same, after it they move by its length, and
inside it there is no offset of the older text."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Edit:
    """old[start:old_end] became new[start:new_end]; the rest is the same text."""

    start: int
    old_end: int
    new_end: int

    def to_old(self, offset: int) -> int | None:
        """The offset of the older text at `offset` of the newer (None: inside what changed)."""
        if offset <= self.start:
            return offset
        if offset >= self.new_end:
            return offset - self.new_end + self.old_end
        return None

    def to_new(self, offset: int) -> int | None:
        """The offset of the newer text at `offset` of the older (None: inside what changed)."""
        if offset <= self.start:
            return offset
        if offset >= self.old_end:
            return offset - self.old_end + self.new_end
        return None


def edit_between(old: str, new: str) -> Edit:
    """The one edit that turns `old` into `new` (the span between their common prefix and suffix;
    a few comparisons of slices, so a large file costs milliseconds)."""
    prefix = _common(lambda k: old[:k] == new[:k], min(len(old), len(new)))
    room = min(len(old), len(new)) - prefix
    suffix = _common(lambda k: old[len(old) - k:] == new[len(new) - k:], room)
    return Edit(prefix, len(old) - suffix, len(new) - suffix)


def _common(same, limit: int) -> int:
    """The largest k <= limit with same(k) (same is monotone: true up to some k)."""
    low, high = 0, limit
    while low < high:
        middle = (low + high + 1) // 2
        if same(middle):
            low = middle
        else:
            high = middle - 1
    return low
