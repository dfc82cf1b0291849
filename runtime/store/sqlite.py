"""The embedded answer store: one SQLite file in WAL mode (Python's standard library), shared by
every task and run on one machine.

Why SQLite: it is in every Python, so executors need nothing installed; WAL lets many processes
read while one writes, and a write is a short transaction (`busy_timeout` makes the others wait
for it rather than fail). Reads and writes are quick local calls made on the worker loop
directly. A cluster whose executors run on several machines needs `redis://` instead.

Layout (`SCHEMA_VERSION` in `meta`; the file is marked with SQLite's application id 'dslc'):
answers(operator, key, value, at, variant, args, output) (the last three: what Spark joins an
answer by, see wrappers/joinable.py; NULL when it cannot be joined), leases(operator, key, owner, until), counters(name, value),
rates(name, next).
"""
from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from .base import SCHEMA_VERSION, AnswerStore, Join, OperatorStats, Stored, StoreError, encode, readable
from .ledger import BatchRecord, LineRecord

APPLICATION_ID = 0x64736C63   # 'dslc'
#: the PROVENANCE note of a stored answer at a path ('$': the answer, '$[0]': its one result), if an object
_NOTE = ("CASE json_type(value, '{0}.\"dslc:provenance\"') WHEN 'object' "
         "THEN json_extract(value, '{0}.\"dslc:provenance\"') END")
_CHUNK = 500                  # keys per statement (SQLite limits the number of parameters)

