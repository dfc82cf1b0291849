"""The answer store on a Redis server (`redis://host:port/db`), which executors on many machines
share: the `redis` library's asyncio client, one pipeline (one round trip) per batch of keys.

Layout (every name under `dslc:`): `dslc:meta` (a hash: the store's version), `dslc:ops` (a set of
operator names), `dslc:a:{operator}:{digest}` answers (JSON: key, value, time; expiring with STORE
TTL), `dslc:l:{operator}:{digest}` leases (the owner, expiring), `dslc:c:{name}` counters and
`dslc:r:{name}` rate slots. The digest is SHA-256 of the request key, so long keys cost nothing.
TIER BATCH's provider batches (store/ledger.py): `dslc:b:{operator}` (a hash: record id -> JSON)
and `dslc:bl:{operator}` (a hash: custom_id -> the line as JSON), `dslc:bops` the operators with any.
"""
from __future__ import annotations

import hashlib
import json
import time
import urllib.parse
from collections.abc import Mapping
from typing import Any

from dslc.runtime.schema.provenance import NOTE
from dslc.runtime.secrets import MASK, mask_url, scrub

from .base import (
    SCHEMA_VERSION,
    UNREADABLE,
    AnswerStore,
    Join,
    OperatorStats,
    Stored,
    StoreError,
    encode,
    readable,
)
from .ledger import BatchRecord, LineRecord

# One slot of a rate shared by the job: the server's clock, so executors' clocks need not agree.
_RESERVE = """
local now = redis.call('TIME')
now = tonumber(now[1]) + tonumber(now[2]) / 1000000
local next = tonumber(redis.call('GET', KEYS[1]) or '0')
local slot = math.max(next, now)
redis.call('SET', KEYS[1], tostring(slot + tonumber(ARGV[1])), 'PX', 3600000)
return tostring(slot - now)
"""

# Take the lease of each key (KEYS: lease, answer, lease, answer...) that has no answer and no
# holder; 1 per key taken.
_LEASE = """
local taken = {}
for i = 1, #KEYS, 2 do
  if redis.call('EXISTS', KEYS[i + 1]) == 0 and redis.call('SET', KEYS[i], ARGV[1], 'NX', 'PX', ARGV[2]) then
    taken[#taken + 1] = (i + 1) / 2
  end
end
return taken
"""

# Delete a lease only if this owner still holds it.
_RELEASE = """
for i, key in ipairs(KEYS) do
  if redis.call('GET', key) == ARGV[1] then redis.call('DEL', key) end
end
return 0
"""

_RENEW = """
for i, key in ipairs(KEYS) do
  if redis.call('GET', key) == ARGV[1] then redis.call('PEXPIRE', key, ARGV[2]) end
end
return 0
"""


# Delete an answer (KEYS) if it is still the one stored at ARGV's time (-1: still unreadable).
_FORGET = """
for i, key in ipairs(KEYS) do
  local raw = redis.call('GET', key)
  if raw then
    local ok, item = pcall(cjson.decode, raw)
    local at = tonumber(ARGV[i])
    if (at < 0 and not ok) or (ok and type(item) == 'table' and item.at == at) then redis.call('DEL', key) end
  end
end
return 0
"""


def _item(raw: bytes | None) -> dict | None:
    """A stored answer's record, None when there is none or it cannot be read (cut, edited)."""
    if raw is None:
        return None
    try:
        item = json.loads(raw)
    except ValueError:
        return None
    return item if isinstance(item, dict) and {"k", "v", "at"} <= item.keys() else None


_UNREADABLE = object()


def _noted(text: str) -> str | None | object:
    """The note (as JSON) of a stored answer's text: the answer's own, else its first result's,
    None when it has none; _UNREADABLE when the text is not JSON (SQLite's `json_valid` fails)."""
    try:
        value = json.loads(text)
    except ValueError:
        return _UNREADABLE
    for holder in (value, value[0] if isinstance(value, list) and value else None):
        note = holder.get(NOTE) if isinstance(holder, dict) else None
        if isinstance(note, dict):
            return json.dumps(note, separators=(",", ":"))
    return None


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


