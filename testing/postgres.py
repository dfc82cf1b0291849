"""A private PostgreSQL for tests, examples and benchmarks: Debian's server binaries run on a
temporary folder and a free port of 127.0.0.1, with password authentication.

dslc's database features must be tested against a real database, not a stand-in: this starts a
cluster of its own (`initdb` and `pg_ctl`, as the `postgres` user when run as root, as PostgreSQL
refuses to run as root), that nobody else shares, and removes it on `stop`. Every statement the
server executes is logged (`log_statement = all`, bind parameters left out of the log) and
counted by `pg_stat_statements`, so a test can count queries and read their text:
`statements()` gives the statement texts logged since `mark()`.

    with LocalPostgres() as db:
        db.execute("CREATE TABLE t (k TEXT PRIMARY KEY, v INT)")
        url = db.url()            # postgresql://app:<password>@127.0.0.1:<port>/app
"""
from __future__ import annotations

import asyncio
import glob
import os
import re
import secrets
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import Any

#: Where Debian's packages put the server binaries; `DSLC_PG_BIN` names another folder.
BIN_GLOB = "/usr/lib/postgresql/*/bin"
_LOGGED = re.compile(r"LOG:  (?:statement|execute [^:]*): (.*)")


def server_bin() -> Path:
    """The folder of `initdb`, `pg_ctl` and `postgres` (the newest Debian version installed)."""
    given = os.environ.get("DSLC_PG_BIN")
    candidates = [given] if given else sorted(glob.glob(BIN_GLOB), key=_version, reverse=True)
    for folder in candidates:
        if folder and (Path(folder) / "initdb").is_file():
            return Path(folder)
    raise RuntimeError("PostgreSQL's server is not installed: run .ci/install (apt-get install postgresql), "
                       "or set DSLC_PG_BIN to the folder holding initdb and pg_ctl")


def _version(folder: str) -> int:
    found = re.search(r"/(\d+)/bin$", folder)
    return int(found.group(1)) if found else 0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LocalPostgres:
    """One private cluster: a superuser `postgres` and an owner `user` of database `database`,
    both with `password`."""

    def __init__(self, *, user: str = "app", database: str = "app", password: str | None = None,
                 port: int | None = None) -> None:
        self.user, self.database = user, database
        self.password = password or secrets.token_hex(8)
        self.port = port or free_port()
        self.bin = server_bin()
        self.folder = Path(tempfile.mkdtemp(prefix="dslc-pg-"))
        self.data = self.folder / "data"
        self.log = self.folder / "server.log"
        self._as_postgres = os.geteuid() == 0
        self._mark = 0
        self.started = False

    # ------------------------------------------------------------------ life
    def start(self) -> LocalPostgres:
        if self._as_postgres:
            shutil.chown(self.folder, "postgres", "postgres")
        password_file = self.folder / "pw"
        password_file.write_text(self.password + "\n")
        if self._as_postgres:
            shutil.chown(password_file, "postgres", "postgres")
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=scram-sha-256",
                  f"--pwfile={password_file}", "-E", "UTF8", "--locale=C")
        password_file.unlink()
        settings = {
            "port": self.port, "listen_addresses": "127.0.0.1", "unix_socket_directories": "",
            "shared_preload_libraries": "pg_stat_statements", "pg_stat_statements.track": "all",
            "log_statement": "all", "log_parameter_max_length": 0, "log_min_messages": "warning",
            "fsync": "off", "synchronous_commit": "off", "full_page_writes": "off", "max_connections": 200,
        }
        with open(self.data / "postgresql.conf", "a", encoding="utf-8") as conf:
            for key, value in settings.items():
                conf.write(f"{key} = '{value}'\n")
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "start")
        self.started = True
        self.execute(f"CREATE ROLE {self.user} LOGIN PASSWORD '{self.password}'", database="postgres",
                     user="postgres")
        self.execute(f"CREATE DATABASE {self.database} OWNER {self.user}", database="postgres", user="postgres")
        self.execute("CREATE EXTENSION pg_stat_statements", user="postgres")
        return self

    def stop(self) -> None:
        """Stop the server (fast shutdown) and remove its folder; again is a no-op."""
        if self.started:
            self.started = False
            try:
                self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")
            except subprocess.CalledProcessError:
                pass
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> LocalPostgres:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self, tool: str, *args: str) -> None:
        subprocess.run([str(self.bin / tool), *args], check=True, capture_output=True, text=True,
                       user="postgres" if self._as_postgres else None, cwd=self.folder, timeout=120)

    # ------------------------------------------------------------------ use
    def url(self, *, user: str | None = None, password: str | None = None, database: str | None = None) -> str:
        """`postgresql://user:password@127.0.0.1:port/database` (the owner's by default)."""
        return (f"postgresql://{user or self.user}:{self.password if password is None else password}"
                f"@127.0.0.1:{self.port}/{database or self.database}")

    def execute(self, sql: str, *args: Any, database: str | None = None, user: str | None = None) -> None:
        """Run one statement (or several, without arguments)."""
        self.query(sql, *args, database=database, user=user, fetch=False)

    def query(self, sql: str, *args: Any, database: str | None = None, user: str | None = None,
              fetch: bool = True) -> list[dict[str, Any]]:
        """The rows of one query, as dicts."""
        import asyncpg

        async def run() -> list[dict[str, Any]]:
            connection = await asyncpg.connect(self.url(user=user, database=database))
            try:
                if not fetch:
                    await connection.execute(sql, *args)
                    return []
                return [dict(row) for row in await connection.fetch(sql, *args)]
            finally:
                await connection.close()

        return asyncio.run(run())

    def copy_rows(self, table: str, columns: list[str], rows: list[tuple]) -> None:
        """Load many rows at once (COPY): a benchmark's million customers."""
        import asyncpg

        async def run() -> None:
            connection = await asyncpg.connect(self.url())
            try:
                await connection.copy_records_to_table(table, records=rows, columns=columns)
            finally:
                await connection.close()

        asyncio.run(run())

    # ------------------------------------------------------------------ what it executed
    def mark(self) -> None:
        """Count statements from now on (`statements()` reads the log after this point)."""
        self._mark = self.log.stat().st_size if self.log.exists() else 0

    def statements(self) -> list[str]:
        """The text of every statement the server executed since `mark()`, as logged (never the
        values of bind parameters: they are left out of the log)."""
        if not self.log.exists():
            return []
        with open(self.log, encoding="utf-8", errors="replace") as handle:
            handle.seek(self._mark)
            text = handle.read()
        found, current = [], None
        for line in text.splitlines():
            match = _LOGGED.search(line)
            if match:
                current = match.group(1)
                found.append(current)
            elif current is not None and line.startswith(("\t", " ")) and "LOG:" not in line:
                found[-1] += "\n" + line.strip()      # a statement logged over several lines
            else:
                current = None
        return found

    def log_text(self) -> str:
        """Everything the server logged since `mark()` (errors included)."""
        if not self.log.exists():
            return ""
        with open(self.log, encoding="utf-8", errors="replace") as handle:
            handle.seek(self._mark)
            return handle.read()


def main() -> None:     # pragma: no cover - a manual aid: start one and print its URL
    db = LocalPostgres().start()
    print(db.url(), flush=True)
    try:
        input("press Enter to stop\n")
    finally:
        db.stop()


if __name__ == "__main__":     # pragma: no cover
    main()
