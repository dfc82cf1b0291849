"""Broadcast state: named maps written by the BROADCAST side, read-only on the data side (Flink's BroadcastState).

The read-write side (changelog rows or a `USING PYTHON` function) mutates a `BroadcastState`; the
data side (PROCESS, MATCH) gets `ReadOnlyView`s whose every mutation raises `BroadcastStateError`.
Immutable, versioned `Snapshot`s with a deterministic JSON encoding ship the state to executors
and into streaming checkpoints (`SnapshotStore`).
"""
from __future__ import annotations

import base64
import datetime as dt
import json
import os
import re
import tempfile
from collections.abc import (
    Callable,
    Iterable,
    Iterator,
    Mapping,
    MutableMapping,
    Sequence,
)
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any, NoReturn

Row = dict[str, Any]


class BroadcastStateError(RuntimeError):
    """Misuse of a broadcast state: a write on the data side, a null key, an unknown state."""


def _read_only(name: str) -> NoReturn:
    raise BroadcastStateError(
        f"broadcast state '{name}' is read-only on the data side; update it from its BROADCAST source"
    )


# -- read-only views -----------------------------------------------------------------------------


def _freeze(name: str, value: Any) -> Any:
    """Wrap nested dicts and lists so that mutating them raises too (lazily, on access)."""
    if isinstance(value, dict):
        return FrozenDict(name, value)
    if isinstance(value, list):
        return FrozenList(name, value)
    return value


class _KeysOf:
    """Iteration, size and membership of the dict a view reads (`_data`): its keys as they are,
    for the read-only views and the read-write one alike."""

    __slots__ = ()

    def __iter__(self) -> Iterator[Any]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: object) -> bool:
        return key in self._data


class _Refuses:
    """The data side's mutators: each raises BroadcastStateError naming the state (`_name`)."""

    __slots__ = ()

    def _refuse(self, *args: Any, **kwargs: Any) -> NoReturn:
        _read_only(self._name)


class _ReadOnlyMapping(_KeysOf, _Refuses, Mapping[Any, Any]):
    """Mapping over a live dict: values frozen on access, every mutator raises."""

    __slots__ = ("_name", "_data")

    def __init__(self, name: str, data: dict[Any, Any]) -> None:
        self._name = name
        self._data = data

    def __getitem__(self, key: Any) -> Any:
        return _freeze(self._name, self._data[key])

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._name!r}, {self._data!r})"

    __setitem__ = __delitem__ = pop = popitem = clear = update = setdefault = __ior__ = _Refuses._refuse

    def __setattr__(self, attr: str, value: Any) -> None:
        if attr in _ReadOnlyMapping.__slots__ and not hasattr(self, attr):
            object.__setattr__(self, attr, value)
        else:
            _read_only(self._name)

    def copy(self) -> dict[Any, Any]:
        """A private, mutable deep copy (changing it does not change the state)."""
        return thaw(self)


class ReadOnlyView(_ReadOnlyMapping):
    """The data side's view of one named state: live, read-only."""

    __slots__ = ()

    @property
    def name(self) -> str:
        return self._name


class FrozenDict(_ReadOnlyMapping):
    """A state value (a row or a nested dict) as seen from the data side."""

    __slots__ = ()


class FrozenList(_Refuses, Sequence[Any]):
    """A nested list inside a state value as seen from the data side."""

    __slots__ = ("_name", "_data")

    def __init__(self, name: str, data: list[Any]) -> None:
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_data", data)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return FrozenList(self._name, self._data[index])
        return _freeze(self._name, self._data[index])

    def __len__(self) -> int:
        return len(self._data)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (FrozenList, list, tuple)):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"FrozenList({self._data!r})"

    __setattr__ = __setitem__ = __delitem__ = __iadd__ = _Refuses._refuse
    append = extend = insert = remove = pop = clear = sort = reverse = _Refuses._refuse

    def copy(self) -> list[Any]:
        """A private, mutable deep copy."""
        return thaw(self)


def thaw(value: Any) -> Any:
    """A mutable deep copy of a (possibly frozen) value: plain dicts and lists."""
    if isinstance(value, (_ReadOnlyMapping, dict)):
        data = value._data if isinstance(value, _ReadOnlyMapping) else value
        return {k: thaw(v) for k, v in data.items()}
    if isinstance(value, (FrozenList, list)):
        data = value._data if isinstance(value, FrozenList) else value
        return [thaw(v) for v in data]
    return value


# -- the read-write side -------------------------------------------------------------------------


