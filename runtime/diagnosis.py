"""What limits each ENRICH: one line per operator, from the run's figures (docs/operations.md,
"Watching a run"); right or silent.

First what the run's errors say, each in its own words, whatever the run's length: `credentials`
(calls refused with 401/403), `outage` (calls that could not connect), `answers` (answers that
did not fit RETURNS: deterministic, not retried), `budget` (a BUDGET was spent), and `service`
when 429s push back or 5xx answers and timeouts are spread over many elements (one key that
always answers 500 is that key's error, not an overloaded service).

Then, for a run long enough to judge (MIN_ELEMENTS elements and MIN_TASK_SECONDS of the tasks'
time; a shorter one says so: `input: 56 rows in 0.4 s`), what its timing says. The figures, all
added up over the operator's tasks (runtime/metrics.py):
- the window's fill: the mean number of elements in their calls (Little's law: the time
  elements spent in calls / the tasks' time) against CAPACITY, and the time the chain waited
  for room in the window (`blocked_seconds`);
- latency against load: the mean latency of the busiest seconds of the timeline against that of
  its quietest ones;
- waiting to be let through (RATE's tokens, TOKENS PER MINUTE, a limit the service stated in its
  headers) against the elements' whole time, the wait and their calls (the latency leaves the
  wait out: a gateway answering in under a second is not a 100 s one because its tokens ran out);
- the Python worker's CPU: its threads' time on a CPU or waiting for one, against the tasks' time.

Those causes are checked in this order, the first that holds is the line: `rate`, `service`
(latency grew with load), `cpu`, `capacity`, else `input` (calls finish faster than rows come).
An operator that made no call (every answer from the cache or the store) gets no line.
A run whose rows the provider's batches answered (TIER BATCH) is judged by that: `provider`
(the batch window is what the run waited for), after the errors and before the timing.
"""
from __future__ import annotations

from typing import Any

CAUSES = ("capacity", "service", "rate", "input", "cpu", "credentials", "outage", "answers", "budget",
          "provider")
RATE_SHARE = 0.3          # of the elements' time spent waiting for RATE tokens
PUSHBACK_SHARE = 0.02     # of calls answered 429
SPREAD = 0.02             # of elements that met a 5xx or a timeout (and at least SPREAD_MIN of them)
SPREAD_MIN = 3
ERRORS_SHARE = 0.02       # of elements that ended in an error of one class (credentials, outage, answers)
LATENCY_GROWTH = 2.0      # latency at the busiest seconds / at the quietest ones
CPU_SHARE = 0.8           # the worker busy (on a CPU or waiting for one) this share of the time
MIN_CPU_SECONDS = 1.0     # ... at least this long, over at least MIN_CPU_ELEMENTS: a short task's own
MIN_CPU_ELEMENTS = 100    # start-up, or a machine busy with other work, is not this ENRICH's CPU limit
FULL = 0.5                # the window this full on average, or the chain blocked this share of the time
MIN_ELEMENTS = 20         # fewer elements, or a shorter run, is too little to judge its timing by
MIN_TASK_SECONDS = 1.0


def _f(m: dict[str, Any], key: str) -> float:
    value = m.get(key)
    return float(value) if isinstance(value, (int, float)) else 0.0


def _share(part: float, whole: float) -> float:
    return round(part / whole, 3) if whole else 0.0


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
    throttled = _f(m, "answered_429")
    spread = _f(m, "elements_5xx") + _f(m, "timeouts")
    cpu = _f(m, "cpu_seconds") / tasks_s
    growth = latency_growth(name, timeline or [])
    figures = {"mean_in_flight": round(mean_in_flight, 2), "capacity": capacity, "window_fill": round(fill, 3),
               "blocked_share": round(blocked, 3), "pushed_back": int(_f(m, "pushed_back") + _f(m, "timeouts")),
               "answered_429": int(throttled), "spread": int(spread),
               "rate_wait_share": _share(rate_wait, in_calls_s + rate_wait), "cpu_share": round(cpu, 3),
               "p50_ms": m.get("p50_ms"), "p99_ms": m.get("p99_ms"), "elements": int(elements), "calls": int(calls),
               "task_seconds": round(tasks_s, 3)}
    if growth:
        figures["latency_quiet_ms"], figures["latency_busy_ms"] = growth
    cause, why, advice = (_stopped(m, elements) or _errors(m, elements) or _held(m, elements) or _provider(m)
                          or _pushed_back(m, calls, elements, throttled, spread)
                          or _too_few(elements, tasks_s)
                          or _timing(m, figures, growth, capacity, fill, blocked, cpu, rate_wait, in_calls_s))
    return {"operator": name, "cause": cause, "figures": figures, "why": why, "advice": advice,
            "line": f"dslc: {name}: {cause}: {why}; {advice}"}


