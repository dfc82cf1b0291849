"""Core of SOURCE ... FROM PYTHON 'module:Class': a user split enumerator and split reader (Flink's Source API).

The user class gets the SOURCE OPTIONS, lists splits (`splits()`), reads one split at a time
(`read(split)`), and in STREAMING mode may `discover(known)` new ones. Splits are JSON values,
encoded canonically; a `SplitTracker` hands each split out exactly once and is itself the
streaming offset.
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from dslc.runtime import user_code
from dslc.runtime.config import PythonCall

Split = Any  # any JSON-serialisable value


class SourceError(RuntimeError):
    """The user source class misbehaved: not a class, a bad split, a row that is not a dict."""


def load_source(call: PythonCall, options: Mapping[str, Any] | None = None) -> Any:
    """A new instance `Class(options)` of the user class (never cached: one per reader or planner)."""
    module_name, _, attr = call.ref.partition(":")
    module = user_code._import(module_name, call.search_path)
    cls = getattr(module, attr, None)
    if cls is None:
        raise user_code.UserCodeError(f"module '{module_name}' has no attribute '{attr}'")
    if not isinstance(cls, type):
        raise SourceError(f"SOURCE FROM PYTHON '{call.ref}' must name a class, got {type(cls).__name__}")
    return cls(dict(options or {}))


def encode_split(split: Split) -> str:
    """Canonical JSON of a split (sorted keys, no spaces), the same on driver and executors."""
    try:
        return json.dumps(split, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise SourceError(f"a split must be JSON-serialisable, got {split!r}: {exc}") from exc


def decode_split(text: str) -> Split:
    return json.loads(text)


def list_splits(source: Any) -> list[Split]:
    """Every split of a BATCH source, normalised, duplicates removed, order kept."""
    splits = getattr(source, "splits", None)
    if not callable(splits):
        raise SourceError(f"{type(source).__name__} has no splits() method")
    return _unique(splits())


def discover_splits(source: Any, known: Sequence[Split]) -> list[Split]:
    """New splits for a STREAMING source: `discover(known)`, or else `splits()` minus the known ones."""
    discover = getattr(source, "discover", None)
    found = discover(list(known)) if callable(discover) else list_splits(source)
    seen = {encode_split(split) for split in known}
    return [split for split in _unique(found) if encode_split(split) not in seen]


def read_split(source: Any, split: Split) -> Iterator[dict[str, Any]]:
    """The rows of one split; a row that is not a dict fails with the split named."""
    for row in source.read(split):
        if not isinstance(row, Mapping):
            raise SourceError(f"{type(source).__name__}.read({split!r}) produced a {type(row).__name__}, expected a dict")
        yield dict(row)


def _unique(splits: Iterable[Split] | None) -> list[Split]:
    result, seen = [], set()
    for split in splits or ():
        text = encode_split(split)
        if text not in seen:
            seen.add(text)
            result.append(decode_split(text))
    return result


class SplitTracker:
    """The splits handed out so far, in order; each split is handed out once. JSON-able: it is the offset."""

    def __init__(self, handed_out: Iterable[Split] = ()) -> None:
        self._order: list[str] = []
        self._seen: set[str] = set()
        for split in handed_out:
            self._add(encode_split(split))

    def _add(self, text: str) -> bool:
        if text in self._seen:
            return False
        self._seen.add(text)
        self._order.append(text)
        return True

    def assign(self, candidates: Iterable[Split]) -> list[Split]:
        """Record and return the candidates not handed out before (each once, in order)."""
        return [decode_split(text) for text in map(encode_split, candidates) if self._add(text)]

    def __contains__(self, split: object) -> bool:
        return encode_split(split) in self._seen

    def __len__(self) -> int:
        return len(self._order)

    @property
    def splits(self) -> list[Split]:
        """Every split handed out, in hand-out order."""
        return [decode_split(text) for text in self._order]

    def to_offset(self) -> dict[str, Any]:
        """The streaming offset: {"splits": [...]} in hand-out order."""
        return {"splits": self.splits}

    def to_json(self) -> str:
        return json.dumps(self.to_offset(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_offset(cls, offset: Mapping[str, Any] | str | None) -> SplitTracker:
        if offset is None:
            return cls()
        if isinstance(offset, str):
            offset = json.loads(offset)
        return cls(offset.get("splits", ()))

    def copy(self) -> SplitTracker:
        clone = SplitTracker()
        clone._order = list(self._order)
        clone._seen = set(self._seen)
        return clone


def splits_between(start: Mapping[str, Any] | str | None, end: Mapping[str, Any] | str) -> list[Split]:
    """The splits handed out after offset `start` up to offset `end` (one micro-batch's splits)."""
    before = SplitTracker.from_offset(start)
    after = SplitTracker.from_offset(end)
    return [split for split in after.splits if split not in before]
