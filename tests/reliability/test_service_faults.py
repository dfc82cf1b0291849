"""1. Service faults: a real BATCH job on real Spark calls a real local service that answers
10 % HTTP 500, 5 % connection resets and 5 % hangs longer than TIMEOUT (per request), plus a few
keys that always fail, with RETRY 3 and every ON TIMEOUT / ON ERROR policy.

The expected outcome of each element is computed from the service's own log of what it did:
a key that got a hang timed out (TIMEOUT covers the whole retry loop), a key whose last answer
was OK succeeded, any other key failed after its last retry. Every input row must end exactly
once in the output or the dead-letter sink (or be dropped when the policy says so); with FAIL
the job fails naming the operator, the DSL line and the key, and commits no output.
"""
from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
from reliability_support import (
    FlakyService,
    dead_letters,
    parquet_rows,
    run_flow,
    write_jsonl,
)

pytestmark = [pytest.mark.spark, pytest.mark.slow]

N = 400
POISON = {f"k{i:04d}" for i in range(7, N, 53)}         # ~2 %: every attempt answers 500
FLOW = """SOURCE items FROM JSON 'in/' SCHEMA (id STRING, n INT);
STREAM enriched = ENRICH items
  WITH HTTP GET '{base}/svc/{{id}}'
  RETURNS (value STRING)
  ASYNC {mode} CAPACITY 16 TIMEOUT 1s RETRY 3 BACKOFF 5ms EXPONENTIAL
  ON TIMEOUT {on_timeout} ON ERROR {on_error};
SINK enriched TO PARQUET 'out' MODE OVERWRITE;
"""
ENRICH_LINE = 2


def _policy(word: str) -> str:
    return "DEAD LETTER 'dlq'" if word == "DEAD_LETTER" else word


def _setup(tmp_path: Path, service: FlakyService, mode: str, on_timeout: str, on_error: str) -> Path:
    rows = [{"id": f"k{i:04d}", "n": i} for i in range(N)]
    write_jsonl(tmp_path / "in" / "a.json", rows[: N // 2])     # two files: two tasks on local[2]
    write_jsonl(tmp_path / "in" / "b.json", rows[N // 2:])
    flow = tmp_path / "pipeline.flow"
    flow.write_text(FLOW.format(base=service.base, mode=mode, on_timeout=_policy(on_timeout),
                                on_error=_policy(on_error)))
    return flow


def _expected_outcomes(service: FlakyService) -> dict[str, str]:
    """ok / timeout / error per key, from what the service did to it."""
    outcomes = {}
    for key, served in service.log.items():
        if "hang" in served:
            outcomes[key] = "timeout"
        elif served[-1] == "ok":
            outcomes[key] = "ok"
        else:
            outcomes[key] = "error"
    return outcomes


def _flaky(flaky) -> FlakyService:
    service = flaky(p_error=0.10, p_reset=0.05, p_hang=0.05)
    service.poison |= POISON
    return service


@pytest.mark.parametrize("mode, on_timeout, on_error", [
    # every policy on both sides in three runs
    ("UNORDERED", "NULL", "DEAD_LETTER"),
    ("ORDERED", "DEAD_LETTER", "DROP"),
    ("UNORDERED", "DROP", "NULL"),
])
def test_every_row_ends_exactly_once(spark, flaky, tmp_path, mode, on_timeout, on_error):
    service = _flaky(flaky)
    run_flow(_setup(tmp_path, service, mode, on_timeout, on_error))

    keys = {f"k{i:04d}" for i in range(N)}
    expected = _expected_outcomes(service)
    assert set(expected) == keys, "every element was called at least once"
    kinds = Counter(expected.values())
    assert kinds["timeout"] >= 5 and kinds["error"] >= len(POISON) and kinds["ok"] >= N * 0.8, kinds
    # the faults really happened and retries really ran: many keys were called more than once
    assert sum(1 for k in keys if service.by_key[k] > 1) >= N * 0.1
    assert all(service.by_key[k] >= 4 for k in POISON)          # RETRY 3: four attempts at least

    out = parquet_rows(tmp_path / "out")
    letters = dead_letters(tmp_path / "dlq")
    out_ids = Counter(r["id"] for r in out)
    dl_ids = Counter(d["key"]["id"] for d in letters)
    assert max(out_ids.values(), default=1) == 1, "a row was written twice"
    assert max(dl_ids.values(), default=1) == 1, "a dead letter was written twice"
    assert not set(out_ids) & set(dl_ids), "a row is both in the output and a dead letter"

    policy = {"ok": "ROW", "timeout": on_timeout, "error": on_error}
    for key in sorted(keys):
        outcome = expected[key]
        want = policy[outcome]
        if want == "ROW":
            assert key in out_ids, (key, service.log[key])
        elif want == "NULL":
            assert key in out_ids, (key, service.log[key])
        elif want == "DROP":
            assert key not in out_ids and key not in dl_ids, (key, service.log[key])
        else:
            assert key in dl_ids, (key, service.log[key])
    values = {r["id"]: r["value"] for r in out}
    for key, value in values.items():
        assert value == (f"v-{key}" if expected[key] == "ok" else None), (key, service.log[key])
    assert {r["n"] for r in out} == {int(k[1:]) for k in out_ids}     # input columns pass through
    for letter in letters:
        key = letter["key"]["id"]
        assert letter["kind"] == expected[key] and letter["operator"] == "enriched"
        assert letter["line"] == ENRICH_LINE and letter["row"] == {"id": key, "n": int(key[1:])}
        if letter["kind"] == "error":
            assert letter["attempts"] == 4 and ("HTTP 500" in letter["error"] or "Error" in letter["error"])
        else:
            assert letter["error"] == "timed out after 1.0s"
    accounted = len(out_ids) + len(dl_ids) + sum(1 for k in keys if policy[expected[k]] == "DROP")
    assert accounted == N


@pytest.mark.parametrize("on_timeout, on_error, kind", [("NULL", "FAIL", "error"), ("FAIL", "NULL", "timeout")])
def test_fail_names_operator_line_and_key_and_commits_nothing(spark, flaky, tmp_path, on_timeout, on_error, kind):
    service = _flaky(flaky)
    flow = _setup(tmp_path, service, "UNORDERED", on_timeout, on_error)
    with pytest.raises(Exception) as info:
        run_flow(flow)
    message = str(info.value)
    match = re.search(rf"operator 'enriched' \(line {ENRICH_LINE}\) failed on element id='(k\d{{4}})': (.*)", message)
    assert match, message[-3000:]
    key, cause = match.groups()
    assert _expected_outcomes(service)[key] == kind, (key, service.log[key])
    assert ("timed out" in cause) if kind == "timeout" else ("HTTP 500" in cause or "Error" in cause)
    # the write job aborted: no committed file is left behind
    assert not list((tmp_path / "out").glob("*.parquet")) and not (tmp_path / "out" / "_SUCCESS").exists()
