"""SOURCE FROM PYTHON core: loading the user class, splits, reading, discovery and the split offset."""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dslc.runtime.config import PythonCall
from dslc.runtime.sources.python import (
    SourceError,
    SplitTracker,
    decode_split,
    discover_splits,
    encode_split,
    list_splits,
    load_source,
    read_split,
    splits_between,
)
from dslc.runtime.user_code import UserCodeError

USER_CODE = '''
class DeviceLogs:
    def __init__(self, options):
        self.options = options
        self.devices = int(options.get("devices", "2"))

    def splits(self):
        return [{"device": d, "part": 0} for d in range(self.devices)]

    def read(self, split):
        for i in range(int(self.options.get("rows", "3"))):
            yield {"device": split["device"], "part": split["part"], "seq": i}

    def discover(self, known):
        seen = {(s["device"], s["part"]) for s in known}
        parts = max((s["part"] for s in known), default=-1) + 1
        fresh = [{"device": d, "part": p} for p in range(parts + 1) for d in range(self.devices)]
        return [s for s in fresh if (s["device"], s["part"]) not in seen]


class Static:
    def __init__(self, options):
        self.options = options

    def splits(self):
        return [("a", 1), ("a", 1), {"z": 1, "a": 2}]

    def read(self, split):
        yield split


class BadSplits:
    def __init__(self, options):
        pass

    def splits(self):
        return [object()]


class BadRows:
    def __init__(self, options):
        pass

    def splits(self):
        return [1]

    def read(self, split):
        yield [1, 2]


def not_a_class(options):
    return None
'''


@pytest.fixture()
def search_path(tmp_path: Path) -> tuple[str, ...]:
    (tmp_path / "source_user_mod.py").write_text(textwrap.dedent(USER_CODE))
    return (str(tmp_path),)


def load(search_path, name: str, **options: str):
    return load_source(PythonCall(f"source_user_mod:{name}", search_path), options)


def test_batch_source_lists_and_reads_splits(search_path) -> None:
    source = load(search_path, "DeviceLogs", devices="2", rows="2")
    assert source.options == {"devices": "2", "rows": "2"}
    splits = list_splits(source)
    assert splits == [{"device": 0, "part": 0}, {"device": 1, "part": 0}]
    rows = [row for split in splits for row in read_split(source, split)]
    assert rows == [{"device": d, "part": 0, "seq": i} for d in range(2) for i in range(2)]


def test_each_load_is_a_fresh_instance(search_path) -> None:
    assert load(search_path, "DeviceLogs") is not load(search_path, "DeviceLogs")


def test_splits_are_normalised_and_deduplicated(search_path) -> None:
    assert list_splits(load(search_path, "Static")) == [["a", 1], {"a": 2, "z": 1}]


def test_streaming_discovery_hands_out_each_split_once(search_path) -> None:
    source = load(search_path, "DeviceLogs", devices="2")
    tracker = SplitTracker()
    first = tracker.assign(discover_splits(source, tracker.splits))
    assert first == [{"device": 0, "part": 0}, {"device": 1, "part": 0}]
    offset_1 = tracker.to_offset()
    second = tracker.assign(discover_splits(source, tracker.splits))
    assert second == [{"device": 0, "part": 1}, {"device": 1, "part": 1}]
    assert tracker.assign(first + second) == []           # never handed out twice
    offset_2 = json.loads(tracker.to_json())
    assert splits_between(None, offset_1) == first
    assert splits_between(offset_1, offset_2) == second
    restored = SplitTracker.from_offset(tracker.to_json())
    assert restored.splits == tracker.splits and len(restored) == 4
    assert {"part": 1, "device": 1} in restored


def test_discovery_falls_back_to_splits_minus_known(search_path) -> None:
    source = load(search_path, "Static")
    assert discover_splits(source, [["a", 1]]) == [{"a": 2, "z": 1}]


def test_errors_are_clear(search_path) -> None:
    with pytest.raises(SourceError, match="must name a class"):
        load(search_path, "not_a_class")
    with pytest.raises(UserCodeError, match="no attribute 'Nope'"):
        load(search_path, "Nope")
    with pytest.raises(UserCodeError, match="cannot import module"):
        load_source(PythonCall("no_such_source_module:X", search_path), {})
    with pytest.raises(SourceError, match="JSON-serialisable"):
        list_splits(load(search_path, "BadSplits"))
    with pytest.raises(SourceError, match="expected a dict"):
        list(read_split(load(search_path, "BadRows"), 1))


def test_split_encoding_is_canonical() -> None:
    assert encode_split({"b": [1, 2], "a": "x"}) == '{"a":"x","b":[1,2]}'
    assert decode_split(encode_split({"b": 1, "a": None})) == {"a": None, "b": 1}
    with pytest.raises(SourceError):
        encode_split(float("nan"))


json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False), st.text()),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=3), inner, max_size=3)),
    max_leaves=6,
)


@settings(max_examples=100, deadline=None)
@given(st.lists(json_values, max_size=8), st.lists(json_values, max_size=8))
def test_tracker_hands_out_every_split_exactly_once(first, second) -> None:
    tracker = SplitTracker()
    handed = tracker.assign(first) + SplitTracker.from_offset(tracker.to_json()).copy().assign([])
    handed += tracker.assign(second)
    encoded = [encode_split(s) for s in handed]
    assert len(encoded) == len(set(encoded))
    assert set(encoded) == {encode_split(s) for s in first + second}
    assert [encode_split(s) for s in tracker.splits] == encoded
