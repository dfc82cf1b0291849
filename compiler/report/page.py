"""One self-contained HTML page of a run (`dslc run --report`, `dslc report`): the diagnosis, the
plan picture with each operator's figures, a table of every figure, latency histograms, in
flight and throughput over time, dead letters and their first error, NEAREST BY's probes and
index, each EXPECT's constraints (the worst first), STREAMING micro-batches.
Everything is inline (CSS, SVG); the page loads nothing."""
from __future__ import annotations

from html import escape
from typing import Any

from dslc.runtime.expect_figures import worst_first
from dslc.runtime.live_view import extra_columns
from dslc.runtime.metrics import money

from . import charts
from .plan import plan_svg

FIGURES = ("elements_in", "elements_out", "calls", "mean_batch_size", "retries", "timeouts", "misses", "errors",
           "dead_letters", "dropped", "cache_hits", "coalesced", "pushed_back", "max_in_flight", "capacity",
           "blocked_seconds", "p50_ms", "p95_ms", "p99_ms")

STYLE = """
body { font-family: sans-serif; margin: 24px; color: #222; background: #fff; }
h1 { font-size: 22px; } h2 { font-size: 17px; margin-top: 28px; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; font-size: 13px; } td, th { border: 1px solid #ccc; padding: 3px 7px; }
td.n { text-align: right; } .diagnosis { padding: 8px 12px; margin: 6px 0; border-left: 6px solid #888; background: #f5f5f5; }
.diagnosis.capacity { border-color: #e69b00; } .diagnosis.service { border-color: #c62828; }
.diagnosis.rate { border-color: #6a4fc7; } .diagnosis.provider { border-color: #ef6c00; } .diagnosis.cpu { border-color: #1f77b4; } .diagnosis.input { border-color: #2e7d32; }
.diagnosis.expectation { border-color: #00838f; } h3 { font-size: 14px; margin-bottom: 4px; }
.cause { font-weight: bold; text-transform: uppercase; } .plan svg { max-width: 100%; height: auto; }
.charts { display: flex; flex-wrap: wrap; gap: 12px; } .warning { color: #b71c1c; } .wide { overflow-x: auto; }
"""


