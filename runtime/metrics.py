"""Per-operator metrics as plain JSON-able dicts, so the driver can add up many tasks.

Counters add; `max_in_flight` takes the maximum; the latency histogram uses fixed logarithmic
buckets (a factor of 2**(1/4), about 19 %, per bucket) so histograms of different tasks merge
by adding bucket counts, and percentiles are read from the merged histogram.
"""
from __future__ import annotations

import math
from typing import Any

COUNTERS: tuple[str, ...] = (
    "elements_in", "elements_out", "calls", "elements_called", "retries", "timeouts", "misses", "errors",
    "dead_letters", "dropped", "failures", "cache_hits", "cache_misses", "coalesced",
    # MODEL and EMBEDDING: answers refused with 429, and the tokens every answer reported
    "throttled", "prompt_tokens", "completion_tokens", "total_tokens",
    # STORE: answers found in the answer store (of them, joined to their rows by Spark); BUDGET:
    # rows left unanswered
    "store_hits", "store_joined", "unanswered",
    "pushed_back",   # answers that were HTTP 429 or 5xx (retried ones too): the service pushing back
    "answered_429", "elements_5xx",   # of them: 429 answers, and elements that got a 5xx (runtime/diagnosis.py)
    "outage_held",   # calls that failed while the service was down, their elements held by ON OUTAGE
)
_MAX_FIELDS: tuple[str, ...] = ("max_in_flight", "capacity")
# NEAREST BY's index, where one was built: the largest, and the latest BROADCAST version indexed
_INDEX_FIELDS: tuple[str, ...] = ("index_rows", "index_bytes", "index_version")
# seconds, added up over tasks: time the chain waited for room in the window, time elements spent
# in their calls (Little's law: / task_seconds = the mean in flight), waiting to be let through
# (RATE's tokens, TOKENS PER MINUTE, a limit the service stated: not part of the latency), and
# each task's wall and CPU time (the figures the diagnosis reads, runtime/diagnosis.py)
_FLOAT_FIELDS: tuple[str, ...] = ("blocked_seconds", "latency_seconds", "rate_wait_seconds", "task_seconds",
                                  "cpu_seconds")

MAX_MESSAGES = 20          # error messages counted apart per operator; the rest as OTHER_ERRORS
OTHER_ERRORS = "(other errors)"

_BASE = 2 ** 0.25          # bucket width factor
_MIN_MS = 0.01             # bucket 0 holds everything up to 10 µs
_MIN_S = _MIN_MS / 1000.0
_LAST_BUCKET = 160         # 0.01 ms * 2**40 ≈ 127 days: plenty


def bucket_of(latency_s: float) -> int:
    """The histogram bucket of a latency in seconds."""
    if latency_s <= _MIN_S:
        return 0
    return min(_LAST_BUCKET, math.ceil(math.log(latency_s / _MIN_S, _BASE)))


def bucket_upper_ms(index: int) -> float:
    """Upper bound, in milliseconds, of histogram bucket `index`."""
    return _MIN_MS * _BASE ** index


class Histogram:
    """Latency histogram over fixed log buckets."""

    __slots__ = ("counts", "total_s")

    def __init__(self) -> None:
        self.counts = [0] * (_LAST_BUCKET + 1)   # by bucket index: one per element, so no dict
        self.total_s = 0.0                       # the latencies added up

    def record(self, latency_s: float) -> None:
        """Count one latency (an answer within 10 µs, as from memory, without a logarithm)."""
        self.counts[0 if latency_s <= _MIN_S else bucket_of(latency_s)] += 1
        self.total_s += latency_s

    def to_dict(self) -> dict[str, int]:
        """JSON form: bucket index (as a string key) -> count, for the buckets that have any."""
        return {str(index): count for index, count in enumerate(self.counts) if count}


