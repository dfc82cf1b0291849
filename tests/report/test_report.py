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


# ---- pages made from a metrics document (#48 items 15 and 23) --------------------------------

def _page(tmp_path: Path, document: dict) -> str:
    from dslc.compiler.report.page import render

    page = tmp_path / "p.html"
    page.write_text(render({"pipeline": "p", "diagnosis": [], "warnings": [], **document}))
    return dump_dom(page)


def test_latency_ticks_are_read_as_durations_and_the_last_is_not_cut(tmp_path):
    """`2.2e+03` was drawn from the last bar's left edge and cut to `2.2` by the chart's border."""
    from dslc.compiler.report.charts import WIDTH, histogram
    from dslc.runtime.metrics import bucket_upper_ms

    svg = histogram("e: latency", {"40": 3, "60": 5, "84": 2})   # 0.1 ms ... about 2.2 s
    ticks = re.findall(r'<text x="([\d.]+)" y="158" font-size="10" font-family="sans-serif" '
                       r'text-anchor="(\w+)">([^<]+)</text>', svg)
    assert [t[1] for t in ticks] == ["start", "middle", "end"] and "e+" not in svg
    assert ticks[-1][2] == f"{bucket_upper_ms(84) / 1000:.3g} s" and float(ticks[-1][0]) <= WIDTH - 8
    assert ticks[0][2].endswith(" ms")


def test_time_charts_leave_out_the_idle_tail_and_name_capacity_per_task(tmp_path):
    """The tickets example's charts were mostly the 23 s after the last call, and the limit line
    read 32 for CAPACITY 16 (two tasks)."""
    busy = [{"t": float(t), "operators": {"e": {"elements_in": 4 * t, "elements_out": 4 * t, "calls": 4 * t,
                                                  "in_flight": 2, "limit": 32, "tasks": 2, "calls_per_s": 4}}}
            for t in range(1, 6)]
    idle = [{"t": float(t), "operators": {"e": {"elements_in": 20, "elements_out": 20, "calls": 20,
                                                  "in_flight": 0, "limit": 0, "calls_per_s": 0}}}
            for t in range(6, 30)]
    dom = _page(tmp_path, {"operators": {"e": {"elements_in": 20, "elements_out": 20, "calls": 20, "capacity": 16}},
                           "timeline": busy + idle})
    charts = dom[dom.index('id="over-time"'):dom.index('id="dead-letters"')]
    assert "e: in flight (then idle until 29 s)" in charts and "limit (CAPACITY 16 x running tasks)" in charts
    ends = re.findall(r'text-anchor="end">([\d.]+)</text>', charts)
    assert ends and set(ends) == {"7"}           # the x axes end a point after the last change, not at 29


def test_a_process_shows_no_call_figures(tmp_path):
    """A PROCESS's merged figures hold zero calls, retries, latency...: the table, the plan box and
    the charts showed them as if it made calls."""
    from dslc.compiler.report.plan import with_figures

    process = {"elements_in": 9, "elements_out": 9, "errors": 0, "calls": 0, "retries": 0, "capacity": 0,
               "max_in_flight": 0, "p50_ms": None}
    enrich = {"elements_in": 9, "elements_out": 9, "errors": 0, "calls": 9, "retries": 1, "capacity": 4,
              "max_in_flight": 3, "p50_ms": 12.0}
    timeline = [{"t": float(t), "operators": {"checked": {"elements_in": t, "elements_out": t, "in_flight": 0,
                                                          "limit": 0, "calls": 0}}} for t in range(1, 5)]
    dom = _page(tmp_path, {"operators": {"checked": process, "enriched": enrich}, "timeline": timeline})
    table = dom[dom.index('id="figures"'):dom.index('id="latency"')]
    heads = re.findall(r"<th>([^<]+)</th>", table)
    checked = re.search(r"<tr><td>checked</td>(.*?)</tr>", table).group(1)
    cells = dict(zip(heads[1:], re.findall(r"<td[^>]*>([^<]*)</td>", checked)))
    assert cells["elements_in"] == "9" and cells["calls"] == "" and cells["retries"] == "" and cells["capacity"] == ""
    charts = dom[dom.index('id="over-time"'):dom.index('id="dead-letters"')]
    assert "checked: throughput" in charts and "checked: in flight" not in charts and "calls / s" not in charts
    dot = '  "checked" [label="checked\\nProcess"];\n'
    assert "calls" not in with_figures(dot, {"checked": process}, {})


