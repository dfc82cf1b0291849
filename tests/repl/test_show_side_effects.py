"""Exploring has no side effects: the real REPL in a pseudo-terminal against a real HTTP service
that counts its calls. `:show` computes only what it shows, writes nothing under the flow's
folder, lets about n rows reach an ENRICH, is cancelled by Ctrl-C, and the screen holds no
Spark log line."""
from __future__ import annotations

import asyncio
import io
import json
import os
import re
import signal
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from polling import until

pexpect = pytest.importorskip("pexpect")
pytestmark = pytest.mark.spark

PROMPT = "flow> "
ROWS = 60
FLOW = """\
PIPELINE explore MODE BATCH;
SOURCE orders FROM JSON 'data/orders/'
  SCHEMA (order_id STRING, customer_id STRING, amount DOUBLE);
STREAM paid = SELECT order_id, customer_id, amount FROM orders WHERE amount > 0;
STREAM enriched = ENRICH paid WITH HTTP GET 'http://127.0.0.1:{port}/customers/{{customer_id}}'
  RETURNS (tier STRING)
  ON ERROR DEAD LETTER 'target/dlq/enrich';
STREAM slow = ENRICH paid WITH HTTP GET 'http://127.0.0.1:{port}/slow/{{customer_id}}'
  RETURNS (tier STRING) CAPACITY 2 TIMEOUT 60s;
SINK enriched TO JSON 'target/out/enriched' MODE OVERWRITE;
SINK slow TO JSON 'target/out/slow' MODE OVERWRITE;
"""
# What Spark prints on a terminal when nobody keeps it off the screen
SPARK_NOISE = re.compile(r"log4j|WARN |INFO |NativeCodeLoader|hostname|loopback|Setting default log level"
                         r"|\[Stage \d+", re.I)


def _service(calls: Counter):
    from aiohttp import web

    async def customer(request):
        calls["customers"] += 1
        number = int(request.match_info["id"][1:])
        if number % 4 == 1:
            return web.Response(status=500, text="broken customer")
        return web.json_response({"tier": "gold" if number % 2 else "silver"})

    async def slow(request):
        calls["slow"] += 1
        await asyncio.sleep(3.0)     # 40 rows at CAPACITY 2 take a minute: Ctrl-C lands well before the end
        return web.json_response({"tier": "late"})

    app = web.Application()
    app.router.add_get("/customers/{id}", customer)
    app.router.add_get("/slow/{id}", slow)
    return app


@pytest.fixture(scope="module")
def repl(tmp_path_factory, serve_app_per_file):
    """One REPL for the whole file (its start, a JVM with it, is most of each test's time): a flow
    folder, the service it calls, and the REPL started on it (its screen is recorded). The tests
    run in the session the one before left, as a user's next command would: the Ctrl-C tests
    also show that the same session goes on."""
    calls: Counter = Counter()
    server = serve_app_per_file(_service(calls))
    tmp_path = tmp_path_factory.mktemp("explore")
    folder = tmp_path / "flow"
    (folder / "data" / "orders").mkdir(parents=True)
    (folder / "data" / "orders" / "part-0.json").write_text("".join(
        json.dumps({"order_id": f"o{i:03}", "customer_id": f"c{i:03}", "amount": 10.0 + i}) + "\n"
        for i in range(ROWS)))
    (folder / "pipeline.flow").write_text(FLOW.format(port=server.port))
    before = sorted(p.relative_to(folder) for p in folder.rglob("*"))
    env = {**os.environ, "DSLC_HISTORY": str(tmp_path / "history"), "TERM": "dumb", "PYTHONUNBUFFERED": "1",
           "DSLC_MASTER": "local[2]"}
    screen = io.StringIO()
    child = pexpect.spawn(sys.executable, ["-m", "dslc.compiler.cli", "repl", "pipeline.flow"], env=env,
                          cwd=str(folder), timeout=180, encoding="utf-8", dimensions=(40, 250))
    child.logfile_read = screen
    try:
        child.expect_exact("ok: loaded 7 statements")
        child.expect_exact(PROMPT)
        yield child, calls, folder, before, screen
        child.sendline(":quit")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)


@pytest.fixture
def explored(repl):
    """The shared REPL at its prompt, with the service's call counts of this test only."""
    child, calls, folder, before, screen = repl
    calls.clear()
    return repl


def _show(child, command: str) -> str:
    child.send(command + "\r")
    child.expect_exact(PROMPT)
    return child.before


def test_show_before_the_enrich_calls_nothing_and_writes_nothing(explored):
    child, calls, folder, before, screen = explored
    out = _show(child, ":show paid 3")
    assert re.search(r"\|\s*o000\s*\|\s*c000\s*\|\s*10\.0\s*\|", out)
    assert "only showing top 3 rows" in out
    assert sum(calls.values()) == 0                      # neither ENRICH ran
    assert sorted(p.relative_to(folder) for p in folder.rglob("*")) == before
    assert not SPARK_NOISE.search(screen.getvalue()), screen.getvalue()


