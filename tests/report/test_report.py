"""The run report: `dslc run --report` and `dslc report` write one self-contained page, which
headless Chromium opens with no network, shows (its DOM) and draws (a screenshot that is not
blank)."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from browser import chromium, dump_dom, screenshot

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from bench.diagnosis import Service, write_case  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.skipif(chromium() is None, reason="chromium missing: .ci/install")]


@pytest.fixture(scope="module")
def reported(tmp_path_factory):
    """A real run (CAPACITY 2 against a 100 ms service) with --report, and its metrics file."""
    folder = tmp_path_factory.mktemp("report")
    service = Service()
    try:
        flow = write_case("capacity", folder / "flow", service.port)
        env = {k: v for k, v in os.environ.items() if k not in ("DSLC_FLOW_FOLDER", "SPARK_REMOTE")}
        env["DSLC_METRICS_FILE"] = str(folder / "metrics.json")
        page = folder / "run.html"
        done = subprocess.run([sys.executable, "-m", "dslc.compiler.cli", "run", str(flow), "--report", str(page)],
                              env=env, capture_output=True, text=True, timeout=500)
    finally:
        service.stop()
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"dslc: report written to {page}" in done.stderr
    return page, folder / "metrics.json"


def _pixels(png: Path) -> tuple[int, float]:
    """Distinct colours and the share of pixels that are not the page's white."""
    from PIL import Image

    image = Image.open(png).convert("RGB")
    colours = image.getcolors(maxcolors=1 << 20) or []
    white = next((n for n, c in colours if c == (255, 255, 255)), 0)
    return len(colours), 1 - white / (image.width * image.height)


def test_the_page_shows_the_run(reported):
    page, _ = reported
    html = page.read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", html)     # nothing to load
    dom = dump_dom(page)
    assert "dslc run: induce_capacity" in dom
    assert re.search(r'class="diagnosis capacity"><span class="cause">capacity</span> <b>enriched</b>', dom)
    assert "raise CAPACITY" in dom
    # the plan picture, inline, with the operator's figures on it
    plan = dom[dom.index('<div class="plan">'):]
    assert "<svg" in plan[:200] and "calls 40" in plan and "limited by: capacity" in plan
    assert dom.count('class="bar"') >= 1                  # the latency histogram
    assert "enriched: in flight" in dom and "enriched: throughput" in dom
    assert dom.count('class="series"') >= 4               # in flight, limit, rows out/s, calls/s


def test_the_page_draws(reported, tmp_path):
    page, _ = reported
    colours, inked = _pixels(screenshot(page, tmp_path / "page.png"))
    assert colours >= 8 and inked >= 0.03, (colours, inked)


def test_dslc_report_makes_the_same_page_from_the_metrics_file(reported, tmp_path):
    page, metrics = reported
    document = json.loads(metrics.read_text())
    assert document["diagnosis"][0]["cause"] == "capacity" and "plan_dot" in document
    again = tmp_path / "again.html"
    done = subprocess.run([sys.executable, "-m", "dslc.compiler.cli", "report", str(metrics), "-o", str(again)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert again.read_text() == page.read_text()


def test_dead_letters_and_their_errors_are_on_the_page(tmp_path):
    from dslc.compiler.report.page import render

    document = {"pipeline": "p", "operators": {"enriched": {
        "elements_in": 10, "elements_out": 7, "calls": 12, "errors": 3, "dead_letters": 3, "capacity": 4,
        "first_error": "error: CallError: HTTP 500 from http://127.0.0.1/x: boom"}},
        "latency_histograms": {"enriched": {"60": 10}}, "diagnosis": [], "warnings": []}
    page = tmp_path / "p.html"
    page.write_text(render(document))
    dom = dump_dom(page)
    section = dom[dom.index('id="dead-letters"'):]
    assert "HTTP 500 from http://127.0.0.1/x: boom" in section and "<td class=\"n\">3</td>" in section
