"""Record and replay ENRICH calls: a wrapper around an operator's call function.

`dslc run FILE --record DIR` writes every call (operator, call key, request, answer or error,
latency) under DIR; `--replay DIR` answers calls from DIR without any network, and `dslc test`
answers a case's calls the same way. The wrapper sits between the async operator and the call
adapter (`calls.factory.build_call` passes every adapter through `wrap`), so retries,
timeouts, cache and the ON MISS / ON ERROR / ON TIMEOUT policies run exactly as in a live run.

Where it is switched on: a Spark local property (`dslc.record` / `dslc.replay`, set by the
in-process test runner for one job) or else an environment variable (`DSLC_RECORD` /
`DSLC_REPLAY`, set by `dslc run` for its workers). Each holds a JSON object:
`{"dir": ..., "unrecorded": "error"|"miss", "latency": bool}` (record: only "dir").

Layout of DIR: while a job runs, each worker process appends JSON lines to
`DIR/.parts/<pid>-<random>.jsonl`; `consolidate(DIR)` (run by `dslc run` at the end) merges them
into one `DIR/<operator>.yaml` per operator, calls sorted by call key, so two recordings diff
line by line. Replay reads both forms.

Secrets: headers are never written; a request is written as the method and the URL with its
user:password part removed and the value of every query parameter whose name looks like a
credential (key, token, secret, password, auth, signature, ...) replaced by `***`.
"""
from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import threading
import time
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

from dslc.runtime.calls.base import BadItem, CallError, EnrichCall, check_result_types
from dslc.runtime.calls.errors import ANSWER, error_class
from dslc.runtime.calls.url import UnfillableUrl, fill_url, placeholders
from dslc.runtime.config import EmbeddingCall, Enrich, HttpCall, ModelCall, SqlCall
from dslc.runtime.secrets import mask_url, scrub
from dslc.runtime.wrappers.delegating import DelegatingCall
from dslc.runtime.wrappers.stored import BudgetSpent

RECORD_PROPERTY, REPLAY_PROPERTY = "dslc.record", "dslc.replay"
RECORD_ENV, REPLAY_ENV = "DSLC_RECORD", "DSLC_REPLAY"
PARTS = ".parts"


class NotRecorded(BaseException):
    """A replayed call that the recording does not hold. A BaseException on purpose: it is not
    an answer of the service, so no ON ERROR policy may turn it into a dead letter or a NULL;
    the operator fails the task and names operator, DSL line and key."""


# --------------------------------------------------------------------------- settings


def _setting(prop: str, env: str) -> dict | None:
    raw = None
    try:
        from pyspark import (
            TaskContext,  # only on a Spark worker; the runtime works without Spark
        )

        context = TaskContext.get()
        if context is not None:
            raw = context.getLocalProperty(prop)
    except ImportError:
        pass
    raw = raw or os.environ.get(env)
    if not raw:
        return None
    value = json.loads(raw) if raw.lstrip().startswith("{") else {"dir": raw}
    return value


def setting_json(directory: str | os.PathLike, **extra: Any) -> str:
    """The value of a record/replay property or environment variable."""
    return json.dumps({"dir": str(Path(directory).resolve()), **extra}, sort_keys=True)


def wrap(call: EnrichCall, config: Enrich) -> EnrichCall:
    """The call itself, or a recording or replaying stand-in when the job asks for one."""
    replay = _setting(REPLAY_PROPERTY, REPLAY_ENV)
    if replay:
        return ReplayCall(call, config, replay)
    record = _setting(RECORD_PROPERTY, RECORD_ENV)
    if record:
        return RecordingCall(call, config, Path(record["dir"]))
    return call


# --------------------------------------------------------------------------- keys and values


