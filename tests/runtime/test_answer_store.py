"""The answer store's backends (SQLite file, real Redis server) behind one interface, and their
bad inputs: a damaged file, another program's file, a store of another dslc version, an
unreachable Redis."""
from __future__ import annotations

import asyncio
import datetime as dt
import decimal
import sqlite3
import time

import pytest

from dslc.runtime.store.base import SCHEMA_VERSION, Join, StoreError, decode, encode
from dslc.runtime.store.open_stores import check_location, make_store
from dslc.runtime.store.sqlite import SqliteStore


def run(coro):
    return asyncio.run(coro)


async def _opened(location):
    store = make_store(location)
    await store.open(check=True)
    return store


def test_answers_round_trip_with_time_and_ttl(location):
    async def scenario():
        store = await _opened(location)
        try:
            await store.put_many("op", [("k1", {"tier": "gold"}), ("k2", None), ("k3", [])], None)
            found = await store.get_many("op", ["k1", "k2", "k3", "k4"], None)
            assert {k: v.value for k, v in found.items()} == {"k1": {"tier": "gold"}, "k2": None, "k3": []}
            assert abs(found["k1"].at - time.time()) < 5
            assert await store.get_many("other", ["k1"], None) == {}      # per operator
            await asyncio.sleep(0.3)
            assert await store.get_many("op", ["k1"], 0.1) == {}          # older than its TTL
            stats = {s.operator: s for s in await store.stats()}
            assert stats["op"].answers == 3 and stats["op"].misses == 2
            assert await store.clear("op") == 3
            assert await store.get_many("op", ["k1"], None) == {}
        finally:
            await store.close()
    run(scenario())


def test_a_lease_is_held_by_one_owner_until_released_or_lapsed(location):
    async def scenario():
        a, b = await _opened(location), await _opened(location)
        try:
            assert await a.lease("op", ["x", "y"], "A", 5) == {"x", "y"}
            assert await b.lease("op", ["x", "y", "z"], "B", 5) == {"z"}
            await a.release("op", ["x"], "A")
            assert await b.lease("op", ["x"], "B", 5) == {"x"}
            await a.renew("op", ["y"], "A", 0.2)
            await asyncio.sleep(0.4)                                     # A died: its lease lapses
            assert await b.lease("op", ["y"], "B", 5) == {"y"}
            await b.put_many("op", [("z", {"v": 1})], None)              # an answered key is not leased:
            assert await a.lease("op", ["z"], "A", 5) == set()           # its answer is read instead
        finally:
            await a.close()
            await b.close()
    run(scenario())


def test_counters_and_rate_slots_are_atomic_across_connections(location):
    async def scenario():
        stores = [await _opened(location) for _ in range(4)]
        try:
            totals = await asyncio.gather(*(s.spend("budget:op:run1", 1) for s in stores for _ in range(25)))
            assert sorted(totals) == list(range(1, 101))
            waits = [await stores[i % 4].reserve("rate:op", 100.0) for i in range(20)]
            # one schedule for all: slots 10 ms apart, whoever takes them
            assert waits[-1] == pytest.approx(0.19, abs=0.05)
        finally:
            for s in stores:
                await s.close()
    run(scenario())


def test_values_keep_their_types():
    value = {"at": dt.datetime(2024, 1, 2, 3, 4, 5), "d": dt.date(2024, 1, 2), "n": decimal.Decimal("1.25"),
             "b": b"\x00\x01", "l": [1, "a", None]}
    assert decode(encode(value)) == value


# --------------------------------------------------------------------------- bad input


def test_a_damaged_file_is_a_clear_error(tmp_path):
    path = tmp_path / "answers.db"
    path.write_bytes(b"this is not a database" * 200)
    with pytest.raises(StoreError) as caught:
        run(check_location(str(path)))
    assert str(path) in str(caught.value) and "damaged or not an SQLite file" in str(caught.value)


def test_another_programs_sqlite_file_is_refused(tmp_path):
    path = tmp_path / "app.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE users (id INTEGER)")
    with pytest.raises(StoreError, match="another program"):
        run(check_location(str(path)))


@pytest.mark.parametrize("version, words", [(0, "older dslc"), (SCHEMA_VERSION + 1, "newer dslc")])
def test_a_store_of_another_dslc_version_is_refused_clearly(tmp_path, version, words):
    path = tmp_path / "answers.db"
    run(check_location(str(path)))                         # a store of this version
    with sqlite3.connect(path) as db:
        db.execute("UPDATE meta SET value = ? WHERE name = 'schema_version'", (str(version),))
    with pytest.raises(StoreError) as caught:
        run(check_location(str(path)))
    assert words in str(caught.value) and f"store version {version}" in str(caught.value)
    assert str(path) in str(caught.value)


def test_what_a_join_reads_is_kept_per_variant_with_ttl_and_cleared(location):
    async def scenario():
        store = await _opened(location)
        try:
            await store.put_many("op", [("k1", {"t": "a"}), ("k2", {"t": "b"}), ("k3", None)], 3600,
                                 {"k1": Join("v1", '{"id":"1"}', '{"t":"a"}'), "k2": Join("v2", '{"id":"2"}', '{"t":"b"}')})
            await store.put_many("other", [("k1", {"t": "c"})], None, {"k1": Join("v1", '{"id":"1"}', '{"t":"c"}')})
            first = await store.joinable("op", "v1", 3600), await store.joinable("op", "v2", None)
            await asyncio.sleep(1.1)
            expired = await store.joinable("op", "v1", 1)
            await store.clear("op")
            return first, expired, await store.joinable("op", "v1", None), await store.joinable("other", "v1", None)
        finally:
            await store.close()

    (v1, v2), expired, cleared, other = run(scenario())
    assert v1 == [('{"id":"1"}', '{"t":"a"}')] and v2 == [('{"id":"2"}', '{"t":"b"}')]
    assert expired == [] and cleared == []
    assert other == [('{"id":"1"}', '{"t":"c"}')]


