"""Each attempt policy alone (runtime/policies/), on the real limits it drives: no resolver, no
operator, no call. The resolver's loop over them is tested end to end in test_resolution.py and
test_async_operator.py."""
from __future__ import annotations

import asyncio

import pytest

from dslc.runtime.calls.base import CallError
from dslc.runtime.calls.errors import ANSWER, TRANSIENT
from dslc.runtime.config import Budget, Column, Enrich, Outage, Outcome, PythonCall, Retry, Store
from dslc.runtime.limits.adaptive import AdaptiveLimit
from dslc.runtime.limits.budget import BudgetSpent
from dslc.runtime.limits.outage import OutageBreaker
from dslc.runtime.limits.rate import TokenBucket
from dslc.runtime.metrics import OperatorMetrics
from dslc.runtime.policies.adaptive import AdaptiveAdmission
from dslc.runtime.policies.base import AGAIN, EXPIRES, UNANSWERED, AttemptPolicy, Element, hooks
from dslc.runtime.policies.budget import BudgetWatch
from dslc.runtime.policies.outage import OutageHold
from dslc.runtime.policies.pushback import PushBack
from dslc.runtime.policies.rate import RateAdmission
from dslc.runtime.policies.retry import Repeater


def make(**kw) -> Enrich:
    kw.setdefault("name", "scored")
    return Enrich(line=3, call=PythonCall("udfs:score"), returns=(Column("score", "DOUBLE"),),
                  key_columns=("id",), **kw)


def element(attempts: int = 0) -> Element:
    return Element({"id": 1}, [attempts])


def run(awaitable) -> None:
    async def main() -> None:
        await awaitable
    asyncio.run(main())


# ---------------------------------------------------------------- hooks


def test_hooks_are_the_ones_a_policy_defines_in_the_order_given() -> None:
    metrics = OperatorMetrics("scored")
    repeater, push = Repeater(make(), metrics), PushBack(metrics)
    assert hooks((push, repeater), "failed") == (push.failed, repeater.failed)
    assert hooks((push, repeater), "before") == (repeater.before,)
    assert hooks((push, repeater), "admit") == ()
    assert hooks((AttemptPolicy(),), "answered") == ()


# ---------------------------------------------------------------- RETRY


def test_the_repeater_counts_attempts_and_waits_only_before_a_retry() -> None:
    metrics = OperatorMetrics("scored")
    repeater = Repeater(make(retry=Retry(2, 0.01)), metrics)
    one = element()
    assert repeater.before(one) is None           # the first attempt: nothing to wait for
    assert one.attempts == [1] and not one.readmit
    wait = repeater.before(one)
    assert wait is not None and one.attempts == [2] and one.readmit
    run(wait)
    assert metrics.counters["retries"] == 1


def test_a_retry_after_longer_than_the_backoff_is_what_the_repeater_waits() -> None:
    repeater = Repeater(make(retry=Retry(1, 0.0)), OperatorMetrics("scored"))
    one = element(1)
    assert repeater.before(element(1)) is None     # no BACKOFF, nothing asked: no wait
    one.asked = 0.01
    wait = repeater.before(one)
    assert wait is not None
    run(wait)


def test_the_repeater_calls_again_only_for_retried_classes_within_retry() -> None:
    repeater = Repeater(make(retry=Retry(1)), OperatorMetrics("scored"))
    error = CallError("503", status=503)
    assert repeater.failed(element(1), error, TRANSIENT) is AGAIN
    assert repeater.failed(element(2), error, TRANSIENT) is None      # RETRY 1 spent
    assert repeater.failed(element(1), error, ANSWER) is None         # the same answer again
    assert Repeater(make(), OperatorMetrics("scored")).failed(element(1), error, TRANSIENT) is None


