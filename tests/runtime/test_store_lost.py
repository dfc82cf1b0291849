"""A Redis answer store in a running ENRICH (#48 item 19), on a private `redis-server` each test
starts (it is killed, restarted or given a password): a store lost mid-run stops the run with
one line naming it, never rows turned into dead letters; one that comes back empty stops it too;
`${NAME}` in the location is filled, and its password is never shown."""
from __future__ import annotations

import shutil
import socket
import subprocess
import threading
import time

import pytest
from runtime_support import FaultServer, Reply
from runtime_support import run_operator as run

from dslc.runtime.config import Column, Enrich, HttpCall, Mode, Outcome, Store
from dslc.runtime.secrets import Secrets
from dslc.runtime.store import lost
from dslc.runtime.store.base import StoreError
from dslc.runtime.store.open_stores import make_store

PASSWORD = "pw-3c9e1d-never-shown"
_names = iter(range(10**9))


class Redis:
    """A redis-server of this test on a free port (restartable on the same port, empty)."""

    def __init__(self, folder, password: str | None = None) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.folder, self.password, self.process = str(folder), password, None
        self.start()

    def start(self) -> None:
        binary = shutil.which("redis-server")
        assert binary, "redis-server is not installed: run .ci/install"
        extra = ["--requirepass", self.password] if self.password else []
        self.process = subprocess.Popen([binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                                         "--appendonly", "no", "--dir", self.folder, *extra],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(400):
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("redis-server did not start")

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()


@pytest.fixture
def redis(tmp_path):
    servers: list[Redis] = []

    def start(password: str | None = None) -> Redis:
        servers.append(Redis(tmp_path, password))
        return servers[-1]

    yield start
    for server in servers:
        server.kill()


def enrich(server: FaultServer, location: str, **kw) -> Enrich:
    return Enrich(name=f"stored{next(_names)}", line=3, call=HttpCall(server.url("/kv/{id}")),
                  returns=(Column("value", "STRING"),), key_columns=("id",), mode=Mode.UNORDERED, capacity=4,
                  timeout_s=5.0, on_error=Outcome.DEAD_LETTER, store=Store(location, run="r1"), **kw)


def _after_calls(server: FaultServer, calls: int, action) -> threading.Thread:
    def watch() -> None:
        while server.total < calls:
            time.sleep(0.005)
        action()

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def _stopped(config: Enrich, rows: list[dict]) -> tuple[str, list]:
    """The text of what stopped the run, and the dead letters written before it."""
    from runtime_support import Collector
    out = Collector()
    with pytest.raises(BaseException) as stop:
        run(config, rows, out)
    return f"{type(stop.value).__name__}: {stop.value}", out.dead_letters


def test_a_store_lost_mid_run_stops_the_run_and_makes_no_dead_letters(fault_server, redis, monkeypatch):
    monkeypatch.setattr(lost, "WAIT_S", 1.0)
    fault_server.default = Reply(delay_ms=20)
    server = redis()
    watcher = _after_calls(fault_server, 8, server.kill)
    said, letters = _stopped(enrich(fault_server, f"redis://127.0.0.1:{server.port}/0"),
                             [{"id": f"k{i}"} for i in range(200)])
    watcher.join(5)
    assert "StoreLost" in said and f"answer store redis://127.0.0.1:{server.port}/0 was lost during the run" in said
    assert letters == []
    assert fault_server.total < 200


def test_a_store_back_empty_mid_run_stops_the_run(fault_server, redis, monkeypatch):
    monkeypatch.setattr(lost, "WAIT_S", 30.0)
    fault_server.default = Reply(delay_ms=20)
    server = redis()

    def restart() -> None:
        server.kill()
        time.sleep(0.3)
        server.start()

    watcher = _after_calls(fault_server, 8, restart)
    said, letters = _stopped(enrich(fault_server, f"redis://127.0.0.1:{server.port}/0"),
                             [{"id": f"k{i}"} for i in range(200)])
    watcher.join(5)
    assert "came back empty during the run" in said and letters == []


def test_a_store_back_with_its_data_goes_on(fault_server, redis, monkeypatch):
    """A store that is only unreachable for a moment (its data kept) loses no row."""
    monkeypatch.setattr(lost, "WAIT_S", 30.0)
    fault_server.default = Reply(delay_ms=20)
    server = redis()
    location = f"redis://127.0.0.1:{server.port}/0"

    def pause() -> None:
        subprocess.run(["redis-cli", "-p", str(server.port), "CLIENT", "PAUSE", "800", "ALL"], check=True,
                       capture_output=True, timeout=10)

    if shutil.which("redis-cli") is None:
        pytest.fail("redis-cli is not installed: run .ci/install")
    _after_calls(fault_server, 8, pause)
    op, out = run(enrich(fault_server, location), [{"id": f"k{i}"} for i in range(40)])
    assert len(out.rows) == 40 and out.dead_letters == []


def test_a_secret_password_is_filled_and_never_shown(fault_server, redis, tmp_path):
    server = redis(PASSWORD)
    location = f"redis://:${{REDIS_PASSWORD}}@127.0.0.1:{server.port}/0"
    config = enrich(fault_server, location, secrets=Secrets({"REDIS_PASSWORD": PASSWORD}))
    op, out = run(config, [{"id": "a"}, {"id": "b"}, {"id": "a"}])
    assert sorted(r["value"] for r in out.rows) == ["v-a", "v-a", "v-b"] and fault_server.total == 2
    # a wrong password, a literal one, and a server that is not there: the password never shows
    for written in (f"redis://:wrong-{PASSWORD}@127.0.0.1:{server.port}/0",
                    f"redis://:{PASSWORD}@127.0.0.1:{_free_port()}/0"):
        store = make_store(written)
        with pytest.raises(StoreError) as refused:
            import asyncio
            asyncio.run(store.open(check=True))
        assert PASSWORD not in str(refused.value) and "answer store redis://127.0.0.1:" in str(refused.value)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


FLOW = """PIPELINE p MODE BATCH ANSWERS '{answers}';
SOURCE s FROM JSON 'in/' SCHEMA (id STRING);
STREAM labelled = ENRICH s WITH HTTP GET 'http://127.0.0.1:1/x/{{id}}' RETURNS (v STRING) STORE;
SINK labelled TO CONSOLE;
"""


@pytest.mark.parametrize("written", [PASSWORD, "${REDIS_PASSWORD}"])
def test_explain_and_store_stats_never_show_the_password(redis, tmp_path, monkeypatch, capsys, written):
    from dslc.compiler.cli.main import main

    server = redis(PASSWORD)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("REDIS_PASSWORD", PASSWORD)
    (tmp_path / "p.flow").write_text(FLOW.format(answers=f"redis://:{written}@127.0.0.1:{server.port}/0"))
    for fmt in ("text", "json", "dot"):
        assert main(["explain", "p.flow", "--format", fmt]) == 0
    assert main(["store", "stats", "p.flow"]) == 0
    out = capsys.readouterr()
    assert f"answer store redis://127.0.0.1:{server.port}/0 (Redis" in out.out
    assert PASSWORD not in out.out + out.err