Verdict = tuple[str, str, str]


def _stopped(m: dict[str, Any], elements: float) -> Verdict | None:
    """A BUDGET was spent: rows are left unanswered."""
    unanswered = int(_f(m, "unanswered"))
    if not unanswered:
        return None
    return ("budget", f"its BUDGET was spent with {unanswered} of {int(elements)} rows unanswered",
            "run it again to continue: every answer received is in the answer store and is not paid again")


def class_counts(m: dict[str, Any]) -> dict[str, tuple[int, str]]:
    """Elements that ended in an error, per class (calls/errors.py), with the most frequent message."""
    out: dict[str, tuple[int, str]] = {}
    for label, n in sorted((m.get("error_messages") or {}).items(), key=lambda item: -item[1]):
        kind, _, message = label.partition(": ")
        count, first = out.get(kind, (0, message))
        out[kind] = (count + int(n), first)
    return out


def _errors(m: dict[str, Any], elements: float) -> Verdict | None:
    """Errors that say what is wrong whatever the timing: refused credentials, no connection,
    answers that do not fit RETURNS."""
    classes = class_counts(m)
    least = max(1.0, ERRORS_SHARE * elements)
    refused, message = classes.get("credentials", (0, ""))
    if refused >= least:
        return ("credentials", f"{refused} of {int(elements)} elements were refused (401/403): {message}",
                "the service refuses the request's credentials: check the secret's value and what it may see")
    unreached, message = classes.get("unreachable", (0, ""))
    if unreached >= least:
        return ("outage", f"{unreached} of {int(elements)} elements got no answer: {message}",
                "the service could not be reached: is it running, at this address? ON OUTAGE PAUSE d waits for it")
    unfit, message = classes.get("answer", (0, ""))
    if unfit >= least:
        what = message.removeprefix("CallError: ").removeprefix("answer ")
        return ("answers", f"{unfit} of {int(elements)} answers did not fit RETURNS ({what})",
                "the service answers what RETURNS does not declare: fix RETURNS (or the service); "
                "such answers are not retried, so they cost one call each")
    return None


def _held(m: dict[str, Any], elements: float) -> Verdict | None:
    """ON OUTAGE held elements through an outage: the time they waited is the outage's, not the
    window's (their calls' latency includes it), whatever the timing says."""
    held = int(_f(m, "outage_held"))
    if held < max(1.0, ERRORS_SHARE * elements):
        return None
    return ("outage", f"{held} calls failed while the service was down; ON OUTAGE held their elements until "
                      f"it answered again (p50 {m.get('p50_ms')} ms, p99 {m.get('p99_ms')} ms, the outage included)",
            "the service's outage set the pace, not CAPACITY: is it stable? ON OUTAGE FAIL stops the run instead")


def _provider(m: dict[str, Any]) -> Verdict | None:
    """TIER BATCH: the provider's batches answered the rows before the pass, so its window is
    what the run waited for, whatever the pass's own timing."""
    lines = _f(m, "batch_lines")
    if not lines:
        return None
    return ("provider", f"the provider's batches answered {int(_f(m, 'batch_lines_done'))} of {int(lines)} lines "
                        f"({int(_f(m, 'batch_lines_failed'))} failed) before the pass; the run waited for their window",
            "the provider's batch window is the limit: TIER FLEX answers online, within minutes, at the same price")