def test_the_repeater_calls_again_on_a_miss_only_with_on_miss_retry() -> None:
    metrics = OperatorMetrics("scored")
    assert Repeater(make(retry=Retry(1), on_miss=Outcome.RETRY), metrics).missed(element(1)) is AGAIN
    assert Repeater(make(retry=Retry(1), on_miss=Outcome.RETRY), metrics).missed(element(2)) is None
    assert Repeater(make(retry=Retry(1)), metrics).missed(element(1)) is None


# ---------------------------------------------------------------- RATE


def test_rate_admission_takes_a_token_for_a_first_attempt_and_each_retry() -> None:
    bucket = TokenBucket(0.001, burst=5.0)      # refills nothing while the test runs, however slowly
    rate = RateAdmission(bucket)
    run(rate.admit({"id": 1}))
    one = element(1)
    assert rate.before(one) is None          # the first attempt was admitted already
    one.readmit = True
    run(rate.before(one))
    assert bucket._tokens < 3.5               # two tokens taken out of five


def test_rate_admission_takes_no_token_for_an_answer_had_without_a_call() -> None:
    bucket = TokenBucket(1000.0, burst=5.0)
    looked_up = []

    async def lookup(row) -> bool:
        looked_up.append(row["id"])
        return row["id"] == 1

    rate = RateAdmission(bucket, lookup)
    run(rate.admit({"id": 1}))
    assert bucket._tokens > 4.5
    run(rate.admit({"id": 2}))
    assert bucket._tokens < 4.5
    assert looked_up == [1, 2]


# ---------------------------------------------------------------- ADAPTIVE


def test_adaptive_admission_holds_a_slot_per_attempt_and_backs_off_on_push_back() -> None:
    limit = AdaptiveLimit(8)
    adaptive = AdaptiveAdmission(limit)

    async def main() -> None:
        await adaptive.admit({"id": 1})
        assert limit.in_flight == 1
        one = element(1)
        assert adaptive.before(one) is None and one.epoch == limit.epoch
        before = limit.value
        one.asked = 0.5                       # Retry-After, as PushBack keeps it
        adaptive.failed(one, CallError("busy", status=429, retry_after_s=0.5), TRANSIENT)
        assert limit.value < before and limit.epoch == one.epoch + 1
        assert limit.resume_at > asyncio.get_running_loop().time()
        adaptive.released(one)
        assert limit.in_flight == 0
        value = limit.value
        adaptive.failed(one, CallError("busy", status=429), TRANSIENT)   # the same round: once
        assert limit.value == value

    asyncio.run(main())


def test_adaptive_admission_ignores_an_error_that_is_not_push_back() -> None:
    limit = AdaptiveLimit(8)
    adaptive = AdaptiveAdmission(limit)
    value = limit.value
    adaptive.failed(element(1), CallError("bad", status=400), TRANSIENT)
    adaptive.failed(element(1), ValueError("bug"), TRANSIENT)
    assert limit.value == value
    adaptive.expired(limit.epoch)             # a TIMEOUT is push-back
    assert limit.value < value


# ---------------------------------------------------------------- ON OUTAGE


def test_the_outage_hold_lets_retry_go_on_then_holds_the_element() -> None:
    breaker = OutageBreaker(Outage("PAUSE", pause_s=5.0, threshold=3), "scored", 3)
    hold = OutageHold(breaker, retries=1, timeout_s=1.0, metrics=OperatorMetrics("scored"))
    one = element(1)
    down = CallError("502", status=502)
    assert hold.failed(one, down, TRANSIENT) is None        # RETRY 1 goes on
    one.attempts[0] = 2
    assert hold.failed(one, down, TRANSIENT) is AGAIN        # RETRY spent: held, not ON ERROR
    assert one.attempts == [0] and one.held == 1 and one.rejoin is not None
    rejoin = hold.before(one)
    assert rejoin is not None and one.readmit and one.rejoin is None
    rejoin.close()