def key_columns(config: Enrich) -> tuple[str, ...]:
    """The call key: the URL's placeholders for HTTP (else a POST's BODY columns), the filled
    prompt for MODEL (`prompt`, and `system` when it has placeholders) and the filled input for
    EMBEDDING (`input`), the operator's key columns for PYTHON or when the request names no column."""
    if isinstance(config.call, (ModelCall, EmbeddingCall)):
        return config.call.key_names
    if isinstance(config.call, HttpCall):
        found = tuple(placeholders(config.call.url)) or tuple(getattr(config.call, "body", None) or ())
        if found:
            return found
    return tuple(config.key_columns)


def plain(value: Any) -> Any:
    """A value as JSON/YAML writes it: timestamps as ISO text, decimals as text."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, (dt.date, dt.time, Decimal)):
        return str(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value


def canonical_key(key: dict[str, Any]) -> str:
    """One text per call key: values compared as text, so `7` in a test file matches '7'."""
    return json.dumps([[c, None if v is None else str(plain(v))] for c, v in key.items()], ensure_ascii=False)


#: A request line's URL as a recording shows it (the one masking of runtime/secrets.py).
redact_url = mask_url


def _request(config: Enrich, row: dict[str, Any]) -> str:
    if isinstance(config.call, ModelCall):
        return f"MODEL {config.call.model} POST {redact_url(config.call.base_url)}/chat/completions"
    if isinstance(config.call, EmbeddingCall):
        return f"EMBEDDING {config.call.model} POST {redact_url(config.call.base_url)}/embeddings"
    if isinstance(config.call, HttpCall):
        try:
            return f"{config.call.method} {redact_url(fill_url(config.call.url, row))}"
        except UnfillableUrl:
            return f"{config.call.method} {redact_url(config.call.url)}"
    if isinstance(config.call, SqlCall):       # the DATABASE's name and its URL, masked
        return f"SQL {config.call.database} {redact_url(config.call.url)}"
    return f"PYTHON {config.call.ref}"


class _Wrapper(DelegatingCall):
    """A recording's view of the adapter: its config and the call key of a row."""

    def __init__(self, inner: EnrichCall, config: Enrich) -> None:
        super().__init__(inner)
        self.config = config
        self.columns = key_columns(config)

    def key(self, row: dict[str, Any]) -> dict[str, Any]:
        call = self.config.call
        if isinstance(call, (ModelCall, EmbeddingCall)):     # the filled prompt or input
            return call.call_key(row)
        return {c: row.get(c) for c in self.columns}


# --------------------------------------------------------------------------- record


class RecordingCall(_Wrapper):
    """Calls the real service and appends one JSON line per call to this process's part file."""

    _lock = threading.Lock()

    def __init__(self, inner: EnrichCall, config: Enrich, directory: Path) -> None:
        super().__init__(inner, config)
        self.part = directory / PARTS / f"{os.getpid()}-{uuid.uuid4().hex[:12]}.jsonl"

    def _write(self, row: dict[str, Any], started: float, **outcome: Any) -> None:
        entry = {"operator": self.config.name, "line": self.config.line, "key": plain(self.key(row)),
                 "request": _request(self.config, row), **outcome,
                 "latency_ms": round((time.perf_counter() - started) * 1000, 3), "at": time.time()}
        # an error or an answer that echoes a secret or a URL's credentials: never written
        text = scrub(json.dumps(entry, ensure_ascii=False, default=str), self.config.secrets) + "\n"
        with self._lock:
            self.part.parent.mkdir(parents=True, exist_ok=True)
            with open(self.part, "a", encoding="utf-8") as handle:
                handle.write(text)

    async def __call__(self, row: dict[str, Any]) -> Any:
        started = time.perf_counter()
        try:
            result = await self.inner(row)
        except asyncio.CancelledError:
            self._write(row, started, timeout=True)
            raise
        except BudgetSpent:     # BUDGET n TOKENS: nothing was sent, nothing to record
            raise
        except Exception as exc:
            self._write_error(row, started, exc)
            raise
        self._write_result(row, started, result)
        return result

    def _write_error(self, row: dict[str, Any], started: float, exc: BaseException) -> None:
        raw = getattr(exc, "raw", None)      # a model's content that was the problem
        self._write(row, started, error=str(exc), error_type=type(exc).__name__, error_class=error_class(exc),
                    **({"raw": raw} if raw is not None else {}))

    def _write_result(self, row: dict[str, Any], started: float, result: Any) -> None:
        if isinstance(result, BaseException):   # a batch item the kind failed alone
            self._write_error(row, started, result)
        elif result is None or result == []:
            self._write(row, started, miss=True)
        else:
            self._write(row, started, answer=plain(result))

    async def call_batch(self, rows: list[dict[str, Any]]) -> list[Any]:
        """BATCH: one call for many rows, written as one entry per row (same latency)."""
        started = time.perf_counter()
        try:
            results = await self.inner.call_batch(rows)
        except asyncio.CancelledError:
            for row in rows:
                self._write(row, started, timeout=True)
            raise
        except BudgetSpent:
            raise
        except Exception as exc:
            for row in rows:
                self._write_error(row, started, exc)
            raise
        for row, result in zip(rows, results):
            if type(result) is BadItem:     # that row's error only
                self._write(row, started, error=result.message, error_type="CallError", error_class=ANSWER)
            else:
                self._write_result(row, started, result)
        return results


