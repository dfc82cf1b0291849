"""ENRICH options as written → checked values, with every contradiction reported."""
from __future__ import annotations

from dataclasses import dataclass, field

from dslc.compiler.diagnostics import Diagnostic, error
from dslc.compiler.frontend import ast
from dslc.compiler.plan import options, tiers, values
from dslc.runtime.config import Batch, Budget, Cache, Ceiling, Mode, Outage, Outcome, Price, Rate, Retry


@dataclass
class EnrichOptions:
    """Checked ENRICH options, defaults from the language contract."""

    mode: Mode = Mode.ORDERED
    order_by: tuple[ast.Name, ...] = ()     # ASYNC ORDERED BY (...): checked against the input
    capacity: int = 100
    adaptive: bool = False                  # CAPACITY n ADAPTIVE
    timeout_s: float = 30.0
    retry: Retry | None = None
    cache: Cache | None = None
    rate: Rate | None = None
    batch: Batch | None = None   # BATCH n WITHIN d
    on_miss: Outcome = Outcome.NULL
    on_timeout: Outcome = Outcome.FAIL
    on_error: Outcome = Outcome.FAIL
    dead_letter: str | None = None
    ceiling: Ceiling | None = None          # DEAD LETTER 'path' UP TO n% | n ROWS
    outage: Outage | None = None            # ON OUTAGE PAUSE d | FAIL; CONTINUE is None
    store: bool = False                     # STORE [TTL d]
    store_ttl_s: float | None = None
    budget: Budget | None = None            # BUDGET n CALLS | n TOKENS | n USD
    provenance: ast.Name | None = None      # PROVENANCE AS col
    tier: str = "STANDARD"                  # TIER STANDARD | FLEX | BATCH (plan/tiers.py)
    price: Price | None = None              # PRICE n PER CALL | n PER MILLION INPUT TOKENS [, m ...]
    batch_failure: str = "BATCH"            # ON BATCH FAILURE ONLINE
    clauses: dict[str, ast.Opt] = field(default_factory=dict)   # as written, for checks that need the call


def read_options(opts: tuple[ast.Opt, ...], problems: list[Diagnostic]) -> EnrichOptions:
    """Interpret the option clauses of one ENRICH statement."""
    result = EnrichOptions()
    seen = options.first_of_each(opts, problems)
    dead_letters: list[tuple[str, ast.Str]] = []
    for opt in seen.values():
        reader = _READERS.get(opt.key)
        if reader is not None:
            reader(result, opt, problems)
        else:                               # ON MISS / ON TIMEOUT / ON ERROR
            outcome = _outcome(opt, problems, dead_letters)
            if outcome:
                setattr(result, opt.key, outcome)
    result.clauses = seen
    _check_contradictions(result, seen, dead_letters, problems)
    if dead_letters:
        result.dead_letter = dead_letters[0][1].value
        result.ceiling = _ceiling(seen, problems)
    return result


def _read_async(result: EnrichOptions, opt: ast.Opt, problems: list[Diagnostic]) -> None:
    if opt.args:
        result.mode = Mode(opt.args[0].value)
        result.order_by = tuple(opt.args[1:])


def _read_capacity(result: EnrichOptions, opt: ast.Opt, problems: list[Diagnostic]) -> None:
    result.capacity = values.whole(opt.args[0], "CAPACITY", problems, minimum=1) or result.capacity
    result.adaptive = len(opt.args) > 1


def _read_timeout(result: EnrichOptions, opt: ast.Opt, problems: list[Diagnostic]) -> None:
    result.timeout_s = values.duration(opt.args[0], problems) or result.timeout_s


def _read_cache(result: EnrichOptions, opt: ast.Opt, problems: list[Diagnostic]) -> None:
    size = values.whole(opt.args[0], "CACHE", problems, minimum=1)
    ttl = values.duration(opt.args[1], problems)
    if size and ttl:
        result.cache = Cache(size, ttl)


def _read_store(result: EnrichOptions, opt: ast.Opt, problems: list[Diagnostic]) -> None:
    result.store = True
    result.store_ttl_s = values.duration(opt.args[0], problems) if opt.args else None