def test_an_operator_named_with_a_quote_gets_its_figures(tmp_path):
    from dslc.compiler.optimizer.explain import render_physical
    from dslc.compiler.pipeline import check_text
    from dslc.compiler.report.plan import with_figures

    plan = check_text("SOURCE o FROM JSON 'in/' SCHEMA (k STRING);\n"
                      "STREAM `say \"hi\"` = ENRICH o WITH HTTP GET 'http://127.0.0.1:9/{k}' RETURNS (v STRING);\n"
                      "SINK `say \"hi\"` TO CONSOLE;\n", str(tmp_path / "p.flow"))
    dot = render_physical(plan, "dot")
    assert '"say \\"hi\\""' in dot
    drawn = with_figures(dot, {'say "hi"': {"elements_in": 5, "elements_out": 5, "calls": 5, "capacity": 100}}, {})
    assert "in 5  out 5\\ncalls 5" in drawn


def test_the_money_spent_is_on_the_page(tmp_path):
    dom = _page(tmp_path, {"operators": {
        "labelled": {"elements_in": 1500, "elements_out": 1500, "calls": 2, "capacity": 8, "cost_usd": 0.01234,
                     "total_tokens": 50000, "batch_lines_done": 450, "batch_lines_failed": 1},
        "looked": {"elements_in": 10, "elements_out": 10, "calls": 10, "capacity": 4, "cost_usd": 0.5}}})
    section = dom[dom.index('id="money"'):dom.index('id="figures"')]
    assert "$0.0123" in section and "$0.5000" in section and "$0.5123" in section      # each, and all
    assert '<td class="n">450</td>' in section
    assert 'id="money"' not in _page(tmp_path, {"operators": {"e": {"elements_in": 1, "capacity": 2}}})


def test_each_expect_has_a_table_the_worst_constraint_first(tmp_path):
    """#45: per stream its constraints, the one failing the most rows first, and the diagnosis of
    the one that removes the most."""
    from dslc.runtime.expect_figures import diagnoses

    section = {"labelled": {"line": 7, "runs": "chain#1", "rows": 40, "passed": 31, "dropped": 3, "quarantined": 6,
                            "constraints": [
                                {"name": "has_ticket", "line": 10, "action": "FAIL", "passed": 40, "failed": 0},
                                {"name": "known_category", "line": 8, "action": "QUARANTINE",
                                 "path": "target/quarantine/labelled", "passed": 34, "failed": 6},
                                {"name": "urgency_range", "line": 9, "action": "DROP", "passed": 37, "failed": 3}]}}
    dom = _page(tmp_path, {"operators": {}, "expectations": section, "diagnosis": diagnoses(section)})
    tables = dom[dom.index('id="expectations"'):]
    assert "EXPECT ON labelled (line 7)" in tables and "40 rows judged: 31 passed, 3 dropped, 6 quarantined" in tables
    order = [tables.index(name) for name in ("known_category", "urgency_range", "has_ticket")]
    assert order == sorted(order)                                   # the worst first
    assert "QUARANTINE 'target/quarantine/labelled'" in tables and "15.0%" in tables
    assert re.search(r'class="diagnosis expectation"><span class="cause">expectation</span> '
                     r'<b>EXPECT ON labelled</b>: constraint known_category \(line 8, QUARANTINE\) fails the most '
                     r'rows: 6 of 40 \(15.0%\)', dom)


def test_nearest_by_probes_have_a_table(tmp_path):
    """#47: rows probed, candidates ranked, the index's size and its builds (a BROADCAST's latest
    version); an operator without probes is not in it."""
    nearest = {"elements_in": 40, "elements_out": 118, "probes": 39, "candidates": 2340, "matches": 117,
               "probe_seconds": 0.012, "index_rows": 51, "index_bytes": 1632, "index_builds": 2,
               "index_build_seconds": 0.003, "index_version": 70}
    enrich = {"elements_in": 9, "elements_out": 9, "calls": 9, "capacity": 4}
    dom = _page(tmp_path, {"operators": {"matched": nearest, "enriched": enrich}})
    table = dom[dom.index('id="nearest"'):]
    heads = re.findall(r"<th>([^<]+)</th>", table)
    assert heads[:5] == ["operator", "rows probed", "probes", "candidates ranked", "rows matched"]
    cells = dict(zip(heads[1:], re.findall(r"<td[^>]*>([^<]*)</td>", re.search(r"<tr><td>matched</td>(.*?)</tr>",
                                                                             table).group(1))))
    assert cells["candidates ranked"] == "2340" and cells["index builds"] == "2" and cells["state version"] == "70"
    assert "<td>enriched</td>" not in table.split("</table>")[0]
    assert 'id="nearest"' not in _page(tmp_path, {"operators": {"enriched": enrich}})