class ReadWriteView(_KeysOf, MutableMapping[Any, Any]):
    """The BROADCAST side's view of one named state; every put/remove bumps the state's version."""

    def __init__(self, state: BroadcastState, name: str) -> None:
        self._state = state
        self.name = name
        self._data = state._maps[name]

    def __getitem__(self, key: Any) -> Any:
        return self._data[key]

    def __setitem__(self, key: Any, value: Any) -> None:
        if key is None:
            raise BroadcastStateError(f"broadcast state '{self.name}': a key cannot be null")
        self._data[key] = value
        self._state.version += 1

    def __delitem__(self, key: Any) -> None:
        del self._data[key]
        self._state.version += 1

    def put(self, key: Any, value: Any) -> None:
        """Flink's BroadcastState.put."""
        self[key] = value

    def remove(self, key: Any) -> None:
        """Flink's BroadcastState.remove: removing a missing key is not an error."""
        if key in self._data:
            del self[key]

    def __repr__(self) -> str:
        return f"ReadWriteView({self.name!r}, {self._data!r})"


class BroadcastState:
    """Named map states (Flink's MapStateDescriptor names) with a version bumped on every change."""

    def __init__(self, names: Iterable[str] = (), version: int = 0) -> None:
        self._maps: dict[str, dict[Any, Any]] = {name: {} for name in names}
        self.version = version

    def declare(self, name: str) -> None:
        """Register a state name (idempotent)."""
        self._maps.setdefault(name, {})

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._maps)

    def _map(self, name: str) -> dict[Any, Any]:
        try:
            return self._maps[name]
        except KeyError:
            known = ", ".join(repr(n) for n in self._maps) or "none"
            raise BroadcastStateError(f"unknown broadcast state '{name}' (declared: {known})") from None

    def read_write(self, name: str) -> ReadWriteView:
        """The BROADCAST side's view; declares the state if needed."""
        self.declare(name)
        return ReadWriteView(self, name)

    def read_only(self, name: str) -> ReadOnlyView:
        """The data side's live, read-only view."""
        return ReadOnlyView(name, self._map(name))

    def apply_changelog(self, name: str, rows: Iterable[Mapping[str, Any]], key: str, op: str | None = None) -> None:
        """Apply changelog rows in order: OP 'delete' (any case) removes KEY, anything else upserts.

        The stored value is the row without its OP column (the KEY column is kept).
        """
        view = self.read_write(name)
        for row in rows:
            if key not in row:
                raise BroadcastStateError(
                    f"broadcast state '{name}': KEY column '{key}' is missing from row {dict(row)!r}"
                )
            value = row[key]
            if value is None:
                raise BroadcastStateError(
                    f"broadcast state '{name}': KEY column '{key}' is null in row {dict(row)!r}"
                )
            action = row.get(op) if op is not None else None
            if isinstance(action, str) and action.strip().lower() == "delete":
                view.remove(value)
            else:
                view[value] = {column: v for column, v in row.items() if column != op}

    def apply_function(
        self, name: str, rows: Iterable[Mapping[str, Any]], fn: Callable[[Any, ReadWriteView], None]
    ) -> None:
        """BROADCAST ... USING PYTHON: call `fn(row, read_write_view)` for each row, in order."""
        view = self.read_write(name)
        for row in rows:
            try:
                fn(row, view)
            except Exception as exc:
                raise BroadcastStateError(
                    f"broadcast state '{name}': the BROADCAST function failed on row {dict(row)!r}: "
                    f"{type(exc).__name__}: {exc}"
                ) from exc

    def snapshot(self) -> Snapshot:
        """An immutable copy of every map at the current version."""
        return Snapshot(self.version, _encode_states(self._maps))

    @classmethod
    def restore(cls, snapshot: Snapshot) -> BroadcastState:
        """A new state equal to the one the snapshot was taken of."""
        state = cls(version=snapshot.version)
        state._maps = snapshot.entries()
        return state

    def to_dict(self) -> dict[str, dict[Any, Any]]:
        """A deep copy of every map (for tests and debugging)."""
        return {name: thaw(data) for name, data in self._maps.items()}


# -- snapshots -----------------------------------------------------------------------------------

_TAG = "__dslc__"