# --------------------------------------------------------------------------- files


def entries(directory: Path) -> list[dict[str, Any]]:
    """Every call of a recording folder: consolidated YAML files, then part files not merged yet."""
    import yaml

    found: list[dict[str, Any]] = []
    for path in sorted(directory.glob("*.yaml")):
        document = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        operator = document.get("operator", path.stem)
        for call in document.get("calls") or ():
            found.append({"operator": operator, **call})
    for path in sorted((directory / PARTS).glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                found.append(json.loads(line))
    return found


def consolidate(directory: str | os.PathLike) -> list[Path]:
    """Merge the part files into one `<operator>.yaml` per operator (calls sorted by key, then
    in the order they happened); remove the parts. Returns the files written."""
    import yaml

    root = Path(directory)
    calls = entries(root)
    by_operator: dict[str, list[dict[str, Any]]] = {}
    for call in calls:
        by_operator.setdefault(call["operator"], []).append(call)
    written = []
    for operator, items in sorted(by_operator.items()):
        items.sort(key=lambda c: (canonical_key(c.get("key") or {}), c.get("at", 0)))
        line = next((c.get("line") for c in items if c.get("line") is not None), None)
        document = {"operator": operator, "line": line,
                    "calls": [{k: v for k, v in c.items() if k not in ("operator", "line", "at")} for c in items]}
        path = root / f"{operator}.yaml"
        header = (f"# ENRICH {operator}: calls recorded by dslc (one entry per call, sorted by call key).\n"
                  "# Each has key, request, latency_ms and one of answer / miss / error / timeout.\n")
        path.write_text(header + yaml.safe_dump(document, sort_keys=False, allow_unicode=True, width=120),
                        encoding="utf-8")
        written.append(path)
    parts = root / PARTS
    if parts.is_dir():
        for part in parts.glob("*.jsonl"):
            part.unlink()
        parts.rmdir()
    return written


def write_answers(directory: str | os.PathLike, operator: str, calls: list[dict[str, Any]]) -> Path:
    """Write given answers (a test case's) in the recording layout."""
    import yaml

    path = Path(directory) / f"{operator}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"operator": operator, "calls": plain(calls)}, sort_keys=False,
                                   allow_unicode=True), encoding="utf-8")
    return path


# --------------------------------------------------------------------------- replay


_loaded: dict[str, dict[str, dict[str, list[dict[str, Any]]]]] = {}
_loaded_lock = threading.Lock()


