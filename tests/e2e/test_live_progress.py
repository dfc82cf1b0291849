"""Live progress of `dslc run`: a refreshing table on a terminal (a pseudo-terminal here), a line
every 10 s otherwise, the same through Spark Connect; tasks report over UDP to the driver's
collector (runtime/progress.py, runtime/spark/progress.py)."""
from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

pexpect = pytest.importorskip("pexpect")
pytestmark = [pytest.mark.spark, pytest.mark.slow]

SLOW = """
PIPELINE slow_calls MODE BATCH;
SOURCE orders FROM JSON 'in/' SCHEMA (id STRING, customer STRING);
STREAM enriched = ENRICH orders WITH HTTP GET 'http://127.0.0.1:{port}/c/{{customer}}' RETURNS (tier STRING)
  ASYNC UNORDERED CAPACITY 4 TIMEOUT 5s;
SINK enriched TO JSON 'out' MODE OVERWRITE;
"""


def slow_service(calls: list[str], delay_s: float = 0.1):
    from aiohttp import web

    async def customer(request):
        calls.append(request.match_info["id"])
        await asyncio.sleep(delay_s)
        return web.json_response({"tier": "gold"})

    app = web.Application()
    app.router.add_get("/c/{id}", customer)
    return app


def slow_flow(folder: Path, port: int, rows: int) -> Path:
    (folder / "in").mkdir(parents=True)
    (folder / "in/1.json").write_text("".join(json.dumps({"id": f"o{i}", "customer": f"c{i}"}) + "\n"
                                              for i in range(rows)))
    flow = folder / "pipeline.flow"
    flow.write_text(SLOW.format(port=port))
    return flow


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DSLC_FLOW_FOLDER", "PYSPARK_PYTHON", "SPARK_REMOTE")}
    return {**env, "TERM": "xterm", "COLUMNS": "200", "LINES": "50"}


def _in_counts(screen: str) -> list[int]:
    """The 'in' figure of every drawing of the live table's `enriched` row."""
    return [int(m.group(1)) for m in re.finditer(r"enriched\s*[│|]\s*(\d+)\s*[│|]", screen)]


def _run_on_terminal(flow: Path, *args: str) -> str:
    child = pexpect.spawn(sys.executable, ["-m", "dslc.compiler.cli", "run", str(flow), *args], env=_env(),
                          cwd=str(flow.parent), timeout=400, dimensions=(50, 200), encoding="utf-8")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, child.before[-3000:]
    return child.before


def test_the_live_table_refreshes_with_growing_counts_on_a_terminal(tmp_path, serve_app):
    calls: list[str] = []
    server = serve_app(slow_service(calls))
    screen = _run_on_terminal(slow_flow(tmp_path, server.port, 240))
    counts = _in_counts(screen)
    assert len(set(counts)) >= 3, screen[-3000:]          # redrawn with new figures, several times
    assert counts == sorted(counts) and counts[0] < 240, counts   # the count grows while it runs
    assert "calls/s" in screen and "in flight" in screen and "p99 ms" in screen
    assert re.search(r"\d/4\b", screen)                  # in flight against the limit (CAPACITY 4, one task)
    assert "dslc: per-operator metrics" in screen        # the job's own output passes through
    assert "dslc: starting Spark (local[*])… " in screen   # while the JVM starts, said so (#41 item 10)
    assert len(calls) == 240


def test_without_a_terminal_a_line_every_ten_seconds(tmp_path, serve_app):
    calls: list[str] = []
    server = serve_app(slow_service(calls, delay_s=0.12))
    flow = slow_flow(tmp_path, server.port, 500)          # ~15 s of calls at CAPACITY 4
    result = subprocess.run([sys.executable, "-m", "dslc.compiler.cli", "run", str(flow)], env=_env(),
                            cwd=str(flow.parent), capture_output=True, text=True, timeout=400)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = [line for line in (result.stdout + result.stderr).splitlines() if line.startswith("dslc: progress ")]
    assert len(lines) >= 2, result.stdout[-3000:]
    seen = [int(re.search(r"enriched elements_in=(\d+)", line).group(1)) for line in lines]
    assert seen == sorted(seen) and seen[-1] == 500      # the last line is the end of the run
    assert "in_flight=" in lines[0] and "calls_per_s=" in lines[0] and "\x1b[" not in result.stdout
    stamps = [line.split()[2] for line in lines[:-1]]     # hh:mm:ss, 10 s apart (the last one at the end)
    seconds = [int(h) * 3600 + int(m) * 60 + int(s) for h, m, s in (t.split(":") for t in stamps)]
    assert all(b - a >= 9 for a, b in zip(seconds, seconds[1:]))


def test_spark_connect_keeps_the_table(tmp_path, serve_app, connect_server):
    calls: list[str] = []
    server = serve_app(slow_service(calls))
    screen = _run_on_terminal(slow_flow(tmp_path, server.port, 240), "--remote", connect_server.url)
    counts = _in_counts(screen)
    assert len(set(counts)) >= 2 and counts == sorted(counts), screen[-3000:]
    assert len(calls) == 240


def test_ctrl_c_stops_a_run_showing_the_table(tmp_path, serve_app):
    calls: list[str] = []
    server = serve_app(slow_service(calls, delay_s=0.5))
    flow = slow_flow(tmp_path, server.port, 400)          # ~50 s: stopped long before
    child = pexpect.spawn(sys.executable, ["-m", "dslc.compiler.cli", "run", str(flow)], env=_env(),
                          cwd=str(flow.parent), timeout=300, dimensions=(50, 200), encoding="utf-8")
    child.expect(r"enriched\s*[│|]\s*[1-9]")            # the table shows calls going on
    child.sendintr()
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 130 or child.signalstatus is not None
    stopped = len(calls)
    time.sleep(2)
    assert len(calls) == stopped < 400                   # nothing calls the service any more


def test_the_live_view_says_spark_is_starting_then_how_long_it_took(tmp_path):
    """#41 item 10: no frozen 00:00:00 while Spark starts: the seconds so far, then (until the
    first task reports) how long Spark took."""
    from rich.console import Console

    from dslc.compiler.cli.live import LiveProgress

    live = LiveProgress(tmp_path / "progress.json", where="local[2]")
    assert re.fullmatch(r"dslc: starting Spark \(local\[2\]\)… \d+ s", str(live.view(None)))

    def drawn(figures) -> str:
        console = Console(record=True, width=200)
        console.print(live.view(figures))
        return console.export_text()

    assert re.search(r"dslc: 00:00:01 \(Spark started in \d+ s; waiting for the first task\)",
                     drawn({"elapsed": 1, "rows": []}))
    row = {"operator": "enriched", "elements_in": 3}
    assert "waiting" not in drawn({"elapsed": 2, "rows": [row]}) and "enriched" in drawn({"elapsed": 2, "rows": [row]})