def _encode(value: Any) -> Any:
    """JSON-ready form; values JSON cannot hold become {"__dslc__": tag, "v": ...}."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, Decimal):
        return {_TAG: "decimal", "v": str(value)}
    if isinstance(value, dt.datetime):
        return {_TAG: "datetime", "v": value.isoformat()}
    if isinstance(value, dt.date):
        return {_TAG: "date", "v": value.isoformat()}
    if isinstance(value, dt.time):
        return {_TAG: "time", "v": value.isoformat()}
    if isinstance(value, (bytes, bytearray)):
        return {_TAG: "bytes", "v": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, (_ReadOnlyMapping, FrozenList)):
        return _encode(thaw(value))
    if isinstance(value, Mapping):
        if all(isinstance(k, str) for k in value) and _TAG not in value:
            return {k: _encode(v) for k, v in value.items()}
        return {_TAG: "map", "v": _pairs(value)}
    if isinstance(value, (list, tuple)):
        return [_encode(v) for v in value]
    raise BroadcastStateError(f"cannot snapshot a value of type {type(value).__name__}: {value!r}")


def _pairs(mapping: Mapping[Any, Any]) -> list[list[Any]]:
    """Entries as [key, value] pairs sorted by the key's canonical JSON (mixed key types sort too)."""
    pairs = [(_dumps(_encode(k)), [_encode(k), _encode(v)]) for k, v in mapping.items()]
    pairs.sort(key=lambda pair: pair[0])
    return [pair for _, pair in pairs]


def _decode(value: Any) -> Any:
    if isinstance(value, list):
        return [_decode(v) for v in value]
    if isinstance(value, dict):
        tag = value.get(_TAG)
        if tag is None:
            return {k: _decode(v) for k, v in value.items()}
        raw = value["v"]
        if tag == "decimal":
            return Decimal(raw)
        if tag == "datetime":
            return dt.datetime.fromisoformat(raw)
        if tag == "date":
            return dt.date.fromisoformat(raw)
        if tag == "time":
            return dt.time.fromisoformat(raw)
        if tag == "bytes":
            return base64.b64decode(raw)
        if tag == "map":
            return {_hashable(_decode(k)): _decode(v) for k, v in raw}
        raise BroadcastStateError(f"unknown tag {tag!r} in a broadcast snapshot")
    return value


def _hashable(key: Any) -> Any:
    """Tuples were stored as lists; a list key can only have been a tuple."""
    return tuple(_hashable(k) for k in key) if isinstance(key, list) else key


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=True)


def _encode_states(maps: Mapping[str, Mapping[Any, Any]]) -> str:
    return _dumps({name: _pairs(data) for name, data in maps.items()})


@dataclass(frozen=True, slots=True)
class Snapshot:
    """An immutable, versioned copy of a broadcast state; cheap to pickle and ship to executors."""

    version: int
    payload: str  # canonical JSON: {state name: [[key, value], ...]} sorted

    def entries(self) -> dict[str, dict[Any, Any]]:
        """A fresh, mutable decoding of every map."""
        raw = json.loads(self.payload)
        return {name: {_hashable(_decode(k)): _decode(v) for k, v in pairs} for name, pairs in raw.items()}

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(json.loads(self.payload))

    def view(self, name: str) -> ReadOnlyView:
        """A read-only view of one map of the snapshot."""
        maps = self.entries()
        if name not in maps:
            known = ", ".join(repr(n) for n in maps) or "none"
            raise BroadcastStateError(f"snapshot v{self.version} has no broadcast state '{name}' (has: {known})")
        return ReadOnlyView(name, maps[name])

    def to_bytes(self) -> bytes:
        """Deterministic JSON: equal states at equal versions give equal bytes."""
        return ('{"states":' + self.payload + ',"version":' + str(int(self.version)) + "}").encode("utf-8")

    @classmethod
    def from_bytes(cls, data: bytes) -> Snapshot:
        raw = json.loads(data.decode("utf-8"))
        return cls(int(raw["version"]), _dumps(raw["states"]))


class SnapshotStore:
    """Snapshots as `v<version>.json` files in a folder, written atomically (streaming checkpoints)."""

    _NAME = re.compile(r"^v(\d+)\.json$")

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder)

    def versions(self) -> list[int]:
        """Stored versions, ascending."""
        if not self.folder.is_dir():
            return []
        found = (self._NAME.match(p.name) for p in self.folder.iterdir())
        return sorted(int(m.group(1)) for m in found if m)

    def write(self, snapshot: Snapshot) -> Path:
        """Write tmp file, fsync, os.replace: readers never see a partial snapshot."""
        self.folder.mkdir(parents=True, exist_ok=True)
        target = self.folder / f"v{snapshot.version}.json"
        fd, tmp = tempfile.mkstemp(prefix=f".v{snapshot.version}.", suffix=".tmp", dir=self.folder)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(snapshot.to_bytes())
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return target

    def read(self, version: int) -> Snapshot:
        path = self.folder / f"v{version}.json"
        if not path.is_file():
            raise BroadcastStateError(f"no broadcast snapshot v{version} in {self.folder}")
        return Snapshot.from_bytes(path.read_bytes())

    def latest(self) -> Snapshot | None:
        """The highest stored version, or None when there is none."""
        versions = self.versions()
        return self.read(versions[-1]) if versions else None
