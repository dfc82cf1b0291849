"""`dslc run --record` against the fraud example's real customer service, then `--replay` with
the service stopped: the same sink rows, and not one request."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from dslc.testing import run_case

pytestmark = [pytest.mark.spark, pytest.mark.slow]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "fraud"


def _load_service():
    import importlib.util

    spec = importlib.util.spec_from_file_location("fraud_service_rr", EXAMPLE / "service.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _dslc_run(flow: Path, *options: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dslc.compiler.cli", "run", str(flow), *options],
                          capture_output=True, text=True, timeout=600)


def _rows(spark, folder: Path) -> list[tuple]:
    return sorted(tuple(r) for r in spark.read.parquet(str(folder / "target/out/flagged")).collect())


def test_a_recording_replays_identical_rows_with_the_service_stopped(spark, serve_app, tmp_path):
    from aiohttp import web

    service = _load_service()
    requests: list[str] = []

    @web.middleware
    async def count(request, handler):
        requests.append(request.path)
        return await handler(request)

    app = service.app()
    app.middlewares.append(count)
    server = serve_app(app)
    folder = tmp_path / "fraud"
    shutil.copytree(EXAMPLE, folder, ignore=shutil.ignore_patterns("target", "*.test.yaml"))
    flow = folder / "pipeline.flow"
    flow.write_text(flow.read_text().replace("127.0.0.1:8765", f"127.0.0.1:{server.port}"))
    recording = tmp_path / "rec"

    recorded = _dslc_run(flow, "--record", str(recording))
    assert recorded.returncode == 0, recorded.stderr[-3000:]
    assert requests                                          # the real service answered
    calls = yaml.safe_load((recording / "enriched.yaml").read_text())["calls"]
    keys = [c["key"]["customer_id"] for c in calls]
    assert keys == sorted(keys) and len(calls) == len(requests)     # one entry per request, by key
    assert any(c.get("miss") for c in calls if c["key"]["customer_id"] == "c13")   # the 404
    assert all(c["request"].startswith(f"GET http://127.0.0.1:{server.port}/customers/") for c in calls)
    first = _rows(spark, folder)
    assert first

    server.stop()
    server.stop = lambda: None                               # already stopped for the fixture
    seen = len(requests)
    shutil.rmtree(folder / "target")
    replayed = _dslc_run(flow, "--replay", str(recording))
    assert replayed.returncode == 0, replayed.stderr[-3000:]
    assert _rows(spark, folder) == first
    assert len(requests) == seen

    # a test case answers from the same recording (still no service)
    profile = service.customer("c01")
    result = run_case(flow, replay=recording, sources={
        "orders": [{"order_id": "x1", "customer_id": "c01", "amount": 5000.0, "country": "DE", "ts": "2026-11-01 12:00:00"}],
        "rule_updates": [{"rule_id": "r1", "op": "upsert", "country": "DE", "max_amount": 500}]},
        expect={"flagged": [{"order_id": "x1", "tier": profile["tier"], "risk": profile["risk"], "rule_id": "r1"}]})
    assert result.passed, result.report()
    assert len(requests) == seen
