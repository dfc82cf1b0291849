"""Broadcast state: changelog semantics, read-only views, snapshots and the snapshot store."""
from __future__ import annotations

import datetime as dt
import pickle
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dslc.runtime.broadcast.state import (
    BroadcastState,
    BroadcastStateError,
    Snapshot,
    SnapshotStore,
    thaw,
)


def rules_state() -> BroadcastState:
    state = BroadcastState(["rules"])
    state.apply_changelog("rules", [
        {"rule_id": "r1", "op": "upsert", "country": "NL", "limits": {"max": 100, "tags": ["a", "b"]}},
        {"rule_id": "r2", "op": "insert", "country": "DE", "limits": {"max": 50, "tags": []}},
        {"rule_id": "r1", "op": "update", "country": "BE", "limits": {"max": 10, "tags": ["c"]}},
        {"rule_id": "r3", "op": "x", "country": "FR", "limits": None},
        {"rule_id": "r3", "op": "DELETE", "country": None, "limits": None},
        {"rule_id": "r9", "op": " Delete ", "country": None, "limits": None},   # deleting a missing key is fine
    ], key="rule_id", op="op")
    return state


def test_changelog_upserts_without_op_column_and_deletes_case_insensitively() -> None:
    state = rules_state()
    assert state.to_dict() == {"rules": {
        "r1": {"rule_id": "r1", "country": "BE", "limits": {"max": 10, "tags": ["c"]}},
        "r2": {"rule_id": "r2", "country": "DE", "limits": {"max": 50, "tags": []}},
    }}
    assert list(state.read_only("rules")) == ["r1", "r2"]


def test_null_or_missing_key_names_the_state() -> None:
    state = BroadcastState(["rules"])
    with pytest.raises(BroadcastStateError, match="broadcast state 'rules'.*'rule_id' is null"):
        state.apply_changelog("rules", [{"rule_id": None, "op": "upsert"}], key="rule_id", op="op")
    with pytest.raises(BroadcastStateError, match="broadcast state 'rules'.*'rule_id' is missing"):
        state.apply_changelog("rules", [{"id": 1}], key="rule_id", op="op")


def test_changelog_without_op_column_always_upserts() -> None:
    state = BroadcastState()
    state.apply_changelog("s", [{"k": 1, "v": "delete"}, {"k": 2, "v": "b"}], key="k")
    assert state.to_dict() == {"s": {1: {"k": 1, "v": "delete"}, 2: {"k": 2, "v": "b"}}}


READ_ONLY = "broadcast state 'rules' is read-only on the data side; update it from its BROADCAST source"


@pytest.mark.parametrize("mutate", [
    lambda v: v.__setitem__("r9", {}),
    lambda v: v.__delitem__("r1"),
    lambda v: v.pop("r1"),
    lambda v: v.popitem(),
    lambda v: v.clear(),
    lambda v: v.update({"r9": {}}),
    lambda v: v.setdefault("r9", {}),
    lambda v: v["r1"].__setitem__("country", "XX"),
    lambda v: v["r1"].update(country="XX"),
    lambda v: v["r1"]["limits"].__setitem__("max", 0),
    lambda v: v["r1"]["limits"]["tags"].append("z"),
    lambda v: v["r1"]["limits"]["tags"].__setitem__(0, "z"),
    lambda v: v["r1"]["limits"]["tags"].__delitem__(0),
    lambda v: v["r1"]["limits"]["tags"].__iadd__(["z"]),
    lambda v: v["r1"]["limits"]["tags"].extend(["z"]),
    lambda v: v["r1"]["limits"]["tags"].insert(0, "z"),
    lambda v: v["r1"]["limits"]["tags"].remove("c"),
    lambda v: v["r1"]["limits"]["tags"].pop(),
    lambda v: v["r1"]["limits"]["tags"].clear(),
    lambda v: v["r1"]["limits"]["tags"].sort(),
    lambda v: v["r1"]["limits"]["tags"].reverse(),
    lambda v: setattr(v["r1"]["limits"]["tags"], "_data", []),
    lambda v: v.__ior__({"r9": {}}),
    lambda v: next(iter(v.values())).pop("country"),
    lambda v: setattr(v, "_data", {}),
], ids=lambda _: "")
def test_read_only_view_rejects_every_mutation(mutate) -> None:
    state = rules_state()
    before = state.to_dict()
    view = state.read_only("rules")
    with pytest.raises(BroadcastStateError) as info:
        mutate(view)
    assert str(info.value) == READ_ONLY
    assert state.to_dict() == before


def test_read_only_view_reads_like_a_dict_and_is_live() -> None:
    state = rules_state()
    view = state.read_only("rules")
    assert view["r1"]["country"] == "BE"
    assert view["r1"] == {"rule_id": "r1", "country": "BE", "limits": {"max": 10, "tags": ["c"]}}
    assert view["r1"]["limits"]["tags"] == ["c"]
    assert "r2" in view and len(view) == 2 and view.get("nope") is None
    copy = view["r1"].copy()
    copy["country"] = "XX"   # a private copy may be changed freely
    assert view["r1"]["country"] == "BE"
    assert thaw(view) == state.to_dict()["rules"]
    state.read_write("rules").put("r4", {"rule_id": "r4"})
    assert "r4" in view        # the data side sees updates immediately, like Flink's heap state


def test_read_write_view_put_remove_bumps_version() -> None:
    state = BroadcastState()
    rw = state.read_write("rules")
    rw.put("a", 1)
    rw["b"] = 2
    rw.remove("a")
    rw.remove("missing")
    assert dict(rw) == {"b": 2}
    assert state.version == 3