def percentile_ms(histogram: dict[str, int], q: float) -> float | None:
    """The q-quantile (0 < q <= 1) in milliseconds, as the upper bound of its bucket."""
    total = sum(histogram.values())
    if total == 0:
        return None
    rank = max(1, math.ceil(q * total))
    seen = 0
    for key in sorted(histogram, key=int):
        seen += histogram[key]
        if seen >= rank:
            return round(bucket_upper_ms(int(key)), 3)
    return round(bucket_upper_ms(max(int(k) for k in histogram)), 3)  # pragma: no cover


class OperatorMetrics:
    """Mutable metrics of one operator instance (one task)."""

    def __init__(self, operator: str) -> None:
        self.operator = operator
        self.counters: dict[str, int] = dict.fromkeys(COUNTERS, 0)
        self.max_in_flight = 0
        self.blocked_seconds = 0.0
        self.rate_wait_seconds = 0.0     # waiting for RATE's tokens (the bucket's total)
        self.call_wait_seconds = 0.0     # ... and, inside calls, for TOKENS PER MINUTE or a limit the service stated
        self.latency = Histogram()
        self.first_error: str | None = None
        self.cost_usd: float | None = None     # PRICE: the money this task's calls cost (limits/money.py)
        self.error_messages: dict[str, int] = {}    # "class: message" -> elements that ended so
        self.model_change: str | None = None        # "before -> now": the answering model changed (#46)
        self.usage_estimated = 0     # answers whose service reported no token usage (or 0): counted from the request

    def note_error(self, message: str | None, label: str | None = None) -> None:
        """Keep the first error (or timeout) of this task, for the end-of-run warning, and count
        the element under `label` ("class: message" without the element's own values), for the
        run's summary and diagnosis (at most MAX_MESSAGES labels; the rest as OTHER_ERRORS)."""
        if message is not None and self.first_error is None:
            self.first_error = message[:500]
        if label is not None:
            counts = self.error_messages
            label = label[:300]
            if label not in counts and len(counts) >= MAX_MESSAGES:
                label = OTHER_ERRORS
            counts[label] = counts.get(label, 0) + 1

    def add(self, counter: str, n: int = 1) -> None:
        """Increment a counter."""
        self.counters[counter] += n

    def in_flight(self, n: int) -> None:
        """Note the current number of in-flight elements."""
        if n > self.max_in_flight:
            self.max_in_flight = n

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able snapshot."""
        return {
            "operator": self.operator,
            **self.counters,
            "max_in_flight": self.max_in_flight,
            "blocked_seconds": round(self.blocked_seconds, 6),
            "latency_seconds": round(self.latency.total_s, 6),
            "rate_wait_seconds": round(self.rate_wait_seconds + self.call_wait_seconds, 6),   # not in latency
            "latency_histogram": self.latency.to_dict(),
            **({"first_error": self.first_error} if self.first_error is not None else {}),
            **({"cost_usd": round(self.cost_usd, 9)} if self.cost_usd is not None else {}),
            **({"error_messages": dict(self.error_messages)} if self.error_messages else {}),
            **({"model_change": self.model_change} if self.model_change is not None else {}),
            **({"usage_estimated": self.usage_estimated} if self.usage_estimated else {}),
        }


def merge(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Metrics of two tasks of the same operator, added up."""
    out: dict[str, Any] = {"operator": a.get("operator") or b.get("operator")}
    for key in COUNTERS:
        out[key] = int(a.get(key, 0)) + int(b.get(key, 0))
    for key in extra_counters(a, b):    # counters other parts of the runtime add (store hits, tokens)
        out[key] = a.get(key, 0) + b.get(key, 0)
    for key in _MAX_FIELDS:
        out[key] = max(int(a.get(key, 0)), int(b.get(key, 0)))
    for key in _INDEX_FIELDS:
        if key in a or key in b:
            out[key] = max(int(a.get(key, 0)), int(b.get(key, 0)))
    for key in _FLOAT_FIELDS:
        out[key] = round(float(a.get(key, 0.0)) + float(b.get(key, 0.0)), 6)
    hist: dict[str, int] = dict(a.get("latency_histogram", {}))
    for k, v in b.get("latency_histogram", {}).items():
        hist[k] = hist.get(k, 0) + v
    out["latency_histogram"] = {k: hist[k] for k in sorted(hist, key=int)}
    first_error = a.get("first_error") or b.get("first_error")
    if first_error:
        out["first_error"] = first_error
    messages = merge_messages(a.get("error_messages") or {}, b.get("error_messages") or {})
    if messages:
        out["error_messages"] = messages
    change = a.get("model_change") or b.get("model_change")
    if change:
        out["model_change"] = change
    return out