def _pushed_back(m: dict[str, Any], calls: float, elements: float, throttled: float, spread: float) -> Verdict | None:
    """The service pushes back: 429s, or 5xx answers and timeouts over many elements."""
    if calls and throttled / calls >= PUSHBACK_SHARE:
        return ("service", f"{int(throttled)} of {int(calls)} calls ({throttled / calls:.0%}) were answered 429; "
                           f"p50 {m.get('p50_ms')} ms, p99 {m.get('p99_ms')} ms",
                "the service is overloaded: lower CAPACITY or add ADAPTIVE, add RATE, or scale the service")
    if elements and spread >= max(SPREAD_MIN, SPREAD * elements):
        return ("service", f"{int(spread)} of {int(elements)} elements met a 5xx answer or a timeout "
                           f"({spread / elements:.0%}); p50 {m.get('p50_ms')} ms, p99 {m.get('p99_ms')} ms",
                "the service is overloaded: lower CAPACITY or add ADAPTIVE, add RATE, or scale the service")
    return None


def _too_few(elements: float, tasks_s: float) -> Verdict | None:
    """A run too short to judge its timing by."""
    if elements >= MIN_ELEMENTS and tasks_s >= MIN_TASK_SECONDS:
        return None
    rows = f"{int(elements)} row{'s' if int(elements) != 1 else ''}"
    return ("input", f"{rows} in {tasks_s:.1f} s: too few to judge what limits it",
            "run it on more rows to see what limits it")


def _timing(m: dict[str, Any], figures: dict[str, Any], growth: tuple[float, float] | None, capacity: int | None,
            fill: float, blocked: float, cpu: float, rate_wait: float, in_calls_s: float) -> Verdict:
    """What the run's timing says (the module's order)."""
    mean_in_flight = figures["mean_in_flight"]
    if rate_wait and rate_wait >= RATE_SHARE * (in_calls_s + rate_wait):
        return ("rate", f"elements spent {figures['rate_wait_share']:.0%} of their time waiting to be let through "
                        f"(RATE, TOKENS PER MINUTE or the service's stated limit), p50 {m.get('p50_ms')} ms in their calls",
                "the rate limit is the limit: raise RATE (or its TOKENS PER MINUTE) if the service allows more, "
                "else this is as fast as it may go")
    if growth and growth[1] >= LATENCY_GROWTH * growth[0] and fill >= FULL / 2:
        return ("service", f"latency grew with load: {growth[0]} ms at the quietest seconds, {growth[1]} ms at the busiest",
                "the service slows down under this load: more CAPACITY will not help; use ADAPTIVE or scale the service")
    if cpu >= CPU_SHARE and _f(m, "cpu_seconds") >= MIN_CPU_SECONDS and _f(m, "elements_in") >= MIN_CPU_ELEMENTS:
        return ("cpu", f"the Python worker's threads were on a CPU or waiting for one {cpu:.1f}x the task's time; "
                       f"the window held {mean_in_flight:.1f} of {capacity}",
                "the worker's CPU is the limit: more partitions or executors (spark.default.parallelism), "
                "BATCH for cheaper calls, or cheaper PROCESS code in the chain")
    if capacity and (fill >= FULL or blocked >= FULL):
        return ("capacity", f"the window held {mean_in_flight:.1f} of {capacity} on average and rows waited for room "
                            f"{blocked:.0%} of the time, with no push-back (p50 {m.get('p50_ms')} ms)",
                f"raise CAPACITY (e.g. to {capacity * 2}) or add ADAPTIVE; the service answers quickly")
    return ("input", f"the window held {mean_in_flight:.1f} of {capacity} on average; "
                     f"calls finish faster than rows arrive (p50 {m.get('p50_ms')} ms)",
            "the input is the limit: more input partitions (more files, a repartition) or a faster upstream")


def diagnose_all(operators: dict[str, dict[str, Any]], timeline: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """A diagnosis per ENRICH (an operator with a CAPACITY) that made calls, was answered by the
    provider's batches, or was stopped by its BUDGET; one that made none (every answer from the
    cache or the store) has nothing to judge."""
    return [diagnose(name, m, timeline) for name, m in sorted(operators.items())
            if m.get("capacity") and m.get("elements_in")
            and (m.get("calls") or m.get("batch_lines") or m.get("unanswered"))]