def _table(headers: list[str], rows: list[list[Any]]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(
        f'<td class="n">{escape(str(v))}</td>' if isinstance(v, (int, float)) else f"<td>{escape('-' if v is None else str(v))}</td>"
        for v in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def calls_services(m: dict[str, Any]) -> bool:
    """True for an operator that calls a service (an ENRICH: it has a CAPACITY); a PROCESS only
    counts rows and errors, so the figures of calls mean nothing for it."""
    return bool(m.get("capacity"))


# the figures a PROCESS has (every other one is about calls)
ROW_FIGURES = ("elements_in", "elements_out", "errors")


def active_points(name: str, timeline: list[dict[str, Any]]) -> tuple[list[tuple[float, dict[str, Any]]], float | None]:
    """The timeline points of `name` while it was working: up to the first point after its figures
    last changed (the idle tail after its last call is left out), and when that tail ended (None
    when there is none)."""
    points = [(p["t"], p["operators"].get(name)) for p in timeline if p["operators"].get(name)]
    moving = ("elements_in", "elements_out", "calls", "in_flight")
    last = 0
    for i in range(1, len(points)):
        if any(points[i][1].get(k) != points[i - 1][1].get(k) for k in moving):
            last = i
    cut = points[:last + 2]
    return cut, (points[-1][0] if len(cut) < len(points) else None)


def _timeline_charts(name: str, timeline: list[dict[str, Any]], capacity: int | None) -> str:
    points, idle_until = active_points(name, timeline)
    if len(points) < 2:
        return ""
    xs = [t for t, _ in points]
    idle = f" (then idle until {idle_until:g} s)" if idle_until is not None else ""
    charts_html = ""
    if capacity:
        # CAPACITY is per task: the limit is CAPACITY times the tasks running the operator
        charts_html += charts.lines(f"{name}: in flight{idle}", xs, {
            "in flight": [m.get("in_flight") for _, m in points],
            f"limit (CAPACITY {capacity} x running tasks)": [m.get("limit") for _, m in points]})
    throughput = [None] + [max(0.0, (b.get("elements_out") or 0) - (a.get("elements_out") or 0)) / max(1e-9, tb - ta)
                           for (ta, a), (tb, b) in zip(points, points[1:])]
    series: dict[str, list] = {"rows out / s": throughput}
    if capacity:
        series["calls / s"] = [m.get("calls_per_s") for _, m in points]
    return charts_html + charts.lines(f"{name}: throughput{idle}", xs, series)


def _figures_table(operators: dict[str, dict[str, Any]]) -> str:
    """Every figure of every operator; a PROCESS's cells of call figures are left empty."""
    extras = extra_columns(list(operators.values()))
    keys = [k for k in FIGURES if any(k in m for m in operators.values())] + extras
    rows = [[name, *(m.get(k) if calls_services(m) or k in ROW_FIGURES else "" for k in keys)]
            for name, m in sorted(operators.items())]
    return '<div class="wide">' + _table(["operator", *keys], rows) + "</div>"


def _money_section(operators: dict[str, dict[str, Any]]) -> str:
    """What each priced operator spent (PRICE), its tokens and its provider batches' lines."""
    priced = [(name, m) for name, m in sorted(operators.items()) if m.get("cost_usd") is not None]
    if not priced:
        return ""
    rows = [[name, money(m["cost_usd"]), m.get("total_tokens", 0), m.get("calls", 0),
             m.get("batch_lines_done", 0), m.get("batch_lines_failed", 0)] for name, m in priced]
    if len(priced) > 1:
        rows.append(["all", money(sum(m["cost_usd"] for _, m in priced)), sum(r[2] for r in rows),
                     sum(r[3] for r in rows), sum(r[4] for r in rows), sum(r[5] for r in rows)])
    return ('<h2 id="money">Money</h2>' + _table(
        ["operator", "spent (at PRICE)", "tokens", "online calls", "batch lines answered", "batch lines failed"], rows))


# NEAREST BY's figures (runtime/vectors/probe.py, runtime/spark/nearest*.py): (metrics key, heading)
PROBE_FIGURES = (("elements_in", "rows probed"), ("probes", "probes"), ("candidates", "candidates ranked"),
                 ("matches", "rows matched"), ("probe_seconds", "probe s"), ("index_rows", "index rows"),
                 ("index_bytes", "index bytes"), ("index_builds", "index builds"),
                 ("index_build_seconds", "index build s"), ("index_version", "state version"))


def _probes(operators: dict[str, dict[str, Any]]) -> list[str]:
    """A table of the NEAREST BY probes: rows probed, candidates, the index and its builds."""
    probing = {name: m for name, m in operators.items() if "probes" in m}
    if not probing:
        return []
    keys = [(k, head) for k, head in PROBE_FIGURES if any(k in m for m in probing.values())]
    rows = [[name, *(m.get(k, "") for k, _ in keys)] for name, m in sorted(probing.items())]
    return ['<h2 id="nearest">NEAREST BY probes</h2>', _table(["operator", *(head for _, head in keys)], rows)]


def _outcome(outcome: dict[str, Any] | None) -> list[str]:
    """The run's outcome (runtime/spark/outcome.py): how it ended, rows read and written, dead
    letters with their top errors, answers by origin."""
    if not outcome:
        return []
    code = outcome.get("exit_code")
    parts = [f'<h2 id="outcome">Outcome: exit code {escape(str(code))} ({escape(str(outcome.get("ended", "")))}) '
             f'after {float(outcome.get("duration_s") or 0):.1f} s</h2>']
    if outcome.get("error"):
        parts.append(f'<p class="warning">{escape(outcome["error"])}</p>')
    rows = [["read", name, read.get("rows"), ""] for name, read in (outcome.get("sources") or {}).items()]
    rows += [["wrote", f"{s['stream']} (line {s['line']})", s.get("rows"), s.get("path") or ""]
             for s in outcome.get("sinks") or []]
    rows += [["dead letters", ", ".join(d["operators"]), d.get("rows"),
              "; ".join([d["path"]] + [f"{e['count']} × {e['error']}" for e in d.get("top_errors") or []])]
             for d in outcome.get("dead_letters") or []]
    answers = outcome.get("answers") or {}
    if answers.get("by_operator"):
        rows.append(["answers", "all ENRICH", None, ", ".join(f"{answers.get(k, 0)} {k}" for k in
                                                             ("calls", "cache", "store", "replay"))])
    if rows:
        parts.append(_table(["", "what", "rows", "where"], rows))
    return parts


def _expectations(section: dict[str, dict[str, Any]]) -> list[str]:
    """One table per EXPECT (by the stream it judges): each constraint, the worst first, with its
    action and its passed and failed rows."""
    if not section:
        return []
    parts = ['<h2 id="expectations">Expectations</h2>']
    for name, figures in section.items():
        parts.append(f"<h3>EXPECT ON {escape(name)} (line {figures['line']})</h3>"
                     f"<p>{figures['rows']} rows judged: {figures['passed']} passed, {figures['dropped']} dropped, "
                     f"{figures['quarantined']} quarantined</p>")
        rows = [[c["name"], c["line"], f"QUARANTINE '{c['path']}'" if c.get("path") else c["action"], c["passed"],
                 c["failed"], f"{100.0 * c['failed'] / figures['rows']:.1f}%" if figures["rows"] else "-"]
                for c in worst_first(figures["constraints"])]
        parts.append(_table(["constraint", "line", "action", "passed", "failed", "failed share"], rows))
    return parts


def render(document: dict[str, Any]) -> str:
    """The page of one metrics document (runtime/spark/metrics.publish)."""
    operators: dict[str, dict[str, Any]] = document.get("operators") or {}
    diagnoses = document.get("diagnosis") or []
    causes = {d["operator"]: d["cause"] for d in diagnoses}
    timeline = document.get("timeline") or []
    title = f"dslc run: {document.get('pipeline', '?')}"
    parts = [f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{escape(title)}</title>"
             f"<style>{STYLE}</style></head><body>",
             f"<h1>{escape(title)}</h1>",
             f"<p>finished {escape(str(document.get('finished_at', '?')))}, application "
             f"{escape(str(document.get('application_id') or '-'))}</p>"]
    parts += _outcome(document.get("outcome"))
    parts.append('<h2 id="diagnosis">What limits each ENRICH</h2>')
    if diagnoses:
        for d in diagnoses:
            parts.append(f'<div class="diagnosis {escape(d["cause"])}"><span class="cause">{escape(d["cause"])}</span> '
                         f'<b>{escape(d["operator"])}</b>: {escape(d["why"])}. <i>{escape(d["advice"])}</i></div>')
    else:
        parts.append("<p>No ENRICH saw any element.</p>")
    for warning in document.get("warnings") or []:
        parts.append(f'<p class="warning">warning: {escape(warning)}</p>')
    parts.append('<h2 id="plan">Plan</h2>')
    svg = plan_svg(document.get("plan_dot") or "", operators, causes)
    parts.append(f'<div class="plan">{svg}</div>' if svg else
                 "<p>(no plan picture: the metrics file holds none, or Graphviz's <code>dot</code> is missing)</p>")
    parts.append(_money_section(operators))
    parts.append('<h2 id="figures">Figures per operator</h2>')
    parts.append(_figures_table(operators))
    parts.append('<h2 id="latency">Latency</h2><div class="charts">')
    histograms = document.get("latency_histograms") or {}
    for name in sorted(operators):
        if histograms.get(name):
            parts.append(charts.histogram(f"{name}: latency", histograms[name]))
    parts.append("</div>")
    parts.append('<h2 id="over-time">In flight and throughput over time</h2><div class="charts">')
    for name in sorted(operators):
        parts.append(_timeline_charts(name, timeline, operators[name].get("capacity")))
    parts.append("</div>" + ("" if len(timeline) >= 2 else "<p>(the run was too short for a timeline)</p>"))
    parts.append('<h2 id="dead-letters">Dead letters and errors</h2>')
    rows = [[name, m.get("dead_letters", 0), m.get("errors", 0), m.get("timeouts", 0), m.get("first_error") or "-"]
            for name, m in sorted(operators.items()) if m.get("dead_letters") or m.get("errors") or m.get("timeouts")]
    parts.append(_table(["operator", "dead letters", "errors", "timeouts", "first error"], rows) if rows
                 else "<p>None: every element was answered.</p>")
    parts += _probes(operators)
    parts += _expectations(document.get("expectations") or {})
    batches = document.get("micro_batches") or []
    if batches:
        parts.append('<h2 id="micro-batches">STREAMING micro-batches</h2>')
        keys = sorted({k for b in batches for figures in b["figures"].values() for k in figures})
        parts.append(_table(["query", "batch", "input rows", *keys], [
            [b.get("query"), b.get("batch_id"), b.get("input_rows"),
             *(next((f[k] for f in b["figures"].values() if k in f), None) for k in keys)] for b in batches]))
    parts.append("</body></html>\n")
    return "".join(parts)