def test_show_of_the_enrich_makes_about_n_calls_and_keeps_dead_letters_in_memory(explored):
    child, calls, folder, before, screen = explored
    out = _show(child, ":show enriched 5")
    assert 5 <= calls["customers"] <= 7, calls             # a limit before the ENRICH, not one per input row
    assert calls["slow"] == 0
    shown = re.findall(r"\|\s*(o\d{3})\s*\|", out)
    note = re.search(r"-- enriched: 5 rows in, \d+ calls, (\d+) dead letters? \(kept in memory, not written\)", out)
    assert note and shown and len(shown) + int(note.group(1)) == 5
    assert all(int(o[1:]) % 4 != 1 for o in shown)       # the failed calls went to the dead letters
    if len(shown) < 5:
        assert f"-- {len(shown)} of 5 rows came through" in out and ":show enriched 20 reads more input" in out
    letters = _show(child, ":show enriched 5 --dead-letters")
    assert '"kind": "error"' in letters and '"operator": "enriched"' in letters
    assert sorted(p.relative_to(folder) for p in folder.rglob("*")) == before   # no target/dlq, no target/out
    assert not SPARK_NOISE.search(screen.getvalue()), screen.getvalue()


def test_ctrl_c_cancels_a_slow_show_and_the_session_goes_on(explored):
    child, calls, folder, before, screen = explored
    child.send(":show slow 40\r")
    child.expect_exact("(Ctrl-C cancels)")                 # the progress line
    until(lambda: calls["slow"] > 0, "no call reached the service", seconds=150)  # Spark starts on a busy machine
    child.sendintr()
    child.expect_exact("interrupted: the job was cancelled", timeout=60)
    child.expect_exact(PROMPT)
    assert 0 < calls["slow"] < 40
    settled, seen = time.monotonic() + 20, -1
    while calls["slow"] != seen and time.monotonic() < settled:   # Spark kills the task's Python worker
        seen = calls["slow"]
        time.sleep(3)
    assert calls["slow"] == seen and seen < 40, calls      # the calls stopped with the job, before its end
    out = _show(child, ":show paid 2")                     # same session, same JVM
    assert re.search(r"\|\s*o001\s*\|", out)
    assert sorted(p.relative_to(folder) for p in folder.rglob("*")) == before
    assert not SPARK_NOISE.search(screen.getvalue()), screen.getvalue()


RECVFROM = "45"   # x86_64's number of the call py4j's socket read blocks in (/proc/PID/syscall)


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(n) for n in (task / "children").read_text().split()]
    return found


def _jvm_of(pid: int) -> int:
    """The REPL's JVM: the descendant whose command line runs java."""
    todo = _children(pid)
    while todo:
        child = todo.pop()
        if b"java" in Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")[0]:
            return child
        todo += _children(child)
    raise AssertionError(f"no JVM under {pid}")


def _main_thread_waits_for_the_jvm(pid: int) -> bool:
    """The REPL's main thread is blocked reading a py4j answer, with no SIGINT left to deliver."""
    status = Path(f"/proc/{pid}/task/{pid}/status").read_text()
    pending = [int(line.split()[1], 16) for line in status.splitlines() if line.startswith(("SigPnd", "ShdPnd"))]
    syscall = Path(f"/proc/{pid}/task/{pid}/syscall").read_text().split()
    return bool(syscall) and syscall[0] == RECVFROM and not any(mask & 2 for mask in pending)


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="reads x86_64's syscall numbers")
def test_ctrl_c_during_a_py4j_call_of_the_progress_line_still_cancels(explored):
    """The race of the flaky test above, made certain: the JVM is stopped (SIGSTOP) while the REPL
    polls the job's progress, so the main thread is inside a py4j call (blocked on its socket) when
    Ctrl-C arrives. A KeyboardInterrupt raised there made py4j print its traceback and shut down
    the worker thread's connection too, with its job group: the cancel found nothing to cancel and
    the job ran to its end."""
    child, calls, folder, before, screen = explored
    child.send(":show slow 40\r")
    child.expect_exact("(Ctrl-C cancels)")
    until(lambda: calls["slow"] > 0, "no call reached the service", seconds=150)
    jvm = _jvm_of(child.pid)
    os.kill(jvm, signal.SIGSTOP)
    try:
        until(lambda: _main_thread_waits_for_the_jvm(child.pid), "the REPL never waited for the JVM", seconds=60)
        child.sendintr()
        child.expect_exact("^C")                              # the terminal sent SIGINT to the REPL
        until(lambda: _main_thread_waits_for_the_jvm(child.pid), "the SIGINT was not delivered", seconds=60)
    finally:
        os.kill(jvm, signal.SIGCONT)
    child.expect_exact("interrupted: the job was cancelled", timeout=180)
    assert calls["slow"] < 40, (calls, screen.getvalue()[-3000:])   # cancelled, not run to its end
    child.expect_exact(PROMPT)
    assert "Traceback" not in screen.getvalue(), screen.getvalue()
    out = _show(child, ":show paid 2")                        # the session's py4j connection still answers right
    assert re.search(r"\|\s*o001\s*\|", out)