V1_TABLES = """
CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE answers (operator TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,
    at REAL NOT NULL, PRIMARY KEY (operator, key)) WITHOUT ROWID;
CREATE TABLE leases (operator TEXT NOT NULL, key TEXT NOT NULL, owner TEXT NOT NULL,
    until REAL NOT NULL, PRIMARY KEY (operator, key)) WITHOUT ROWID;
CREATE TABLE counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE rates (name TEXT PRIMARY KEY, next REAL NOT NULL);
INSERT INTO meta VALUES ('schema_version', '1');
PRAGMA application_id = 1685285987;
"""


def test_a_store_of_version_1_is_migrated_and_keeps_its_answers(tmp_path):
    """Version 2 adds what a warm rerun's join reads; the answers written by version 1 stay."""
    path = tmp_path / "answers.db"
    with sqlite3.connect(path) as db:
        db.executescript(V1_TABLES)
        db.execute("INSERT INTO answers VALUES ('op', 'k1', '{\"tier\":\"gold\"}', ?)", (time.time(),))
    store = SqliteStore(str(path))

    async def scenario():
        await store.open(check=True)
        try:
            found = await store.get_many("op", ["k1"], None)
            await store.put_many("op", [("k2", {"tier": "blue"})], None, {"k2": Join("v", '{"id":"2"}', '{"tier":"blue"}')})
            return found, await store.joinable("op", "v", None), await store.joinable("op", "other", None)
        finally:
            await store.close()

    found, joined, other = run(scenario())
    assert found["k1"].value == {"tier": "gold"}
    assert joined == [('{"id":"2"}', '{"tier":"blue"}')] and other == []
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT value FROM meta WHERE name = 'schema_version'").fetchone()[0] == str(SCHEMA_VERSION)


def test_a_redis_store_of_another_version_is_refused(redis_server):
    import redis
    redis.Redis(port=redis_server.port).hset("dslc:meta", "schema_version", SCHEMA_VERSION + 1)
    with pytest.raises(StoreError, match="newer dslc"):
        run(check_location(redis_server.url(0)))


def test_an_unreachable_redis_is_a_clear_error_naming_it():
    import socket
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"redis://127.0.0.1:{port}/0"
    started = time.monotonic()
    with pytest.raises(StoreError) as caught:
        run(check_location(url))
    assert url in str(caught.value) and "unreachable" in str(caught.value)
    assert time.monotonic() - started < 10


def test_provider_batch_records_and_lines_round_trip_and_clear(location):
    from dslc.runtime.store.ledger import FAILED, SENT, BatchRecord, LineRecord, custom_id

    async def scenario():
        store = await _opened(location)
        try:
            later = BatchRecord("op", "b2", {"created": 2.0, "file_id": "file-2"})
            await store.put_batch(later)
            await store.put_batch(BatchRecord("op", "b1", {"created": 1.0, "batch_id": "batch_1"}))
            await store.put_batch(BatchRecord("other", "b3", {"created": 3.0}))
            assert [(r.id, r.batch_id, r.file_id) for r in await store.batches("op")] == [
                ("b1", "batch_1", None), ("b2", None, "file-2")]                       # oldest first
            assert [r.operator for r in await store.batches()] == ["op", "op", "other"]
            later.data["batch_id"] = "batch_2"
            await store.put_batch(later)                                               # rewritten, not added
            assert [r.batch_id for r in await store.batches("op")] == ["batch_1", "batch_2"]
            lines = [LineRecord(custom_id(f"key {i}"), f"key {i}", '{"a":1}', "b1" if i < 3 else "b2", 1, SENT, None, "r")
                     for i in range(5)]
            await store.put_lines("op", lines)
            assert sorted(l.key for l in (await store.lines_of("op", "b1")).values()) == ["key 0", "key 1", "key 2"]
            failed = LineRecord(lines[0].custom_id, "key 0", None, "", 2, FAILED, '{"message": "boom"}', "r2")
            await store.put_lines("op", [failed])
            found = await store.lines("op", [lines[0].custom_id, lines[4].custom_id, "missing"])
            assert found[lines[0].custom_id] == failed and found[lines[4].custom_id] == lines[4] and len(found) == 2
            await store.drop_lines("op", [lines[1].custom_id])
            await store.drop_batch("op", "b1")
            assert [r.id for r in await store.batches("op")] == ["b2"]
            assert set(await store.lines_of("op", "b1")) == {lines[2].custom_id}
            await store.clear("op")
            assert await store.batches("op") == [] and await store.lines("op", [lines[4].custom_id]) == {}
            assert [r.id for r in await store.batches()] == ["b3"]                     # another operator's stay
            await store.clear()
            assert await store.batches() == []
            assert len(custom_id("x" * 10_000)) == 64                                 # the API's limit
        finally:
            await store.close()

    run(scenario())
