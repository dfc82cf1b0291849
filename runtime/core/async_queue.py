"""Element queues of the async operator, so emission order is decided apart from I/O.

`OrderedQueue` and `UnorderedQueue` follow Flink's OrderedStreamElementQueue and
UnorderedStreamElementQueue: elements enter in arrival order and complete later (in any order);
`pop_ready()` returns the entries that may leave now, in emission order.

- ORDERED: only the head may leave, and only once it is complete; watermarks keep their place.
- UNORDERED: completed elements of the first watermark segment leave in completion order; a
  watermark leaves only after every element that arrived before it has left, so no element that
  arrived after watermark W ever leaves before an element that arrived before W.
- ORDERED BY (key-ordered, `KeyOrderedQueue`): as UNORDERED, except that an element is
  released only once every earlier element of its key has been released; keys never wait
  for each other, so one slow element holds back its own key only.

Capacity counts element entries (in flight + completed but not yet left); watermarks are free.
The queues are plain data structures, not thread-safe: the operator guards them with its lock.
No element is ever dropped: every element put in leaves through `pop_ready()` exactly once.
"""
from __future__ import annotations

from collections import deque
from collections.abc import Callable, Hashable
from typing import Any, Union

from dslc.runtime.core.operator import Watermark


class QueueFull(RuntimeError):
    """put_element() was called on a full queue (the caller must wait for capacity)."""


class ElementEntry:
    """An element waiting for its asynchronous answer."""

    __slots__ = ("payload", "value", "done", "seq", "_segment", "_key")

    def __init__(self, payload: Any, seq: int) -> None:
        self.payload = payload
        self.value: Any = None
        self.done = False
        self.seq = seq
        self._segment: _Segment | None = None
        self._key: Any = None

    def __repr__(self) -> str:
        return f"ElementEntry(seq={self.seq}, done={self.done})"


class WatermarkEntry:
    """A watermark holding its place in the queue; always complete."""

    __slots__ = ("watermark",)
    done = True

    def __init__(self, watermark: Watermark) -> None:
        self.watermark = watermark

    def __repr__(self) -> str:
        return f"WatermarkEntry({self.watermark.timestamp})"


Entry = Union[ElementEntry, WatermarkEntry]


class _BaseQueue:
    """Shared capacity bookkeeping."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("capacity must be >= 1")
        self.capacity = capacity
        self._elements = 0  # element entries in the queue
        self._seq = 0

    @property
    def entered(self) -> int:
        """Elements put in so far."""
        return self._seq

    def element_count(self) -> int:
        """Element entries in the queue (in flight or completed, not yet left)."""
        return self._elements

    def has_capacity(self) -> bool:
        """True when one more element may enter."""
        return self._elements < self.capacity

    def _new_element(self, payload: Any) -> ElementEntry:
        if self._elements >= self.capacity:
            raise QueueFull(f"queue full ({self._elements}/{self.capacity})")
        self._elements += 1
        self._seq += 1
        return ElementEntry(payload, self._seq)

    @staticmethod
    def _mark_done(entry: ElementEntry, value: Any) -> None:
        if entry.done:
            raise ValueError(f"{entry!r} completed twice")
        entry.value = value
        entry.done = True


class OrderedQueue(_BaseQueue):
    """Entries leave strictly in arrival order, each once it is complete."""

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity)
        self._entries: deque[Entry] = deque()

    def __len__(self) -> int:
        return len(self._entries)

    def is_empty(self) -> bool:
        """Nothing is in the queue: no element, no watermark."""
        return not self._entries

    def put_element(self, payload: Any) -> ElementEntry:
        """Append an element entry; raises QueueFull when no capacity is left."""
        entry = self._new_element(payload)
        self._entries.append(entry)
        return entry

    def put_watermark(self, watermark: Watermark) -> WatermarkEntry:
        """Append a watermark entry; it leaves once everything before it has left."""
        entry = WatermarkEntry(watermark)
        self._entries.append(entry)
        return entry

    def complete(self, entry: ElementEntry, value: Any) -> None:
        """Record the element's answer."""
        self._mark_done(entry, value)

    def has_ready(self) -> bool:
        """True when pop_ready() would return something."""
        return bool(self._entries) and self._entries[0].done

    def pop_ready(self) -> list[Entry]:
        """Remove and return the complete entries at the head, in order."""
        ready: list[Entry] = []
        entries = self._entries
        while entries and entries[0].done:
            entry = entries.popleft()
            if isinstance(entry, ElementEntry):
                self._elements -= 1
            ready.append(entry)
        return ready

    def incomplete(self) -> list[ElementEntry]:
        """Element entries still waiting for an answer."""
        return [e for e in self._entries if isinstance(e, ElementEntry) and not e.done]


