"""OrderedQueue / UnorderedQueue: emission order, watermark segments, capacity, no drops."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dslc.runtime.async_queue import (
    ElementEntry,
    OrderedQueue,
    QueueFull,
    UnorderedQueue,
    WatermarkEntry,
)
from dslc.runtime.operator import Watermark


def labels(entries: list) -> list:
    return [e.payload if isinstance(e, ElementEntry) else ("wm", e.watermark.timestamp) for e in entries]


def test_ordered_only_head_leaves() -> None:
    q = OrderedQueue(3)
    a, b, c = (q.put_element(x) for x in "abc")
    q.complete(b, 1)
    q.complete(c, 1)
    assert q.pop_ready() == [] and not q.has_ready()
    q.complete(a, 1)
    assert labels(q.pop_ready()) == ["a", "b", "c"]
    assert q.element_count() == 0 and len(q) == 0


def test_ordered_watermark_keeps_its_place() -> None:
    q = OrderedQueue(5)
    a = q.put_element("a")
    q.put_watermark(Watermark(1.0))
    b = q.put_element("b")
    q.complete(b, 1)
    assert q.pop_ready() == []
    q.complete(a, 1)
    assert labels(q.pop_ready()) == ["a", ("wm", 1.0), "b"]


def test_watermark_on_empty_queue_leaves_at_once() -> None:
    for q in (OrderedQueue(1), UnorderedQueue(1)):
        q.put_watermark(Watermark(5.0))
        assert labels(q.pop_ready()) == [("wm", 5.0)]


def test_unordered_completion_order_within_segment() -> None:
    q = UnorderedQueue(4)
    a, b, c = (q.put_element(x) for x in "abc")
    q.complete(c, 1)
    assert labels(q.pop_ready()) == ["c"]
    q.complete(a, 1)
    q.complete(b, 1)
    assert labels(q.pop_ready()) == ["a", "b"]


def test_unordered_never_crosses_a_watermark() -> None:
    q = UnorderedQueue(4)
    a = q.put_element("a")
    q.put_watermark(Watermark(1.0))
    b = q.put_element("b")
    q.put_watermark(Watermark(2.0))
    c = q.put_element("c")
    q.complete(c, 1)
    q.complete(b, 1)
    assert q.pop_ready() == []
    assert q.element_count() == 3  # completed but held: still counts against capacity
    q.complete(a, 1)
    assert labels(q.pop_ready()) == ["a", ("wm", 1.0), "b", ("wm", 2.0), "c"]


def test_capacity_counts_elements_not_watermarks() -> None:
    q = UnorderedQueue(2)
    a = q.put_element("a")
    q.put_watermark(Watermark(1.0))
    q.put_element("b")
    assert not q.has_capacity()
    with pytest.raises(QueueFull):
        q.put_element("c")
    q.complete(a, 1)
    assert q.has_capacity() is False  # completed, not yet left
    q.pop_ready()
    assert q.has_capacity()


def test_double_completion_is_refused() -> None:
    q = OrderedQueue(1)
    a = q.put_element("a")
    q.complete(a, 1)
    with pytest.raises(ValueError):
        q.complete(a, 2)


def test_incomplete_lists_pending_elements() -> None:
    for q in (OrderedQueue(3), UnorderedQueue(3)):
        a = q.put_element("a")
        q.put_watermark(Watermark(1.0))
        b = q.put_element("b")
        q.complete(a, 1)
        assert q.incomplete() == [b]


# --------------------------------------------------------------------------- property

ops = st.lists(
    st.one_of(
        st.tuples(st.just("put"), st.integers(0, 0)),
        st.tuples(st.just("wm"), st.integers(0, 0)),
        st.tuples(st.just("complete"), st.integers(0, 1000)),
        st.tuples(st.just("pop"), st.integers(0, 0)),
    ),
    max_size=80,
)


@settings(max_examples=200, deadline=None)
@given(ordered=st.booleans(), capacity=st.integers(1, 6), script=ops)
def test_queue_against_reference_model(ordered: bool, capacity: int, script: list) -> None:
    """Random put/watermark/complete/pop sequences: order rules, capacity, no drops."""
    q = OrderedQueue(capacity) if ordered else UnorderedQueue(capacity)
    arrivals: list = []          # everything put, in arrival order
    pending: list[ElementEntry] = []
    completed_at: dict[int, int] = {}
    emitted: list = []
    n = 0
    clock = 0

    def pop() -> None:
        for e in q.pop_ready():
            emitted.append(e.payload if isinstance(e, ElementEntry) else ("wm", e.watermark.timestamp))

    for op, arg in [*script, ("drain", 0)]:
        if op == "put":
            if q.has_capacity():
                pending.append(q.put_element(n))
                arrivals.append(n)
                n += 1
            else:
                with pytest.raises(QueueFull):
                    q.put_element(-1)
        elif op == "wm":
            q.put_watermark(Watermark(float(len(arrivals))))
            arrivals.append(("wm", float(len(arrivals))))
        elif op == "complete" and pending:
            entry = pending.pop(arg % len(pending))
            clock += 1
            completed_at[entry.payload] = clock
            q.complete(entry, None)
        elif op == "pop":
            pop()
        elif op == "drain":
            for entry in pending:
                clock += 1
                completed_at[entry.payload] = clock
                q.complete(entry, None)
            pending.clear()
            pop()
        assert q.element_count() <= capacity
        assert q.element_count() == sum(1 for a in arrivals if not isinstance(a, tuple)) - sum(
            1 for e in emitted if not isinstance(e, tuple))

    # nothing dropped, nothing duplicated
    assert sorted(map(repr, emitted)) == sorted(map(repr, arrivals))
    assert len(q) == 0
    if ordered:
        assert emitted == arrivals
        return
    # unordered: watermarks in order, every element in the segment it arrived in
    def segments(seq: list) -> list:
        out: list = [[]]
        for x in seq:
            if isinstance(x, tuple):
                out.append(x)
                out.append([])
            else:
                out[-1].append(x)
        return out

    got, want = segments(emitted), segments(arrivals)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        if isinstance(w, tuple):
            assert g == w
        else:
            assert sorted(g) == sorted(w)
            # within a segment, elements leave in completion order
            times = [completed_at[x] for x in g]
            assert times == sorted(times)


def test_entries_repr() -> None:
    q = OrderedQueue(1)
    assert "seq=1" in repr(q.put_element("x"))
    assert "1.0" in repr(WatermarkEntry(Watermark(1.0)))
