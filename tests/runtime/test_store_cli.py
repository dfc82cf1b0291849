"""`dslc store stats|clear FILE [--operator NAME]` on a .flow file's store, a store file and Redis."""
from __future__ import annotations

import asyncio
import os
import sqlite3

import pytest
from polling import until

from dslc.compiler.cli.main import main
from dslc.runtime.store.open_stores import make_store

FLOW = """PIPELINE p MODE BATCH {answers};
SOURCE s FROM JSON 'in/' SCHEMA (id STRING);
STREAM labelled = ENRICH s WITH HTTP GET 'http://127.0.0.1:1/x/{{id}}' RETURNS (v STRING) STORE;
STREAM scored = ENRICH labelled WITH HTTP GET 'http://127.0.0.1:1/y/{{id}}' RETURNS (w STRING) STORE TTL 1h;
SINK scored TO CONSOLE;
"""


def _fill(location: str) -> None:
    async def put():
        store = make_store(location)
        await store.open()
        await store.put_many("labelled", [("a", {"v": "1"}), ("b", None), ("c", {"v": "3"})], None)
        await store.put_many("scored", [("a", {"w": "x"})], None)
        await store.close()
    asyncio.run(put())


@pytest.fixture(params=["sqlite", "redis"])
def setup(request, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    if request.param == "sqlite":
        (tmp_path / "p.flow").write_text(FLOW.format(answers=""))      # the default store: target/answers.db
        location = str(tmp_path / "target/answers.db")
    else:
        location = request.getfixturevalue("redis_server").url(0)
        (tmp_path / "p.flow").write_text(FLOW.format(answers=f"ANSWERS '{location}'"))
    _fill(location)
    return tmp_path / "p.flow", location


def test_stats_then_clear_one_operator_then_all(setup, capsys):
    flow, location = setup
    assert main(["store", "stats", str(flow)]) == 0
    out = capsys.readouterr().out
    assert f"answer store {location}" in out
    lines = {line.split()[0]: line.split() for line in out.splitlines()[2:]}
    assert lines["labelled"][1:3] == ["3", "1"] and lines["scored"][1:3] == ["1", "0"]
    assert main(["store", "clear", str(flow), "--operator", "labelled"]) == 0
    assert "cleared 3 answers of labelled" in capsys.readouterr().out
    assert main(["store", "stats", location]) == 0
    out = capsys.readouterr().out
    assert "labelled" not in out and "scored" in out
    assert main(["store", "clear", location]) == 0
    assert "cleared 1 answer (every operator)" in capsys.readouterr().out


def test_clear_empties_a_store_of_an_older_dslc(tmp_path, capsys):
    path = tmp_path / "old.db"
    _fill(str(path))
    with sqlite3.connect(path) as db:
        db.execute("UPDATE meta SET value = '0' WHERE name = 'schema_version'")
    assert main(["store", "stats", str(path)]) == 1
    assert "written by an older dslc" in capsys.readouterr().err
    assert main(["store", "clear", str(path)]) == 0
    assert main(["store", "stats", str(path)]) == 0
    assert "no answers" in capsys.readouterr().out


def test_unknown_operator_and_missing_store_are_clear_errors(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "p.flow").write_text(FLOW.format(answers=""))
    assert main(["store", "stats", "p.flow", "--operator", "nope"]) == 1
    assert "no ENRICH named 'nope' uses STORE" in capsys.readouterr().err
    assert main(["store", "stats", "missing.db"]) == 1
    assert "no answer store at missing.db" in capsys.readouterr().err


def test_clear_refuses_while_a_run_holds_the_store(setup, capsys, monkeypatch):
    """#48 item 26: `dslc store clear` during a run of the pipeline emptied the store under it
    (exit 0, no word) and the run paid the cleared keys again: the run's hold makes it refuse.

    The test waits for the hold's renewals (seen at the store's interface) rather than sleeping
    past a short HOLD_S: a machine that stalled the renewing thread longer than that let the hold
    lapse. The store's own renewing is tested in test_answer_store."""
    from dslc.runtime.store import run_hold

    renewals: list[tuple] = []                           # the arguments of each renew the hold made

    def recording_store(location: str):
        store = make_store(location)
        renew = store.renew

        async def recorded(*args):
            await renew(*args)
            renewals.append(args)
        store.renew = recorded
        return store

    monkeypatch.setattr(run_hold, "make_store", recording_store)
    monkeypatch.setattr(run_hold, "RENEW_S", 0.05)
    flow, location = setup
    run_hold.hold(location)
    try:
        until(lambda: len(renewals) >= 2, "the run never renewed its hold twice")
        assert renewals[0] == (run_hold.OPERATOR, [run_hold.OWNER], run_hold.OWNER, run_hold.HOLD_S)
        assert main(["store", "clear", str(flow)]) != 0
        err = capsys.readouterr().err
        assert "is in use by a running job" in err and f"pid {os.getpid()}" in err
        assert main(["store", "stats", location]) == 0
        assert "labelled" in capsys.readouterr().out       # nothing was cleared
    finally:
        run_hold.release(location)
    assert main(["store", "clear", str(flow)]) == 0        # the run ended: its hold is gone
    assert "cleared 4 answers" in capsys.readouterr().out
