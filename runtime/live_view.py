"""What live progress shows per operator, from the figures the driver's collector added up: the
rows of the refreshing table (`dslc run` on a terminal) and the line printed every 10 s otherwise.

No Spark here: `dslc run` renders the same rows the job's driver computed (compiler/cli/live.py).
"""
from __future__ import annotations

from typing import Any

from dslc.runtime.expect_figures import live_lines
from dslc.runtime.metrics import extra_counters, money, percentile_ms

# (key, heading) of the table, in order; counters other parts of the runtime report (answer-store
# hits, tokens) follow as extra columns when an operator has them, see `extra_columns`
COLUMNS: tuple[tuple[str, str], ...] = (
    ("elements_in", "in"), ("elements_out", "out"), ("in_flight", "in flight"), ("calls", "calls"),
    ("calls_per_s", "calls/s"), ("p50_ms", "p50 ms"), ("p99_ms", "p99 ms"), ("errors", "errors"),
    ("retries", "retries"), ("cache_hits", "cache hits"),
)
_SHOWN = {key for key, _ in COLUMNS} | {"limit", "tasks"}
# figures every operator has that are not worth a live column
_HIDDEN = {"elements_called", "timeouts", "prompt_tokens", "completion_tokens", "misses", "dead_letters", "dropped", "failures", "cache_misses",
           "coalesced", "pushed_back", "max_in_flight", "capacity", "blocked_seconds", "latency_seconds",
           "task_seconds", "cpu_seconds", "tasks_running"}


def operator_row(name: str, totals: dict[str, Any], in_flight: int, limit: int, calls_per_s: float,
                 tasks: int = 1) -> dict[str, Any]:
    """One operator's live figures (totals: its tasks' metrics added up, runtime/metrics.merge);
    `limit` is the CAPACITY of the `tasks` running it, added up."""
    histogram = totals.get("latency_histogram") or {}
    row = {**{k: v for k, v in totals.items() if k != "latency_histogram"}, "operator": name}
    row.update(in_flight=in_flight, limit=limit, tasks=tasks, calls_per_s=round(calls_per_s, 1),
               p50_ms=percentile_ms(histogram, 0.50), p99_ms=percentile_ms(histogram, 0.99))
    return row


# counters of some kinds of ENRICH only (the answer store, MODEL / EMBEDDING): a column when an
# operator has a non-zero one
# and the seconds elements waited to be let through (RATE, TOKENS PER MINUTE), beside the latency
OPTIONAL: tuple[str, ...] = ("rate_wait_seconds", "store_hits", "unanswered", "throttled", "total_tokens", "cost_usd")


def extra_columns(rows: list[dict[str, Any]]) -> list[str]:
    """Columns beyond the standard ones: the OPTIONAL counters some operator has, then counters no
    one here knows (whatever a kind of call or wrapper adds), as they come."""
    optional = [k for k in OPTIONAL if any(row.get(k) for row in rows)]
    unknown = [k for k in extra_counters(*rows) if k not in _SHOWN and k not in _HIDDEN and k not in OPTIONAL]
    return optional + unknown


def cell(row: dict[str, Any], key: str) -> str:
    """A figure as the table shows it; in flight against the limit as 'n/CAPACITY', and as
    'n/TASKSxCAPACITY' while several tasks run the operator (CAPACITY is per task: 0/2x16, not
    a 0/32 that no clause of the file says)."""
    if key == "in_flight":
        limit, tasks = row.get("limit"), row.get("tasks") or 1
        if not limit:
            return "-"
        if tasks > 1 and limit % tasks == 0:
            return f"{row.get('in_flight', 0)}/{tasks}x{limit // tasks}"
        return f"{row.get('in_flight', 0)}/{limit}"
    value = row.get(key)
    if value is None:
        return "-"
    if key == "cost_usd":
        return money(value)
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def format_elapsed(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def format_line(view: dict[str, Any]) -> str:
    """The line printed every 10 s when the output is not a terminal."""
    rows = view.get("rows") or []
    keys = [k for k, _ in COLUMNS] + extra_columns(rows)
    parts = [f"{row['operator']} " + " ".join(f"{k}={cell(row, k)}" for k in keys) for row in rows]
    parts += live_lines(view.get("expectations") or {})
    return f"dslc: progress {format_elapsed(view.get('elapsed', 0))} " + ("; ".join(parts) or "waiting for tasks")