def _read_budget(result: EnrichOptions, opt: ast.Opt, problems: list[Diagnostic]) -> None:
    unit = opt.args[1].value
    amount = values.positive(opt.args[0], "BUDGET ... USD", problems) if unit == "USD" else \
        values.whole(opt.args[0], "BUDGET", problems, minimum=1)
    result.budget = Budget(amount, unit) if amount else None


def _read_provenance(result: EnrichOptions, opt: ast.Opt, problems: list[Diagnostic]) -> None:
    result.provenance = opt.args[0]


def _read_batch(result: EnrichOptions, opt: ast.Opt, problems: list[Diagnostic]) -> None:
    size = values.whole(opt.args[0], "BATCH", problems, minimum=1)
    within = values.duration(opt.args[1], problems) if len(opt.args) > 1 else 0.0
    if size and within is not None:
        result.batch = Batch(size, within)


def _read_retry(result: EnrichOptions, opt: ast.Opt, problems: list[Diagnostic]) -> None:
    result.retry = _retry(opt, problems)


def _read_rate(result: EnrichOptions, opt: ast.Opt, problems: list[Diagnostic]) -> None:
    result.rate = _rate(opt, problems)


def _read_outage(result: EnrichOptions, opt: ast.Opt, problems: list[Diagnostic]) -> None:
    result.outage = _outage(opt, problems)


# option key -> what reads it into EnrichOptions (the ON MISS / TIMEOUT / ERROR outcomes aside)
_READERS = {"async": _read_async, "capacity": _read_capacity, "timeout": _read_timeout, "retry": _read_retry,
            "cache": _read_cache, "rate": _read_rate, "store": _read_store, "budget": _read_budget,
            "batch": _read_batch, "on_outage": _read_outage, "provenance": _read_provenance,
            **{key: tiers.read_option for key in tiers.KEYS}}


def _ceiling(seen: dict[str, ast.Opt], problems: list[Diagnostic]) -> Ceiling | None:
    """The UP TO of the ENRICH's DEAD LETTER outcomes (one path: at most one ceiling)."""
    written = [arg.args[1] for key in ("on_miss", "on_timeout", "on_error") if key in seen
               for arg in seen[key].args[:1] if isinstance(arg, ast.Opt) and len(arg.args) > 1]
    written.sort(key=lambda opt: opt.span.start)
    ceilings = []
    for opt in written:
        number, unit = opt.args
        if unit.value == "%":
            try:
                percent = float(number.text)
            except ValueError:
                percent = -1.0
            if not 0 <= percent <= 100:
                problems.append(error("E0302", number.span, option="UP TO n%", rule="a number from 0 to 100",
                                      text=number.text))
                continue
            ceilings.append((opt, Ceiling(percent=percent)))
        else:
            rows = values.whole(number, "UP TO n ROWS", problems)
            if rows is not None:
                ceilings.append((opt, Ceiling(rows=rows)))
    if len({c for _, c in ceilings}) > 1:
        (_, first), (opt, other) = ceilings[0], ceilings[-1]
        problems.append(error("E0304", opt.span, first=str(other), second=f"{first} of the same DEAD LETTER path",
                              hint="one dead-letter path has one ceiling; write UP TO once"))
    return ceilings[0][1] if ceilings else None


def _rate(opt: ast.Opt, problems: list[Diagnostic]) -> Rate | None:
    """RATE n PER SECOND | MINUTE [, m TOKENS PER MINUTE]."""
    count = values.positive(opt.args[0], "RATE", problems)
    per_minute = len(opt.args) > 1 and opt.args[1].value == "MINUTE"
    tokens = values.positive(opt.args[2], "TOKENS PER MINUTE", problems) if len(opt.args) > 2 else None
    if not count or (len(opt.args) > 2 and not tokens):
        return None
    return Rate(count, per="MINUTE" if per_minute else "SECOND", tokens_per_minute=tokens)