def test_an_answer_elsewhere_makes_the_failure_the_elements_own() -> None:
    breaker = OutageBreaker(Outage("PAUSE", pause_s=5.0, threshold=3), "scored", 3)
    hold = OutageHold(breaker, retries=0, timeout_s=1.0, metrics=OperatorMetrics("scored"))
    one, other = element(1), Element({"id": 2}, [1])
    first = hold.failed(one, CallError("502", status=502), TRANSIENT)   # holds: nobody answered yet
    assert first is AGAIN
    one.rejoin.close()
    hold.answered(other)                                     # the service answers another key
    one.attempts[0] = 1
    assert hold.failed(one, CallError("502", status=502), TRANSIENT) is None
    assert breaker.failures == 1


def test_an_error_that_is_not_the_services_ends_the_streak() -> None:
    breaker = OutageBreaker(Outage("FAIL", threshold=2), "scored", 3)
    hold = OutageHold(breaker, retries=0, timeout_s=1.0, metrics=OperatorMetrics("scored"))
    breaker.failed("refused")
    assert hold.failed(element(1), CallError("no such key", status=400), TRANSIENT) is None
    assert breaker.failures == 0 and not breaker.open


def test_a_timeout_is_held_while_it_may_be_the_services() -> None:
    breaker = OutageBreaker(Outage("PAUSE", pause_s=5.0, threshold=3), "scored", 3)
    hold = OutageHold(breaker, retries=0, timeout_s=1.0, metrics=OperatorMetrics("scored"))
    settle = hold.timed_out({"id": 1}, rounds=0)
    assert settle is not None and breaker.failures == 1
    settle.close()
    assert hold.timed_out({"id": 1}, rounds=3) is None      # held as many rounds as the threshold
    assert breaker.failures == 2 and not breaker.open


# ---------------------------------------------------------------- BUDGET


def test_a_spent_budget_leaves_the_element_unanswered_and_stops_a_streaming_task() -> None:
    metrics = OperatorMetrics("scored")
    config = make(store=Store("/tmp/unused", run="r"), budget=Budget(10, stop_task=True))
    budget = BudgetWatch(config, metrics)
    budget.at_end()                                          # nothing unanswered: goes on
    assert budget.failed(element(1), ValueError("bug"), TRANSIENT) is None
    assert budget.failed(element(1), BudgetSpent("spent"), TRANSIENT) is UNANSWERED
    assert metrics.counters["unanswered"] == 1
    with pytest.raises(BudgetSpent, match="1 row of this task still unanswered"):
        budget.at_end()


# ---------------------------------------------------------------- push-back


def test_push_back_counts_429_and_an_elements_5xx_once_and_keeps_retry_after() -> None:
    metrics = OperatorMetrics("scored")
    push, one = PushBack(metrics), element(1)
    push.failed(one, CallError("busy", status=429, retry_after_s=2.0), TRANSIENT)
    assert one.asked == 2.0
    push.failed(one, CallError("down", status=500), TRANSIENT)
    push.failed(one, CallError("down", status=500), TRANSIENT)
    assert one.asked == 0.0
    c = metrics.counters
    assert (c["pushed_back"], c["answered_429"], c["elements_5xx"]) == (3, 1, 1)
    push.failed(one, ValueError("bug"), TRANSIENT)
    assert c["pushed_back"] == 3


def test_a_retry_after_the_timeout_cannot_wait_out_expires_the_element_naming_it() -> None:
    import time

    repeater = Repeater(make(retry=Retry(2), timeout_s=30.0), OperatorMetrics("scored"))
    busy = CallError("busy", status=429, retry_after_s=60.0)
    one = Element({"id": 1}, [1], time.monotonic())
    one.asked = 60.0
    assert repeater.failed(one, busy, TRANSIENT) is EXPIRES
    assert one.why == "429 with Retry-After 60 s exceeds TIMEOUT 30s"
    one.asked = 5.0                                          # within TIMEOUT: waited for
    assert repeater.failed(one, busy, TRANSIENT) is AGAIN
    late = Element({"id": 2}, [1], time.monotonic() - 28.0)  # 2 s of its TIMEOUT left
    late.asked = 5.0
    assert repeater.failed(late, busy, TRANSIENT) is EXPIRES
