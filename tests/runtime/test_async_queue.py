"""OrderedQueue / UnorderedQueue: emission order, watermark segments, capacity, no drops."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dslc.runtime.core.async_queue import (
    ElementEntry,
    KeyOrderedQueue,
    OrderedQueue,
    QueueFull,
    UnorderedQueue,
    WatermarkEntry,
    make_queue,
)
from dslc.runtime.core.operator import Watermark


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
def test_queue_against_reference_model(ordered: bool, capacity: int, script: list) -> None:  # noqa: C901 - a reference model reads best as one loop
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


# --------------------------------------------------------------------------- key-ordered


def test_key_ordered_holds_only_the_slow_key() -> None:
    q = KeyOrderedQueue(4, key_of=lambda p: p[0])
    a1, b1, a2, b2 = (q.put_element(x) for x in ("a1", "b1", "a2", "b2"))
    q.complete(a2, 1)
    q.complete(b2, 1)
    assert q.pop_ready() == []                               # a2 waits for a1, b2 for b1
    q.complete(b1, 1)
    assert labels(q.pop_ready()) == ["b1", "b2"]             # key b overtakes key a
    q.complete(a1, 1)
    assert labels(q.pop_ready()) == ["a1", "a2"]
    assert q.element_count() == 0 and len(q) == 0


def test_key_ordered_never_crosses_a_watermark() -> None:
    q = KeyOrderedQueue(4, key_of=lambda p: p[0])
    a1 = q.put_element("a1")
    q.put_watermark(Watermark(1.0))
    b1 = q.put_element("b1")
    q.complete(b1, 1)
    assert q.pop_ready() == [] and not q.has_ready()
    q.complete(a1, 1)
    assert labels(q.pop_ready()) == ["a1", ("wm", 1.0), "b1"]


def test_make_queue_with_a_key_is_key_ordered() -> None:
    assert isinstance(make_queue(True, 2, key_of=str), KeyOrderedQueue)
    assert isinstance(make_queue(True, 2), OrderedQueue)


@settings(max_examples=300, deadline=None)
@given(keys=st.integers(1, 4), capacity=st.integers(1, 6), script=ops)
def test_key_ordered_queue_against_reference_model(keys: int, capacity: int, script: list) -> None:
    """Any completion order: per-key input order, segments kept, capacity, no loss or duplicate,
    and nothing held back that no earlier element of its key or segment holds."""
    q = KeyOrderedQueue(capacity, key_of=lambda n: n % keys)
    arrivals: list = []
    segment_of: dict[int, int] = {}
    pending: list[ElementEntry] = []
    done: set[int] = set()
    emitted: list = []
    n = 0

    def pop() -> None:
        for e in q.pop_ready():
            emitted.append(e.payload if isinstance(e, ElementEntry) else ("wm", e.watermark.timestamp))
        # liveness: a completed element still inside is blocked by an earlier element of its key
        # that has not left, or by an earlier watermark segment that has not drained
        left = {x for x in emitted if not isinstance(x, tuple)}
        passed = sum(1 for x in emitted if isinstance(x, tuple))
        for x in done - left:
            same_key_before = [y for y in arrivals if not isinstance(y, tuple) and y < x and y % keys == x % keys]
            assert any(y not in left for y in same_key_before) or segment_of[x] > passed, (x, emitted)

    for op, arg in [*script, ("drain", 0)]:
        if op == "put":
            if q.has_capacity():
                pending.append(q.put_element(n))
                segment_of[n] = sum(1 for a in arrivals if isinstance(a, tuple))
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
            done.add(entry.payload)
            q.complete(entry, None)
        elif op == "pop":
            pop()
        elif op == "drain":
            for entry in pending:
                done.add(entry.payload)
                q.complete(entry, None)
            pending.clear()
            pop()
        assert q.element_count() <= capacity

    assert sorted(map(repr, emitted)) == sorted(map(repr, arrivals))   # no loss, no duplicate
    assert len(q) == 0
    for k in range(keys):
        assert [x for x in emitted if not isinstance(x, tuple) and x % keys == k] == \
            [x for x in arrivals if not isinstance(x, tuple) and x % keys == k]
    # watermarks in order, every element between the watermarks it arrived between
    marks = [i for i, x in enumerate(emitted) if isinstance(x, tuple)]
    assert [emitted[i] for i in marks] == [x for x in arrivals if isinstance(x, tuple)]
    for i, x in enumerate(emitted):
        if not isinstance(x, tuple):
            assert sum(1 for m in marks if m < i) == segment_of[x]