def _retry(opt: ast.Opt, problems: list[Diagnostic]) -> Retry | None:
    attempts = values.whole(opt.args[0], "RETRY", problems)
    backoff = values.duration(opt.args[1], problems) if len(opt.args) > 1 else 0.0
    exponential = len(opt.args) > 2 and opt.args[2].value == "EXPONENTIAL"
    if attempts is None or backoff is None:
        return None
    return Retry(attempts, backoff, exponential)


def _outage(opt: ast.Opt, problems: list[Diagnostic]) -> Outage | None:
    """ON OUTAGE PAUSE d | FAIL | CONTINUE (the default: None)."""
    action = opt.args[0].value
    if action == "PAUSE":
        pause = values.duration(opt.args[1], problems)
        return Outage("PAUSE", pause) if pause else None
    return Outage("FAIL") if action == "FAIL" else None


def _outcome(opt: ast.Opt, problems: list[Diagnostic], dead_letters: list) -> Outcome | None:
    arg = opt.args[0]
    if isinstance(arg, ast.Opt):        # DEAD LETTER 'path'
        dead_letters.append((opt.key, arg.args[0]))
        return Outcome.DEAD_LETTER
    value = Outcome(arg.value)
    if value is Outcome.RETRY and opt.key != "on_miss":
        problems.append(error("E0309", arg.span, text="RETRY", what=f"{options.title(opt.key)} outcome",
                              hint="add RETRY n to retry; then say what happens after the last attempt"))
        return None
    return value


def _check_contradictions(result: EnrichOptions, seen: dict[str, ast.Opt],
                          dead_letters: list[tuple[str, ast.Str]], problems: list[Diagnostic]) -> None:
    if result.on_miss is Outcome.RETRY and (result.retry is None or result.retry.attempts == 0):
        problems.append(error("E0304", seen["on_miss"].span, first="ON MISS RETRY",
                              second="no RETRY n (there would be nothing to retry)",
                              hint="add RETRY 3 BACKOFF 50ms, or use ON MISS NULL"))
    retry = result.retry
    if retry and retry.attempts and "timeout" in seen:
        first_wait = retry.backoff_s
        if first_wait >= result.timeout_s:
            problems.append(error("E0304", seen["retry"].span, first="RETRY's first BACKOFF",
                                  second=f"TIMEOUT {seen['timeout'].args[0].text} (no retry could start in time)",
                                  hint="shorten BACKOFF or lengthen TIMEOUT"))
    if result.adaptive and result.capacity < 2:
        problems.append(error("E0304", seen["capacity"].span, first="ADAPTIVE",
                              second=f"CAPACITY {seen['capacity'].args[0].text} (the limit moves between 1 and CAPACITY)",
                              hint="give the most calls the service should ever see from one task, "
                                   "e.g. CAPACITY 64 ADAPTIVE; or drop ADAPTIVE"))
    if result.batch and result.batch.size > result.capacity:
        capacity = f"CAPACITY {seen['capacity'].args[0].text}" if "capacity" in seen else "CAPACITY 100 (the default)"
        problems.append(error("E0304", seen["batch"].span, first=f"BATCH {result.batch.size}", second=capacity,
                              hint=f"a batch holds at most CAPACITY elements; write CAPACITY {2 * result.batch.size} "
                                   "(two batches: one filling while one is in flight) or a smaller BATCH"))
    if "budget" in seen and not result.store:
        problems.append(error("E0304", seen["budget"].span, first="BUDGET",
                              second="an ENRICH without STORE (a run stopped by its BUDGET would pay again for "
                                     "every answer when run again)",
                              hint="add STORE (answers kept in the pipeline's answer store, so a rerun continues), "
                                   "or drop BUDGET"))
    paths = {path.value for _, path in dead_letters}
    if len(paths) > 1:
        key, path = dead_letters[-1]
        problems.append(error("E0304", path.span, first=f"DEAD LETTER '{path.value}'",
                              second=f"DEAD LETTER '{dead_letters[0][1].value}' of the same ENRICH",
                              hint="one ENRICH has one dead-letter sink; use the same path"))