def merge_messages(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    """Two tasks' error counts by message, added up; the MAX_MESSAGES most frequent kept, the
    others counted as OTHER_ERRORS."""
    counts = dict(a)
    for label, n in b.items():
        counts[label] = counts.get(label, 0) + int(n)
    if len(counts) <= MAX_MESSAGES:
        return counts
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    kept = dict(ranked[:MAX_MESSAGES - 1])
    kept[OTHER_ERRORS] = kept.get(OTHER_ERRORS, 0) + sum(n for label, n in ranked[MAX_MESSAGES - 1:])
    return kept


def top_errors(messages: dict[str, int], n: int = 3) -> list[tuple[str, int]]:
    """The `n` most frequent error messages with their counts, most frequent first."""
    return sorted(messages.items(), key=lambda item: (-item[1], item[0]))[:n]


_KNOWN = frozenset(("operator", "latency_histogram", "first_error", "error_messages", *COUNTERS, *_MAX_FIELDS,
                    *_INDEX_FIELDS,
                    *_FLOAT_FIELDS))


def extra_counters(*items: dict[str, Any]) -> list[str]:
    """Numeric fields no one here knows, in order of appearance: counters a kind of call or a
    wrapper reports beside the standard ones (answer-store hits, tokens); they add up like them."""
    seen: dict[str, None] = {}
    for item in items:
        for key, value in item.items():
            if key not in _KNOWN and isinstance(value, (int, float)) and not isinstance(value, bool) \
                    and not key.endswith("_ms") and key not in ("in_flight", "mean_batch_size"):
                seen[key] = None
    return list(seen)


def merge_all(items: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Metrics of many tasks, merged per operator name."""
    merged: dict[str, dict[str, Any]] = {}
    for item in items:
        name = item.get("operator", "?")
        merged[name] = merge(merged[name], item) if name in merged else merge({}, item)
    return merged


def summary(d: dict[str, Any]) -> dict[str, Any]:
    """Metrics without the raw histogram, with p50/p95/p99 latency in milliseconds."""
    out = {k: v for k, v in d.items() if k != "latency_histogram"}
    hist = d.get("latency_histogram", {})
    for name, q in (("p50_ms", 0.50), ("p95_ms", 0.95), ("p99_ms", 0.99)):
        out[name] = percentile_ms(hist, q)
    if d.get("calls"):   # elements per call: 1 without BATCH (retries included), more with it
        out["mean_batch_size"] = round(d.get("elements_called", 0) / d["calls"], 2)
    return out


def format_summary(d: dict[str, Any]) -> str:
    """One human-readable line per operator for logs and the CLI."""
    s = summary(d)
    parts = [f"{k}={s[k]}" for k in ("elements_in", "elements_out", "calls", "mean_batch_size", "retries", "timeouts",
                                     "misses", "errors", "dead_letters", "dropped", "cache_hits",
                                     "coalesced", "max_in_flight", "blocked_seconds",
                                     "p50_ms", "p95_ms", "p99_ms") if k in s]
    if s.get("rate_wait_seconds"):          # waiting to be let through: apart from the latency
        parts.append(f"rate_wait_seconds={s['rate_wait_seconds']}")
    if s.get("total_tokens") or s.get("throttled"):     # MODEL, EMBEDDING
        parts += [f"{k}={s[k]}" for k in ("throttled", "prompt_tokens", "completion_tokens", "total_tokens")]
    return f"{s.get('operator', '?')}: " + " ".join(parts)


TABLE_COLUMNS: tuple[str, ...] = (
    "elements_in", "elements_out", "calls", "mean_batch_size", "retries", "timeouts", "misses", "errors", "dead_letters",
    "cache_hits", "max_in_flight", "blocked_seconds", "p50_ms", "p99_ms")


#: shown when some operator spent tokens (MODEL, EMBEDDING)
TOKEN_COLUMNS: tuple[str, ...] = ("throttled", "prompt_tokens", "completion_tokens", "total_tokens")


def table_columns(metrics: dict[str, dict[str, Any]]) -> tuple[str, ...]:
    """The table's columns: the seconds waited to be let through when some operator waited (RATE,
    TOKENS PER MINUTE), the token columns only when some operator reported tokens or 429s, the
    money column when some operator has a PRICE."""
    columns = TABLE_COLUMNS
    if any(m.get("rate_wait_seconds") for m in metrics.values()):     # beside the latency it is not part of
        columns += ("rate_wait_seconds",)
    if any(m.get("total_tokens") or m.get("throttled") for m in metrics.values()):
        columns += TOKEN_COLUMNS
    if any(m.get("cost_usd") is not None for m in metrics.values()):
        columns += ("cost_usd",)
    return columns


def format_table(metrics: dict[str, dict[str, Any]]) -> str:
    """The per-operator summary table printed at the end of a run (summaries, see `summary`)."""
    columns = table_columns(metrics)
    width = max(len("operator"), *(len(n) for n in metrics))
    head = "operator".ljust(width) + "  " + "  ".join(columns)
    lines = ["dslc: per-operator metrics", head]
    for name in sorted(metrics):
        m = metrics[name]
        cells = ("-" if m.get(c) is None else money(m[c]) if c == "cost_usd" else str(m[c])   # no calls: no latency
                 for c in columns)
        lines.append(name.ljust(width) + "  " + "  ".join(cell.rjust(len(c)) for cell, c in zip(cells, columns)))
    return "\n".join(lines)


def model_change_warnings(metrics: dict[str, dict[str, Any]]) -> list[str]:
    """A warning per operator whose answering model (or its fingerprint) is not the one that
    answered the answers stored for it: once per operator, however many tasks saw it."""
    return [f"operator '{name}': the model answering it changed since its answers were stored: "
            f"{metrics[name]['model_change']}" for name in sorted(metrics) if metrics[name].get("model_change")]


def usage_estimated_warnings(metrics: dict[str, dict[str, Any]]) -> list[str]:
    """A warning per operator some of whose answers reported no token usage (or zero): their
    tokens were estimated from the requests, so the figures, TOKENS PER MINUTE and BUDGET TOKENS
    are estimates for them (said once, however many answers or tasks)."""
    return [f"operator '{name}': the service reported no token usage for {metrics[name]['usage_estimated']} "
            "answer(s); their tokens were estimated from the requests (figures, TOKENS PER MINUTE and "
            "BUDGET count the estimates)" for name in sorted(metrics) if metrics[name].get("usage_estimated")]


def money(usd: float) -> str:
    """An amount of money as the figures show it: dollars with four decimals ($0.0123)."""
    return f"${usd:.4f}" if usd < 100 else f"${usd:,.2f}"


def all_failed_warnings(metrics: dict[str, dict[str, Any]]) -> list[str]:
    """A warning per operator that ended every element in an error or a timeout (a service down):
    its ON ERROR policy kept the job going, so nothing else would say so."""
    warnings = []
    for name in sorted(metrics):
        m = metrics[name]
        elements, failed = int(m.get("elements_in") or 0), int(m.get("errors") or 0) + int(m.get("timeouts") or 0)
        if elements and failed >= elements:
            first = (m.get("first_error") or "unknown").removeprefix("error: ")
            warnings.append(f"operator '{name}' answered every element with an error: {elements} of {elements} "
                            f"(100%); first error: {first}")
    return warnings