class _Segment:
    """Elements between two watermarks, and the watermark that closes them (if any yet)."""

    __slots__ = ("pending", "completed", "closing")

    def __init__(self) -> None:
        self.pending: dict[ElementEntry, None] = {}   # insertion-ordered set
        self.completed: deque[ElementEntry] = deque()
        self.closing: WatermarkEntry | None = None


class UnorderedQueue(_BaseQueue):
    """Completed elements leave in completion order, never across a watermark."""

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity)
        self._segments: deque[_Segment] = deque([_Segment()])

    def __len__(self) -> int:
        return self._elements + sum(1 for s in self._segments if s.closing is not None)

    def is_empty(self) -> bool:
        """Nothing is in the queue: no element, no watermark (a watermark opens a segment)."""
        return not self._elements and len(self._segments) == 1

    def put_element(self, payload: Any) -> ElementEntry:
        """Add an element entry to the newest segment; raises QueueFull when full."""
        entry = self._new_element(payload)
        segment = self._segments[-1]
        entry._segment = segment
        segment.pending[entry] = None
        return entry

    def put_watermark(self, watermark: Watermark) -> WatermarkEntry:
        """Close the newest segment with this watermark and open a new one."""
        entry = WatermarkEntry(watermark)
        self._segments[-1].closing = entry
        self._segments.append(_Segment())
        return entry

    def complete(self, entry: ElementEntry, value: Any) -> None:
        """Record the element's answer; it becomes ready once its segment is the first."""
        self._mark_done(entry, value)
        segment = entry._segment
        assert segment is not None
        del segment.pending[entry]
        segment.completed.append(entry)

    def has_ready(self) -> bool:
        """True when pop_ready() would return something."""
        first = self._segments[0]
        return bool(first.completed) or (not first.pending and first.closing is not None)

    def pop_ready(self) -> list[Entry]:
        """Remove and return what may leave: first-segment completions, then passed watermarks."""
        ready: list[Entry] = []
        segments = self._segments
        while True:
            first = segments[0]
            while first.completed:
                entry = first.completed.popleft()
                entry._segment = None
                self._elements -= 1
                ready.append(entry)
            if first.pending or first.closing is None:
                return ready
            ready.append(first.closing)
            segments.popleft()

    def incomplete(self) -> list[ElementEntry]:
        """Element entries still waiting for an answer."""
        return [e for s in self._segments for e in s.pending]


class KeyOrderedQueue(UnorderedQueue):
    """Per key, elements leave in arrival order; other keys overtake; never across a watermark.

    Each key has a FIFO of its elements still in the queue. An element completing at the head of
    its key's FIFO is released (into its segment's completed list, as UNORDERED), and so is every
    already-completed element right behind it. `key_of(payload)` gives an element's key.
    """

    def __init__(self, capacity: int, key_of: Callable[[Any], Hashable]) -> None:
        super().__init__(capacity)
        self._key_of = key_of
        self._keys: dict[Hashable, deque[ElementEntry]] = {}

    def put_element(self, payload: Any) -> ElementEntry:
        """Add an element behind the earlier ones of its key; raises QueueFull when full."""
        entry = super().put_element(payload)
        key = entry._key = self._key_of(payload)
        fifo = self._keys.get(key)
        if fifo is None:
            self._keys[key] = deque((entry,))
        else:
            fifo.append(entry)
        return entry

    def complete(self, entry: ElementEntry, value: Any) -> None:
        """Record the answer; release it (and its key's completed followers) when it heads its key."""
        self._mark_done(entry, value)
        fifo = self._keys[entry._key]
        if fifo[0] is not entry:
            return                      # an earlier element of its key is still out
        while fifo and fifo[0].done:
            head = fifo.popleft()
            segment = head._segment
            assert segment is not None
            del segment.pending[head]
            segment.completed.append(head)
        if not fifo:
            del self._keys[entry._key]


def key_of_columns(columns: tuple[str, ...]) -> Callable[[Any], Hashable]:
    """The ORDERED BY key of a row; values that cannot be hashed (arrays, maps) by their repr."""
    def key(row: Any) -> Hashable:
        values = tuple(row.get(c) for c in columns)
        try:
            hash(values)
        except TypeError:
            return repr(values)
        return values
    return key


def make_queue(ordered: bool, capacity: int,
               key_of: Callable[[Any], Hashable] | None = None) -> OrderedQueue | UnorderedQueue:
    """The queue for an operator's mode (`key_of` given: key-ordered)."""
    if key_of is not None:
        return KeyOrderedQueue(capacity, key_of)
    return OrderedQueue(capacity) if ordered else UnorderedQueue(capacity)