def test_apply_function_gets_the_read_write_view() -> None:
    def apply(row, rules):
        if row["op"] == "clear":
            rules.clear()
        else:
            rules[row["id"]] = row["value"]

    state = BroadcastState()
    state.apply_function("rules", [{"op": "set", "id": "a", "value": 1}, {"op": "clear"},
                                   {"op": "set", "id": "b", "value": 2}], apply)
    assert state.to_dict() == {"rules": {"b": 2}}

    def broken(row, rules):
        raise ValueError("nope")

    with pytest.raises(BroadcastStateError, match="'rules'.*ValueError: nope"):
        state.apply_function("rules", [{"id": 1}], broken)


def test_unknown_state_is_a_clear_error() -> None:
    with pytest.raises(BroadcastStateError, match="unknown broadcast state 'nope'"):
        BroadcastState(["rules"]).read_only("nope")


def test_snapshot_is_immutable_versioned_and_restores() -> None:
    state = rules_state()
    snapshot = state.snapshot()
    state.read_write("rules").put("r5", {"rule_id": "r5"})
    assert "r5" not in snapshot.entries()["rules"]
    assert snapshot.version < state.version
    restored = BroadcastState.restore(snapshot)
    assert restored.version == snapshot.version
    assert restored.to_dict() == {"rules": {k: v for k, v in state.to_dict()["rules"].items() if k != "r5"}}
    assert pickle.loads(pickle.dumps(snapshot)) == snapshot
    with pytest.raises(AttributeError):
        snapshot.version = 9  # type: ignore[misc]


def test_snapshot_round_trips_tagged_values() -> None:
    value = {
        "ts": dt.datetime(2024, 1, 2, 3, 4, 5, 678901, tzinfo=dt.timezone.utc),
        "naive": dt.datetime(2024, 1, 2, 3, 4, 5),
        "day": dt.date(2024, 2, 29),
        "amount": Decimal("12.3400"),
        "raw": b"\x00\xff",
        "nested": {"__dslc__": "not a tag", 1: "int key"},
        "list": [1, 2.5, None, True, "x", [dt.date(2020, 1, 1)]],
    }
    state = BroadcastState()
    state.read_write("s").put(("tuple", 1), value)
    state.read_write("s").put(7, "int key")
    snapshot = state.snapshot()
    back = Snapshot.from_bytes(snapshot.to_bytes())
    assert back == snapshot
    assert back.entries() == {"s": {("tuple", 1): value, 7: "int key"}}
    assert back.to_bytes() == snapshot.to_bytes()


def test_snapshot_bytes_do_not_depend_on_insertion_order() -> None:
    a, b = BroadcastState(), BroadcastState()
    a.read_write("s").update({"x": {"p": 1, "q": 2}, "y": 3})
    b.read_write("s").update({"y": 3, "x": {"q": 2, "p": 1}})
    assert a.snapshot().to_bytes() == b.snapshot().to_bytes()


def test_unsupported_value_is_a_clear_error() -> None:
    state = BroadcastState()
    state.read_write("s").put("k", object())
    with pytest.raises(BroadcastStateError, match="cannot snapshot a value of type object"):
        state.snapshot()


def test_snapshot_store_writes_atomically_and_reads_latest(tmp_path: Path) -> None:
    store = SnapshotStore(tmp_path / "broadcast" / "rules")
    assert store.latest() is None and store.versions() == []
    state = rules_state()
    first = state.snapshot()
    store.write(first)
    state.read_write("rules").put("r7", {"rule_id": "r7"})
    second = state.snapshot()
    path = store.write(second)
    assert path.name == f"v{second.version}.json"
    assert store.versions() == [first.version, second.version]
    assert store.latest() == second
    assert store.read(first.version) == first
    assert sorted(p.name for p in path.parent.iterdir()) == sorted(f"v{v}.json" for v in store.versions())
    with pytest.raises(BroadcastStateError, match="no broadcast snapshot v999"):
        store.read(999)


# -- properties ------------------------------------------------------------------------------------

keys = st.one_of(st.text(max_size=3), st.integers(-3, 3))
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=5),
    st.decimals(allow_nan=False, allow_infinity=False, places=3),
    st.dates(), st.datetimes(timezones=st.one_of(st.none(), st.just(dt.timezone.utc))),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=3), inner, max_size=3)),
    max_leaves=8,
)
changes = st.lists(
    st.tuples(keys, st.sampled_from(["upsert", "delete", "DELETE", "Delete", "insert", None]), values),
    max_size=30,
)


@settings(max_examples=150, deadline=None)
@given(changes)
def test_changelog_matches_a_dict_model_and_snapshots_round_trip(log) -> None:
    rows = [{"id": key, "op": op, "value": value} for key, op, value in log]
    state = BroadcastState()
    state.apply_changelog("s", rows, key="id", op="op")
    model: dict = {}
    for row in rows:
        if isinstance(row["op"], str) and row["op"].lower() == "delete":
            model.pop(row["id"], None)
        else:
            model[row["id"]] = {"id": row["id"], "value": row["value"]}
    assert state.to_dict() == {"s": model}
    assert dict(state.read_only("s")) == model

    snapshot = state.snapshot()
    data = snapshot.to_bytes()
    back = Snapshot.from_bytes(data)
    assert back.to_bytes() == data
    assert back.entries() == {"s": model}
    assert BroadcastState.restore(back).snapshot().to_bytes() == data
