"""A fused chain of three Python operators gives the same rows as the unfused job; a pushed-down
filter really cuts the calls the enrichment service receives."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from aiohttp import web
from jobs import run_flow

CASES = Path(__file__).resolve().parents[1] / "cases"
pytestmark = pytest.mark.spark


def _copy_case(name: str, tmp_path: Path) -> Path:
    shutil.copytree(CASES / name, tmp_path / name)
    return tmp_path / name / "pipeline.flow"


@pytest.mark.parametrize("chaining", [True, False])
def test_chained_python_operators(spark, tmp_path, chaining, capsys):
    flow = _copy_case("chained_python", tmp_path)
    flow.write_text(flow.read_text().replace("SINK per_device TO CONSOLE;", "SINK per_device TO JSON 'out' MODE OVERWRITE;"))
    run_flow(flow, chaining=chaining)
    rows = {r.device: r.n for r in spark.read.json(str(flow.parent / "out")).collect()}
    # independent: readings over their final threshold (d3 deleted, so never over)
    limits = {"d1": 5.0, "d2": 2.0}
    expected: dict[str, int] = {}
    for line in (flow.parent / "readings/r.csv").read_text().splitlines()[1:]:
        device, value = line.split(",")
        if device in limits and float(value) > limits[device]:
            expected[device] = expected.get(device, 0) + 1
    assert rows == expected
    assert "chain#1" in flow.with_name("job.py").read_text()
    assert ("chain#3" in flow.with_name("job.py").read_text()) is (not chaining)


def test_pushdown_cuts_calls(spark, serve_app, tmp_path):
    calls: list[str] = []

    async def customer(request):
        calls.append(request.match_info["id"])
        return web.json_response({"tier": "gold"})

    app = web.Application()
    app.router.add_get("/customers/{id}", customer)
    server = serve_app(app)
    amounts = [10.0, 600.0, 700.0, 20.0, 900.0, 30.0]
    for pushdown in (False, True):
        calls.clear()
        flow = _copy_case("pushdown", tmp_path / str(pushdown))
        flow.write_text(flow.read_text().replace("127.0.0.1:9", f"127.0.0.1:{server.port}"))
        (flow.parent / "orders").mkdir()
        (flow.parent / "orders/o.json").write_text("".join(
            json.dumps({"order_id": f"o{i}", "customer_id": f"c{i}", "amount": a, "note": "x"}) + "\n"
            for i, a in enumerate(amounts)))
        run_flow(flow, pushdown=pushdown)
        out = {r.order_id for r in spark.read.json(str(flow.parent / "out/big")).collect()}
        assert out == {f"o{i}" for i, a in enumerate(amounts) if a > 500}
        assert len(calls) == (3 if pushdown else len(amounts))
