"""`:show` and the no-write job on the test run's SparkSession, against a real counting service:
what runs, how many calls it makes, and that nothing is written (the REPL's screen is covered by
test_show_side_effects.py)."""
from __future__ import annotations

import re
import runpy
from collections import Counter
from pathlib import Path

import pytest

from dslc.compiler.cli.repl_session import Session
from dslc.compiler.interactive.spark_runner import SparkRunner
from dslc.compiler.pipeline import check_source, lower_plan
from dslc.compiler.source import SourceFile

pytestmark = pytest.mark.spark

FLOW = """\
PIPELINE explore MODE BATCH;
SOURCE orders FROM JSON 'data/'
  SCHEMA (order_id STRING, customer_id STRING, amount DOUBLE);
STREAM enriched = ENRICH orders WITH HTTP GET 'http://127.0.0.1:{port}/c/{{customer_id}}'
  RETURNS (tier STRING)
  ON ERROR DEAD LETTER 'target/dlq';
STREAM gold = SELECT * FROM enriched WHERE tier = 'gold';
STREAM per_tier = SELECT tier, count(*) AS n FROM enriched GROUP BY tier;
SINK gold TO JSON 'target/gold' MODE OVERWRITE;
SINK per_tier TO JSON 'target/per_tier' MODE OVERWRITE;
"""


@pytest.fixture
def flow(tmp_path: Path, serve_app):
    from aiohttp import web

    calls: Counter = Counter()

    async def customer(request):
        number = int(request.match_info["id"][1:])
        calls[number] += 1
        if number % 5 == 3:
            return web.Response(status=500)
        return web.json_response({"tier": "gold" if number % 2 == 0 else "silver"})

    app = web.Application()
    app.router.add_get("/c/{id}", customer)
    server = serve_app(app)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "part.json").write_text("".join(
        f'{{"order_id": "o{i}", "customer_id": "c{i}", "amount": {i}.5}}\n' for i in range(40)))
    path = tmp_path / "explore.flow"
    path.write_text(FLOW.format(port=server.port))
    return path, calls


def _session(path: Path) -> Session:
    session = Session(runner=SparkRunner(progress=False))
    session.load(path)
    return session


def test_show_with_a_row_by_row_path_calls_about_n_times(spark, flow):
    path, calls = flow
    result = _session(path).show("gold", 6)
    assert sum(calls.values()) == 6                        # the limit is before the ENRICH
    shown = [int(n) for n in re.findall(r"^\|o(\d+)\s*\|", result.table, re.M)]
    assert shown and all(n % 2 == 0 and n % 5 != 3 for n in shown)
    assert any("6 rows in, 6 calls" in n for n in result.notes)
    assert not (path.parent / "target").exists()


def test_show_after_an_aggregation_reads_everything_and_says_so(spark, flow):
    path, calls = flow
    result = _session(path).show("per_tier", 5)
    assert sum(calls.values()) == 40 and max(calls.values()) == 1   # every row once (persisted for the split)
    assert re.search(r"\|gold\s*\|16\s*\|", result.table) and re.search(r"\|silver\s*\|16\s*\|", result.table)
    assert any("per_tier aggregates" in n and "enriched runs on all of it" in n for n in result.notes)
    assert any("8 dead letters (kept in memory, not written)" in n for n in result.notes)
    letters = _session(path).show("per_tier", 20, dead_letters=True)
    assert letters.table.count('"kind": "error"') == 8
    assert not (path.parent / "target").exists()


def test_a_job_that_writes_nothing_hands_back_its_sinks(spark, flow, tmp_path):
    """What `dslc test` builds on: the whole pipeline, every SINK captured, nothing written."""
    path, calls = flow
    job = tmp_path / "job.py"
    job.write_text(lower_plan(check_source(SourceFile.read(path)), job_folder=str(tmp_path), writes=False))
    captured = runpy.run_path(str(job), run_name="captured")["main"]()
    try:
        assert sorted(captured.outputs) == ["gold", "per_tier"]
        assert captured.outputs["gold"].count() == 16              # even customers not ending in 3 or 8
        assert captured.dead_letters["enriched"].count() == 8
        assert captured.operator_metrics()["enriched"]["calls"] == 40
    finally:
        captured.release()
    assert not (tmp_path / "target").exists()
