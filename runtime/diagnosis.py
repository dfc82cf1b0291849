"""What limits each ENRICH: one line per operator, from the run's figures (docs/operations.md,
"Watching a run").

The figures, all added up over the operator's tasks (runtime/metrics.py):
- the window's fill: the mean number of elements in their calls (Little's law: the time
  elements spent in calls / the tasks' time) against CAPACITY, and the time the chain waited
  for room in the window (`blocked_seconds`);
- push-back: answers that were HTTP 429 or 5xx, and timeouts, per call;
- latency against load: the mean latency of the busiest seconds of the timeline against that of
  its quietest ones;
- waiting for RATE tokens against the time elements spent in their calls;
- the Python worker's CPU: its threads' time on a CPU or waiting for one, against the tasks' time.

The causes are checked in this order, the first that holds is the line: `provider` (TIER BATCH:
the provider's batches answered, and their window is what the run waited for), `rate`,
`service`, `cpu`, `capacity`, else `input` (calls finish faster than rows come).
"""
from __future__ import annotations

from typing import Any

CAUSES = ("capacity", "service", "rate", "input", "cpu", "provider")
RATE_SHARE = 0.3          # of the elements' time spent waiting for RATE tokens
PUSHBACK_SHARE = 0.02     # of calls answered 429 / 5xx or timed out
LATENCY_GROWTH = 2.0      # latency at the busiest seconds / at the quietest ones
CPU_SHARE = 0.8           # the worker busy (on a CPU or waiting for one) this share of the time
FULL = 0.5                # the window this full on average, or the chain blocked this share of the time


def _f(m: dict[str, Any], key: str) -> float:
    value = m.get(key)
    return float(value) if isinstance(value, (int, float)) else 0.0


def latency_growth(name: str, timeline: list[dict[str, Any]]) -> tuple[float, float] | None:
    """(mean latency ms at the quietest seconds, at the busiest ones) from the timeline's points:
    each second's calls' latency / its elements, sorted by the in-flight count then."""
    seconds = []
    for before, after in zip(timeline, timeline[1:]):
        a, b = before["operators"].get(name), after["operators"].get(name)
        if not a or not b:
            continue
        done = _f(b, "elements_out") - _f(a, "elements_out")
        spent = _f(b, "latency_seconds") - _f(a, "latency_seconds")
        if done > 0 and spent > 0:
            seconds.append((_f(b, "in_flight"), spent * 1000 / done))
    if len(seconds) < 4:
        return None
    seconds.sort()
    quarter = max(1, len(seconds) // 4)
    quiet = sum(ms for _, ms in seconds[:quarter]) / quarter
    busy = sum(ms for _, ms in seconds[-quarter:]) / quarter
    if seconds[-1][0] <= seconds[0][0]:      # the load never changed: nothing to compare
        return None
    return round(quiet, 3), round(busy, 3)


def diagnose(name: str, m: dict[str, Any], timeline: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The diagnosis of one ENRICH from its merged summary `m` (with p50_ms): the cause, the
    figures that decided it, what to change, and the line `dslc run` prints."""
    tasks_s = max(_f(m, "task_seconds"), 1e-9)
    calls, elements = _f(m, "calls"), _f(m, "elements_in")
    capacity = int(_f(m, "capacity")) or None
    in_calls_s = _f(m, "latency_seconds")
    rate_wait = _f(m, "rate_wait_seconds")
    mean_in_flight = in_calls_s / tasks_s
    fill = mean_in_flight / capacity if capacity else 0.0
    blocked = _f(m, "blocked_seconds") / tasks_s
    pushed = _f(m, "pushed_back") + _f(m, "timeouts")
    pushed_share = pushed / calls if calls else 0.0
    cpu = _f(m, "cpu_seconds") / tasks_s
    growth = latency_growth(name, timeline or [])
    figures = {"mean_in_flight": round(mean_in_flight, 2), "capacity": capacity, "window_fill": round(fill, 3),
               "blocked_share": round(blocked, 3), "pushed_back": int(pushed), "pushed_back_share": round(pushed_share, 3),
               "rate_wait_share": round(rate_wait / in_calls_s, 3) if in_calls_s else 0.0, "cpu_share": round(cpu, 3),
               "p50_ms": m.get("p50_ms"), "p99_ms": m.get("p99_ms"), "elements": int(elements), "calls": int(calls)}
    if growth:
        figures["latency_quiet_ms"], figures["latency_busy_ms"] = growth
    lines = _f(m, "batch_lines")
    if lines:
        cause = "provider"
        why = (f"the provider's batches answered {int(_f(m, 'batch_lines_done'))} of {int(lines)} lines "
               f"({int(_f(m, 'batch_lines_failed'))} failed) before the pass; the run waited for their window")
        advice = "the provider's batch window is the limit: TIER FLEX answers online, within minutes, at the same price"
    elif in_calls_s and rate_wait >= RATE_SHARE * in_calls_s:
        cause = "rate"
        why = f"elements spent {figures['rate_wait_share']:.0%} of their time waiting for RATE tokens"
        advice = "RATE is the limit: raise it if the service allows more, else this is as fast as it may go"
    elif calls and pushed_share >= PUSHBACK_SHARE:
        cause = "service"
        why = (f"{int(pushed)} of {int(calls)} calls ({pushed_share:.0%}) were answered 429/5xx or timed out; "
               f"p50 {m.get('p50_ms')} ms, p99 {m.get('p99_ms')} ms")
        advice = "the service is overloaded: lower CAPACITY or add ADAPTIVE, add RATE, or scale the service"
    elif growth and growth[1] >= LATENCY_GROWTH * growth[0] and fill >= FULL / 2:
        cause = "service"
        why = f"latency grew with load: {growth[0]} ms at the quietest seconds, {growth[1]} ms at the busiest"
        advice = "the service slows down under this load: more CAPACITY will not help; use ADAPTIVE or scale the service"
    elif cpu >= CPU_SHARE:
        cause = "cpu"
        why = (f"the Python worker's threads were on a CPU or waiting for one {cpu:.1f}x the task's time; "
               f"the window held {mean_in_flight:.1f} of {capacity}")
        advice = ("the worker's CPU is the limit: more partitions or executors (spark.default.parallelism), "
                  "BATCH for cheaper calls, or cheaper PROCESS code in the chain")
    elif capacity and (fill >= FULL or blocked >= FULL):
        cause = "capacity"
        why = (f"the window held {mean_in_flight:.1f} of {capacity} on average and rows waited for room "
               f"{blocked:.0%} of the time, with no push-back (p50 {m.get('p50_ms')} ms)")
        advice = f"raise CAPACITY (e.g. to {capacity * 2}) or add ADAPTIVE; the service answers quickly"
    else:
        cause = "input"
        why = (f"the window held {mean_in_flight:.1f} of {capacity} on average; "
               f"calls finish faster than rows arrive (p50 {m.get('p50_ms')} ms)")
        advice = "the input is the limit: more input partitions (more files, a repartition) or a faster upstream"
    return {"operator": name, "cause": cause, "figures": figures, "why": why, "advice": advice,
            "line": f"dslc: {name}: {cause}: {why}; {advice}"}


def diagnose_all(operators: dict[str, dict[str, Any]], timeline: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """A diagnosis per ENRICH (an operator with a CAPACITY) that saw elements."""
    return [diagnose(name, m, timeline) for name, m in sorted(operators.items())
            if m.get("capacity") and m.get("elements_in")]