def load(directory: str) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """{operator: {canonical key: [calls in order]}} of a recording, read once per process."""
    with _loaded_lock:
        cached = _loaded.get(directory)
        if cached is None:
            cached = {}
            for call in entries(Path(directory)):
                cached.setdefault(call["operator"], {}).setdefault(canonical_key(call.get("key") or {}), []).append(call)
            _loaded[directory] = cached
        return cached


def forget(directory: str) -> None:
    """Drop a cached recording (the driver rewrote it)."""
    with _loaded_lock:
        _loaded.pop(directory, None)


def _error_type(name: str) -> type[CallError]:
    return type(name or "CallError", (CallError,), {})


class ReplayCall(_Wrapper):
    """Answers from a recording; the adapter is never opened, so no connection is ever made.

    The n-th call of a key gets the n-th recorded call of that key (the last one repeats), so a
    recorded error followed by a successful retry replays as such. With `latency`, each answer
    waits as long as the recorded call took; a recorded timeout waits until the TIMEOUT fires.
    """

    timeout_handler = None      # the user's timeout(row) belongs to the adapter, which is not used

    def __init__(self, inner: EnrichCall, config: Enrich, settings: dict[str, Any]) -> None:
        super().__init__(inner, config)
        self.directory = settings["dir"]
        self.unrecorded = settings.get("unrecorded", "error")
        self.latency = bool(settings.get("latency", False))
        self.answers_at_once = not self.latency
        self.calls = load(self.directory).get(config.name, {})
        self.seen: dict[str, int] = {}

    def _recorded(self, row: dict[str, Any]) -> dict[str, Any] | None:
        """The recorded call that answers this call of `row` (None: unrecorded, treated as a miss)."""
        key = self.key(row)
        canonical = canonical_key(key)
        recorded = self.calls.get(canonical)
        if not recorded:
            if self.unrecorded == "miss":
                return None
            shown = ", ".join(f"{c}={v!r}" for c, v in key.items())
            raise NotRecorded(f"ENRICH {self.config.name} (line {self.config.line}): no recorded answer for "
                              f"call key {shown} in {self.directory}")
        n = self.seen.get(canonical, 0)
        self.seen[canonical] = n + 1
        return recorded[min(n, len(recorded) - 1)]

    async def _outcome(self, calls: list[dict[str, Any] | None]) -> None:
        """Wait as the recorded calls did; raise the first recorded error."""
        if any(c and c.get("timeout") for c in calls):
            await asyncio.sleep(self.config.timeout_s + 3600)   # the operator's TIMEOUT cancels this
        if self.latency:
            waits = [float(c["latency_ms"]) / 1000 for c in calls if c and c.get("latency_ms")]
            if waits:
                await asyncio.sleep(max(waits))
        for call in calls:
            if call and call.get("error") is not None:
                raise _error_type(call.get("error_type", "CallError"))(call["error"], raw=call.get("raw"),
                                                                      error_class=call.get("error_class"))

    def open(self) -> None:
        """The adapter is never opened: replaying makes no connection and runs no user open()."""

    def close(self) -> None:
        """Nothing was opened."""

    @staticmethod
    def _answer(call: dict[str, Any] | None) -> Any:
        return None if call is None or call.get("miss") else call.get("answer")

    async def __call__(self, row: dict[str, Any]) -> Any:
        call = self._recorded(row)
        await self._outcome([call])
        answer = self._answer(call)
        return None if answer is None else check_result_types(answer, self.result_check)

    def batch_item(self, answer: Any) -> Any:
        """A recorded answer is already a result (ANSWER and PATH were applied when it was recorded)."""
        return EnrichCall.batch_item(self, answer)

    async def call_batch(self, rows: list[dict[str, Any]]) -> list[Any]:
        """BATCH: each row answered from its own recorded call; one recorded error or timeout
        fails the whole call, as it would have failed the batch."""
        calls = [self._recorded(row) for row in rows]
        await self._outcome(calls)
        return [self._answer(c) for c in calls]