_TABLES = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS answers (operator TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,
    at REAL NOT NULL, variant TEXT, args TEXT, output TEXT, PRIMARY KEY (operator, key)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS leases (operator TEXT NOT NULL, key TEXT NOT NULL, owner TEXT NOT NULL,
    until REAL NOT NULL, PRIMARY KEY (operator, key)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS rates (name TEXT PRIMARY KEY, next REAL NOT NULL);
"""

_LEDGER = """
CREATE TABLE IF NOT EXISTS batches (operator TEXT NOT NULL, id TEXT NOT NULL, data TEXT NOT NULL,
    PRIMARY KEY (operator, id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS batch_lines (operator TEXT NOT NULL, custom_id TEXT NOT NULL, key TEXT NOT NULL,
    args TEXT, batch TEXT NOT NULL, attempt INTEGER NOT NULL, state TEXT NOT NULL, error TEXT, run TEXT NOT NULL,
    PRIMARY KEY (operator, custom_id)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS batch_lines_of ON batch_lines (operator, batch);
"""
_LINE_COLUMNS = "custom_id, key, args, batch, attempt, state, error, run"

#: Steps that bring a store of an older layout to the next version.
MIGRATIONS: dict[int, str] = {
    1: "ALTER TABLE answers ADD COLUMN variant TEXT; ALTER TABLE answers ADD COLUMN args TEXT; "
       "ALTER TABLE answers ADD COLUMN output TEXT",
}


def _chunks(keys: list[str]) -> Iterator[list[str]]:
    for start in range(0, len(keys), _CHUNK):
        yield keys[start:start + _CHUNK]


#: SQLite's errors of a file or folder it may not write (not of a damaged file).
_NOT_WRITABLE = ("SQLITE_READONLY", "SQLITE_CANTOPEN", "SQLITE_PERM", "SQLITE_AUTH")


def _not_writable(exc: sqlite3.DatabaseError) -> bool:
    return str(getattr(exc, "sqlite_errorname", "")).startswith(_NOT_WRITABLE)


class SqliteStore(AnswerStore):
    """The answer store in one SQLite file."""

    def __init__(self, location: str) -> None:
        self.location = location
        self.path = Path(location[len("file://"):] if location.startswith("file://") else location)
        self._db: sqlite3.Connection | None = None

    # ----------------------------------------------------------------- opening

    async def open(self, check: bool = False) -> None:
        self._db = self._connect(check)

    def _connect(self, check: bool) -> sqlite3.Connection:
        where = str(self.path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"answer store {where}: cannot create its folder: {exc}") from None
        try:
            db = sqlite3.connect(where, timeout=30.0, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            raise StoreError(f"answer store {where} cannot be opened: {exc}") from None
        try:
            db.execute("PRAGMA busy_timeout = 30000")
            app_id = db.execute("PRAGMA application_id").fetchone()[0]
            tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if app_id not in (0, APPLICATION_ID) or (app_id == 0 and tables and "meta" not in tables):
                raise StoreError(f"answer store {where} is an SQLite file of another program, not a dslc answer "
                                 "store; give ANSWERS another path")
            db.execute("PRAGMA journal_mode = WAL")
            db.execute("PRAGMA synchronous = NORMAL")
            if check:
                problem = db.execute("PRAGMA quick_check").fetchone()[0]
                if problem != "ok":
                    raise sqlite3.DatabaseError(problem)
            self._schema(db, where)
        except sqlite3.DatabaseError as exc:
            db.close()
            if _not_writable(exc):      # a read-only folder or file: nothing is damaged, nothing lost
                raise StoreError(f"answer store {where} cannot be written ({exc}): the store and its folder must be "
                                 "writable (SQLite keeps its -wal and -shm files beside it); make them writable, or "
                                 "give ANSWERS another path") from None
            raise StoreError(f"answer store {where} is damaged or not an SQLite file ({exc}); move it away "
                             "(its answers are lost) or give ANSWERS another path") from None
        except BaseException:
            db.close()
            raise
        return db

    def _schema(self, db: sqlite3.Connection, where: str) -> None:
        """Create the tables of a new store; migrate an older one; refuse a newer one."""
        db.execute("BEGIN IMMEDIATE")
        try:
            if not self._has_meta(db):
                for statement in filter(str.strip, _TABLES.split(";")):
                    db.execute(statement)
            row = db.execute("SELECT value FROM meta WHERE name = 'schema_version'").fetchone()
            if row is None:
                db.execute("PRAGMA application_id = %d" % APPLICATION_ID)
                db.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
                for statement in filter(str.strip, _LEDGER.split(";")):
                    db.execute(statement)
                db.execute("COMMIT")
                return
            version = int(row[0])
            if version > SCHEMA_VERSION:
                raise StoreError(f"answer store {where} was written by a newer dslc (store version {version}; "
                                 f"this dslc reads version {SCHEMA_VERSION}): upgrade dslc, or give ANSWERS another path")
            while version < SCHEMA_VERSION:
                step = MIGRATIONS.get(version)
                if step is None:
                    raise StoreError(f"answer store {where} was written by an older dslc (store version {version}; "
                                     f"this dslc writes version {SCHEMA_VERSION}) and cannot be migrated: empty it "
                                     f"with `dslc store clear {where}`, or give ANSWERS another path")
                for statement in filter(str.strip, step.split(";")):
                    db.execute(statement)
                version += 1
                db.execute("UPDATE meta SET value = ? WHERE name = 'schema_version'", (str(version),))
            for statement in filter(str.strip, _LEDGER.split(";")):
                db.execute(statement)
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise

    @staticmethod
    def _has_meta(db: sqlite3.Connection) -> bool:
        return db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'").fetchone() is not None

    @property
    def db(self) -> sqlite3.Connection:
        if self._db is None:
            self._db = self._connect(False)
        return self._db

    def _write(self, statements) -> Any:
        """Run `statements(db)` in one write transaction."""
        db = self.db
        db.execute("BEGIN IMMEDIATE")
        try:
            result = statements(db)
            db.execute("COMMIT")
            return result
        except BaseException:
            db.execute("ROLLBACK")
            raise

    # ----------------------------------------------------------------- answers

    async def get_many(self, operator: str, keys: list[str], ttl_s: float | None,
                       unreadable: bool = False) -> dict[str, Stored]:
        since = time.time() - ttl_s if ttl_s else float("-inf")
        found: dict[str, Stored] = {}
        for part in _chunks(keys):
            marks = ",".join("?" * len(part))
            for key, value, at in self.db.execute(
                    f"SELECT key, value, at FROM answers WHERE operator = ? AND key IN ({marks})", (operator, *part)):
                if at >= since:
                    stored = readable(value, at, unreadable)
                    if stored is not None:
                        found[key] = stored
        return found

    async def put_many(self, operator: str, items: list[tuple[str, Any]], ttl_s: float | None,
                       joins: Mapping[str, Join] | None = None) -> None:
        now = time.time()
        joins = joins or {}
        rows = []
        for key, value in items:
            join = joins.get(key)
            rows.append((operator, key, encode(value), now, *((join.variant, join.args, join.output) if join else
                                                             (None, None, None))))

        def write(db: sqlite3.Connection) -> None:
            db.executemany("INSERT OR REPLACE INTO answers VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
            db.executemany("DELETE FROM leases WHERE operator = ? AND key = ?", [(operator, k) for k, _ in items])

        self._write(write)

    async def joinable(self, operator: str, variant: str, ttl_s: float | None) -> list[tuple[str, str]]:
        since = time.time() - ttl_s if ttl_s else float("-inf")
        return self.db.execute("SELECT args, output FROM answers WHERE operator = ? AND variant = ? AND at >= ? "
                               "AND output IS NOT NULL", (operator, variant, since)).fetchall()

    async def joinable_noted(self, operator: str, variant: str,
                             ttl_s: float | None) -> list[tuple[str, str, str, str | None, float]]:
        since = time.time() - ttl_s if ttl_s else float("-inf")
        # the note (an object) of the answer or of its one result, read by SQLite's JSON functions; an
        # answer that is not valid JSON any more is left to the operator (which calls its key again)
        return self.db.execute(
            f"SELECT args, output, key, COALESCE({_NOTE.format('$')}, {_NOTE.format('$[0]')}), at FROM answers "
            "WHERE operator = ? AND variant = ? AND at >= ? AND output IS NOT NULL AND json_valid(value)",
            (operator, variant, since)).fetchall()

    # ----------------------------------------------------------------- leases

    async def held(self, operator: str, now: float) -> list[str]:
        return [r[0] for r in self.db.execute("SELECT owner FROM leases WHERE operator = ? AND until >= ?",
                                              (operator, now))]

    async def forget(self, operator: str, stale: list[tuple[str, float]]) -> None:
        if stale:
            self._write(lambda db: db.executemany("DELETE FROM answers WHERE operator = ? AND key = ? AND at = ?",
                                                  [(operator, key, at) for key, at in stale]))

    async def lease(self, operator: str, keys: list[str], owner: str, seconds: float,
                    ttl_s: float | None = None) -> set[str]:
        now = time.time()
        since = now - ttl_s if ttl_s else float("-inf")

        def take(db: sqlite3.Connection) -> set[str]:
            held: set[str] = set()
            for part in _chunks(keys):
                marks = ",".join("?" * len(part))
                db.execute(f"DELETE FROM leases WHERE operator = ? AND until < ? AND key IN ({marks})",
                           (operator, now, *part))
                answered = {r[0] for r in db.execute(
                    f"SELECT key FROM answers WHERE operator = ? AND at >= ? AND key IN ({marks})",
                    (operator, since, *part))}
                db.executemany("INSERT OR IGNORE INTO leases VALUES (?, ?, ?, ?)",
                               [(operator, key, owner, now + seconds) for key in part if key not in answered])
                held.update(r[0] for r in db.execute(
                    f"SELECT key FROM leases WHERE operator = ? AND owner = ? AND key IN ({marks})",
                    (operator, owner, *part)))
            return held

        return self._write(take)

    async def renew(self, operator: str, keys: list[str], owner: str, seconds: float) -> None:
        until = time.time() + seconds
        self._write(lambda db: db.execute("UPDATE leases SET until = ? WHERE operator = ? AND owner = ?",
                                          (until, operator, owner)))

    async def release(self, operator: str, keys: list[str], owner: str) -> None:
        self._write(lambda db: db.executemany("DELETE FROM leases WHERE operator = ? AND key = ? AND owner = ?",
                                              [(operator, key, owner) for key in keys]))

    # ----------------------------------------------------------------- counters and rates

    async def spend(self, counter: str, amount: int) -> int:
        def add(db: sqlite3.Connection) -> int:
            db.execute("INSERT INTO counters VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET value = value + ?",
                       (counter, amount, amount))
            return int(db.execute("SELECT value FROM counters WHERE name = ?", (counter,)).fetchone()[0])

        return self._write(add)

    async def reserve(self, name: str, per_second: float, count: int = 1) -> float:
        def take(db: sqlite3.Connection) -> float:
            now = time.time()
            row = db.execute("SELECT next FROM rates WHERE name = ?", (name,)).fetchone()
            slot = max(now, row[0]) if row else now
            db.execute("INSERT OR REPLACE INTO rates VALUES (?, ?)", (name, slot + count / per_second))
            return slot - now

        return self._write(take)

    # ----------------------------------------------------------------- administration

    async def stats(self, operator: str | None = None) -> list[OperatorStats]:
        where, args = ("WHERE operator = ?", (operator,)) if operator else ("", ())
        rows = self.db.execute(
            "SELECT operator, count(*), sum(value = 'null' OR value = '[]'), min(at), max(at) "
            f"FROM answers {where} GROUP BY operator ORDER BY operator", args).fetchall()
        return [OperatorStats(op, n, int(misses or 0), oldest, newest) for op, n, misses, oldest, newest in rows]

    async def clear(self, operator: str | None = None) -> int:
        def remove(db: sqlite3.Connection) -> int:
            if operator:
                gone = db.execute("DELETE FROM answers WHERE operator = ?", (operator,)).rowcount
                for table in ("leases", "batches", "batch_lines"):
                    db.execute(f"DELETE FROM {table} WHERE operator = ?", (operator,))
                return gone
            gone = db.execute("DELETE FROM answers").rowcount
            for table in ("leases", "counters", "rates", "batches", "batch_lines"):
                db.execute(f"DELETE FROM {table}")
            return gone

        return self._write(remove)

    # ----------------------------------------------------------------- provider batches (ledger.py)

    async def batches(self, operator: str | None = None) -> list[BatchRecord]:
        where, args = ("WHERE operator = ?", (operator,)) if operator else ("", ())
        rows = self.db.execute(f"SELECT operator, id, data FROM batches {where}", args).fetchall()
        records = [BatchRecord(op, id_, json.loads(data)) for op, id_, data in rows]
        return sorted(records, key=lambda r: (r.data.get("created", 0), r.id))

    async def put_batch(self, record: BatchRecord) -> None:
        self._write(lambda db: db.execute("INSERT OR REPLACE INTO batches VALUES (?, ?, ?)",
                                          (record.operator, record.id, json.dumps(record.data))))

    async def drop_batch(self, operator: str, batch: str) -> None:
        self._write(lambda db: db.execute("DELETE FROM batches WHERE operator = ? AND id = ?", (operator, batch)))

    async def put_lines(self, operator: str, lines: list[LineRecord]) -> None:
        rows = [(operator, line.custom_id, line.key, line.args, line.batch, line.attempt, line.state, line.error,
                 line.run) for line in lines]
        self._write(lambda db: db.executemany(
            f"INSERT OR REPLACE INTO batch_lines (operator, {_LINE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows))

    async def lines(self, operator: str, custom_ids: list[str]) -> dict[str, LineRecord]:
        found: dict[str, LineRecord] = {}
        for part in _chunks(custom_ids):
            marks = ",".join("?" * len(part))
            for row in self.db.execute(f"SELECT {_LINE_COLUMNS} FROM batch_lines WHERE operator = ? "
                                       f"AND custom_id IN ({marks})", (operator, *part)):
                found[row[0]] = LineRecord(*row)
        return found

    async def lines_of(self, operator: str, batch: str) -> dict[str, LineRecord]:
        return {row[0]: LineRecord(*row) for row in self.db.execute(
            f"SELECT {_LINE_COLUMNS} FROM batch_lines WHERE operator = ? AND batch = ?", (operator, batch))}

    async def drop_lines(self, operator: str, custom_ids: list[str]) -> None:
        def drop(db: sqlite3.Connection) -> None:
            db.executemany("DELETE FROM batch_lines WHERE operator = ? AND custom_id = ?",
                           [(operator, c) for c in custom_ids])
        self._write(drop)

    async def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None


def file_size(path: str) -> int:
    """Bytes the store's files take (the database and its WAL)."""
    return sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))