class RedisStore(AnswerStore):
    """The answer store on a Redis server."""

    def __init__(self, location: str, connect_to: str | None = None) -> None:
        self.location = location
        self._url = connect_to or location     # `${NAME}` filled (open_stores.filled)
        #: how messages show the location: without its user:password, whether a secret or literal
        self.shown = mask_url(location)
        self._client: Any = None

    def _answer(self, operator: str, key: str) -> str:
        return f"dslc:a:{operator}:{_digest(key)}"

    def _lease(self, operator: str, key: str) -> str:
        return f"dslc:l:{operator}:{_digest(key)}"

    async def open(self, check: bool = False) -> None:
        try:
            import redis.asyncio as aioredis
            from redis.exceptions import RedisError
        except ImportError:
            raise StoreError(f"answer store {self.shown}: the `redis` Python package is not installed "
                             "(pip install redis)") from None
        try:
            self._client = aioredis.from_url(self._url, socket_connect_timeout=5, socket_timeout=30)
        except (ValueError, RedisError) as exc:
            raise StoreError(f"answer store {self.shown}: bad Redis location: {self._said(exc)}") from None
        try:
            await self._client.ping()
            version = await self._client.hget("dslc:meta", "schema_version")
            if version is None:
                await self._client.hsetnx("dslc:meta", "schema_version", str(SCHEMA_VERSION))
                version = await self._client.hget("dslc:meta", "schema_version")
        except (RedisError, OSError) as exc:
            await self.close()
            raise StoreError(f"answer store {self.shown} is unreachable: {self._said(exc)}; start Redis there, or give "
                             "ANSWERS another location") from None
        version = int(version)
        if version > SCHEMA_VERSION:
            raise StoreError(f"answer store {self.shown} was written by a newer dslc (store version {version}; "
                             f"this dslc reads version {SCHEMA_VERSION}): upgrade dslc, or use another database")
        if version == 1:    # version 2 adds what Spark joins an answer by, kept beside it as answers come
            await self._client.hset("dslc:meta", "schema_version", str(SCHEMA_VERSION))
            version = SCHEMA_VERSION
        if version < SCHEMA_VERSION:
            raise StoreError(f"answer store {self.shown} was written by an older dslc (store version {version}) "
                             f"and cannot be migrated: empty it with `dslc store clear {self.shown}`")
        self._reserve = self._client.register_script(_RESERVE)
        self._release = self._client.register_script(_RELEASE)
        self._take = self._client.register_script(_LEASE)
        self._renew = self._client.register_script(_RENEW)
        self._forget = self._client.register_script(_FORGET)

    async def intact(self) -> bool:
        return bool(await self._client.exists("dslc:meta"))

    def _said(self, exc: BaseException) -> str:
        """An error's text without the location's password (as a URL or alone)."""
        text = scrub(str(exc))
        password = urllib.parse.urlsplit(self._url).password
        return text.replace(urllib.parse.unquote(password), MASK).replace(password, MASK) if password else text

    async def get_many(self, operator: str, keys: list[str], ttl_s: float | None,
                       unreadable: bool = False) -> dict[str, Stored]:
        if not keys:
            return {}
        values = await self._client.mget([self._answer(operator, k) for k in keys])
        since = time.time() - ttl_s if ttl_s else float("-inf")
        found: dict[str, Stored] = {}
        for key, raw in zip(keys, values):
            item = _item(raw)
            if item is not None and item["at"] >= since and item["k"] == key:
                stored = readable(item["v"], item["at"], unreadable)
                if stored is not None:
                    found[key] = stored
            elif item is None and raw is not None and unreadable:
                found[key] = Stored(UNREADABLE, -1.0)
        return found

    async def put_many(self, operator: str, items: list[tuple[str, Any]], ttl_s: float | None,
                       joins: Mapping[str, Join] | None = None) -> None:
        now = time.time()
        joins = joins or {}
        pipe = self._client.pipeline(transaction=False)
        pipe.sadd("dslc:ops", operator)
        for key, value in items:
            text = json.dumps({"k": key, "v": encode(value), "at": now}, separators=(",", ":"))
            pipe.set(self._answer(operator, key), text, px=int(ttl_s * 1000) if ttl_s else None)
            pipe.delete(self._lease(operator, key))
            join = joins.get(key)
            if join is not None:    # one hash per operator and variant: the driver reads it whole
                pipe.hset(self._joins(operator, join.variant), join.args, f"{now!r} {join.output}")
                pipe.hset(self._join_keys(operator, join.variant), join.args, key)
        await pipe.execute()

    def _joins(self, operator: str, variant: str) -> str:
        return f"dslc:j:{operator}:{variant}"

    def _join_keys(self, operator: str, variant: str) -> str:
        """args -> the answer's request key, beside `_joins` (its notes are read through it)."""
        return f"dslc:j:{operator}:{variant}:keys"

    async def joinable(self, operator: str, variant: str, ttl_s: float | None) -> list[tuple[str, str]]:
        since = time.time() - ttl_s if ttl_s else float("-inf")
        out = []
        for args, raw in (await self._client.hgetall(self._joins(operator, variant))).items():
            at, _, output = raw.decode("utf-8").partition(" ")     # "<time> <output>": no JSON to parse here
            if float(at) >= since:
                out.append((args.decode("utf-8"), output))
        return out

    async def joinable_noted(self, operator: str, variant: str,
                             ttl_s: float | None) -> list[tuple[str, str, str, str | None, float]]:
        """The joinable answers whose request key is known (written since `_join_keys` was), each
        with its note from the answer itself, read by MGET 1,000 keys a round trip: the same
        entries SQLite's `joinable_noted` gives (an answer gone, expired or unreadable left out)."""
        since = time.time() - ttl_s if ttl_s else float("-inf")
        outputs = await self._client.hgetall(self._joins(operator, variant))
        keyed = [(args.decode("utf-8"), raw.partition(b" ")[2].decode("utf-8"), key.decode("utf-8"))
                 for args, key in (await self._client.hgetall(self._join_keys(operator, variant))).items()
                 if (raw := outputs.get(args)) is not None]
        out = []
        for start in range(0, len(keyed), 1000):
            part = keyed[start:start + 1000]
            for (args, output, key), raw in zip(part, await self._client.mget(
                    [self._answer(operator, key) for _, _, key in part])):
                item = _item(raw)
                if item is not None and item["k"] == key and item["at"] >= since:
                    noted = _noted(item["v"])
                    if noted is not _UNREADABLE:
                        out.append((args, output, key, noted, item["at"]))
        return out

    async def held(self, operator: str, now: float) -> list[str]:
        names = await self._keys(f"dslc:l:{operator}:*")      # a lapsed lease has expired
        owners = await self._client.mget(names) if names else []
        return [owner.decode("utf-8") for owner in owners if owner is not None]

    async def forget(self, operator: str, stale: list[tuple[str, float]]) -> None:
        if stale:
            await self._forget(keys=[self._answer(operator, key) for key, _ in stale],
                               args=[repr(float(at)) for _, at in stale])

    async def lease(self, operator: str, keys: list[str], owner: str, seconds: float,
                    ttl_s: float | None = None) -> set[str]:
        if not keys:
            return set()
        names = [name for key in keys for name in (self._lease(operator, key), self._answer(operator, key))]
        taken = await self._take(keys=names, args=[owner, int(seconds * 1000)])
        return {keys[int(i) - 1] for i in taken}

    async def renew(self, operator: str, keys: list[str], owner: str, seconds: float) -> None:
        if keys:
            await self._renew(keys=[self._lease(operator, k) for k in keys], args=[owner, int(seconds * 1000)])

    async def release(self, operator: str, keys: list[str], owner: str) -> None:
        if keys:
            await self._release(keys=[self._lease(operator, k) for k in keys], args=[owner])

    async def spend(self, counter: str, amount: int) -> int:
        return int(await self._client.incrby(f"dslc:c:{counter}", amount))

    async def reserve(self, name: str, per_second: float, count: int = 1) -> float:
        return float(await self._reserve(keys=[f"dslc:r:{name}"], args=[count / per_second]))

    async def _keys(self, pattern: str) -> list[bytes]:
        return [key async for key in self._client.scan_iter(match=pattern, count=1000)]

    async def stats(self, operator: str | None = None) -> list[OperatorStats]:
        operators = [operator] if operator else sorted(o.decode() for o in await self._client.smembers("dslc:ops"))
        out = []
        for op in operators:
            keys = await self._keys(f"dslc:a:{op}:*")
            answers = misses = 0
            oldest = newest = None
            for start in range(0, len(keys), 1000):
                for raw in await self._client.mget(keys[start:start + 1000]):
                    if raw is None:
                        continue
                    item = json.loads(raw)
                    answers += 1
                    misses += item["v"] in ("null", "[]")
                    oldest = item["at"] if oldest is None else min(oldest, item["at"])
                    newest = item["at"] if newest is None else max(newest, item["at"])
            if answers:
                out.append(OperatorStats(op, answers, misses, oldest, newest))
        return out

    async def clear(self, operator: str | None = None) -> int:
        patterns = [f"dslc:a:{operator}:*", f"dslc:l:{operator}:*", f"dslc:j:{operator}:*"] if operator else \
            ["dslc:a:*", "dslc:l:*", "dslc:c:*", "dslc:r:*", "dslc:j:*", "dslc:b:*", "dslc:bl:*"]
        if operator:
            await self._client.delete(f"dslc:b:{operator}", f"dslc:bl:{operator}")
            await self._client.srem("dslc:bops", operator)
        else:
            await self._client.delete("dslc:bops")
        gone = 0
        for pattern in patterns:
            keys = await self._keys(pattern)
            for start in range(0, len(keys), 1000):
                removed = await self._client.unlink(*keys[start:start + 1000])
                gone += removed if pattern.startswith("dslc:a:") else 0
        if operator:
            await self._client.srem("dslc:ops", operator)
        else:
            await self._client.delete("dslc:ops")
        return gone

    # ----------------------------------------------------------------- provider batches (ledger.py)

    async def batches(self, operator: str | None = None) -> list[BatchRecord]:
        operators = [operator] if operator else sorted(o.decode() for o in await self._client.smembers("dslc:bops"))
        records = []
        for op in operators:
            for id_, raw in (await self._client.hgetall(f"dslc:b:{op}")).items():
                records.append(BatchRecord(op, id_.decode(), json.loads(raw)))
        return sorted(records, key=lambda r: (r.data.get("created", 0), r.id))

    async def put_batch(self, record: BatchRecord) -> None:
        pipe = self._client.pipeline(transaction=True)
        pipe.sadd("dslc:bops", record.operator)
        pipe.hset(f"dslc:b:{record.operator}", record.id, json.dumps(record.data))
        await pipe.execute()

    async def drop_batch(self, operator: str, batch: str) -> None:
        await self._client.hdel(f"dslc:b:{operator}", batch)

    async def put_lines(self, operator: str, lines: list[LineRecord]) -> None:
        for start in range(0, len(lines), 1000):
            part = lines[start:start + 1000]
            await self._client.hset(f"dslc:bl:{operator}", mapping={
                line.custom_id: json.dumps(line.to_dict(), separators=(",", ":")) for line in part})

    async def lines(self, operator: str, custom_ids: list[str]) -> dict[str, LineRecord]:
        found: dict[str, LineRecord] = {}
        for start in range(0, len(custom_ids), 1000):
            part = custom_ids[start:start + 1000]
            for raw in await self._client.hmget(f"dslc:bl:{operator}", part):
                if raw is not None:
                    line = LineRecord(**json.loads(raw))
                    found[line.custom_id] = line
        return found

    async def lines_of(self, operator: str, batch: str) -> dict[str, LineRecord]:
        found: dict[str, LineRecord] = {}
        async for _, raw in self._client.hscan_iter(f"dslc:bl:{operator}", count=1000):
            line = LineRecord(**json.loads(raw))
            if line.batch == batch:
                found[line.custom_id] = line
        return found

    async def drop_lines(self, operator: str, custom_ids: list[str]) -> None:
        for start in range(0, len(custom_ids), 1000):
            await self._client.hdel(f"dslc:bl:{operator}", *custom_ids[start:start + 1000])

    async def close(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            try:
                await client.aclose()
            except Exception:  # noqa: BLE001 - closing a connection that never opened
                pass
