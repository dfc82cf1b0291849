"""`dslc test` on a small pipeline: a passing case, each kind of row difference, and case files
that are wrong in every way the runner must explain (never a traceback)."""
from __future__ import annotations

import io

import pytest

from dslc.testing.runner import run_paths

pytestmark = pytest.mark.spark

ORDERS = """
          orders:
            - {id: o1, customer: c1, amount: 20.0, ts: 2026-11-01 12:00:00}
            - {id: o2, customer: c2, amount: 30.0, ts: 2026-11-01 12:00:01}
            - {id: o3, customer: c3, amount: 5.0, ts: 2026-11-01 12:00:02}
            - {id: o4, customer: c4, amount: 40.0, ts: 2026-11-01 12:00:03}
"""
ANSWERS = """
          enriched:
            - {key: c1, answer: {tier: gold}}
            - {key: c2, miss: true}
            - {key: c4, error: HTTP 500 boom}
"""


def _run(*paths) -> tuple[int, str]:
    out = io.StringIO()
    code = run_paths([str(p) for p in paths], out=out)
    return code, out.getvalue()


def test_passing_and_failing_cases_with_a_row_diff(spark, shop):
    path = shop(f"""
    cases:
      - name: answers, a miss and an error
        sources:{ORDERS}
        enrich:{ANSWERS}
        expect:
          enriched:
            - {{id: o1, customer: c1, tier: gold}}
            - {{id: o2, tier: null, ts: 2026-11-01 12:00:01}}
        dead_letters:
          enriched:
            - {{kind: error, key: {{customer: c4}}, error: "CallError: HTTP 500 boom", attempts: 1}}
      - name: wrong expectations
        sources:{ORDERS}
        enrich:{ANSWERS}
        expect:
          enriched:
            - {{id: o1, customer: c1, tier: silver}}
            - {{id: o9, customer: c9, tier: gold}}
    """)
    code, text = _run(path)
    assert code == 1
    assert "PASS  answers, a miss and an error" in text, text
    assert "FAIL  wrong expectations" in text
    assert "sink enriched: 1 missing, 1 unexpected, 1 changed (2 expected, 2 actual)" in text
    assert "- missing    {id: 'o9', customer: 'c9', tier: 'gold'}" in text
    assert "+ unexpected {id: 'o2', customer: 'c2', tier: null}" in text
    assert "~ changed    {id: 'o1', customer: 'c1'} tier: 'silver' -> 'gold'" in text
    assert text.rstrip().endswith("1 passed, 1 failed")
    assert not (path.parent / "target").exists()          # nothing written beside the pipeline


def test_a_call_nobody_answered_fails_the_case_naming_operator_and_key(spark, shop):
    path = shop(f"""
    cases:
      - name: c2 is not answered
        sources:{ORDERS}
        enrich:
          enriched:
            - {{key: c1, answer: {{tier: gold}}}}
        expect:
          enriched: []
    """)
    code, text = _run(path)
    assert code == 1 and "ERROR c2 is not answered" in text
    assert "ENRICH enriched (line 8): no recorded answer for call key customer='c2'" in text
    assert "Traceback" not in text


BAD_CASES = [
    ("sources: {orders: [{id: o1, amount: abc}]}\n    expect: {enriched: []}",
     "case 'bad': source orders, row 1, column amount: 'abc' is not a number (DOUBLE)"),
    ("sources: {orders: [{id: o1, amount: 1.0, ts: yesterday}]}\n    expect: {enriched: []}",
     "case 'bad': source orders, row 1, column ts: expected a timestamp"),
    ("sources: {orders: [{id: o1, colour: red}]}\n    expect: {enriched: []}",
     "case 'bad': source orders, row 1: unknown column 'colour' (columns: id, customer, amount, ts)"),
    ("sources: {order: []}\n    expect: {enriched: []}",
     "case 'bad': unknown source 'order' (the pipeline has: orders)"),
    ("expect: {flagged: []}", "case 'bad': unknown sink 'flagged' (the pipeline has: enriched)"),
    ("expect: {enriched: [{id: o1, colour: red}]}", "case 'bad': sink enriched, row 1: unknown column 'colour'"),
    ("enrich: {lookup: []}\n    expect: {enriched: []}",
     "case 'bad': unknown ENRICH operator 'lookup' (the pipeline has: enriched)"),
    ("enrich: {enriched: [{key: c1, answer: {tier: gold}, miss: true}]}\n    expect: {enriched: []}",
     "case 'bad': enrich enriched, answer 1: give exactly one of answer, miss: true, error: <message>, timeout: true"),
    ("enrich: {enriched: [{key: c1, answer: {rank: 1}}]}\n    expect: {enriched: []}",
     "case 'bad': enrich enriched, answer 1 answer: unknown column 'rank' (columns: tier)"),
    ("dead_letters: {big: []}", "case 'bad': unknown ENRICH with a DEAD LETTER 'big' (the pipeline has: enriched)"),
    ("sources: {orders: []}", "case 'bad': the case checks nothing"),
    ("expected: {enriched: []}", "case 'bad': case: unknown key 'expected' (did you mean 'expect'?)"),
]


def test_bad_cases_are_explained_before_anything_runs(spark, shop):
    for index, (body, expected) in enumerate(BAD_CASES):
        path = shop(f"pipeline: shop.flow\ncases:\n  - name: bad\n    {body}\n", name=f"bad{index}.test.yaml")
        code, text = _run(path)
        assert code == 1, body
        assert expected in text, (body, text)
        assert "Traceback" not in text and text.rstrip().endswith("0 passed, 1 failed")


@pytest.mark.parametrize("text, expected", [
    ("cases: [", "not valid YAML"),
    ("pipeline: nowhere.flow\ncases: []", "pipeline"),
    ("cases: []", "expected `cases:` with a list of cases"),
    ("case: []", "unknown key 'case' (did you mean 'cases'?)"),
])
def test_bad_files_are_explained(spark, shop, text, expected):
    code, out = _run(shop(text))
    assert code == 1 and expected in out and out.rstrip().endswith("0 passed, 1 failed")


def test_a_pipeline_that_does_not_compile_is_reported_with_its_diagnostics(spark, shop, tmp_path):
    (tmp_path / "broken.flow").write_text("SOURCE s FROM JSON 'x' SCHEMA (a STRING);\nSINK nope TO CONSOLE;\n")
    code, out = _run(shop("pipeline: broken.flow\ncases: [{name: x, expect: {nope: []}}]\n"))
    assert code == 1 and "the pipeline does not compile" in out and "broken.flow:2:" in out


def test_no_test_files_is_an_error(tmp_path):
    code, out = _run(tmp_path)
    assert code == 1 and "no *.test.yaml files" in out


WINDOWED = """\
PIPELINE shop MODE STREAMING CHECKPOINT 'target/chk';

SOURCE orders FROM JSON 'data/orders/'
  SCHEMA (id STRING, customer STRING, amount DOUBLE, ts TIMESTAMP)
  WATERMARK ts DELAY 10s;

STREAM big = SELECT id, customer, amount, ts FROM orders WHERE amount > 10;

STREAM enriched = ENRICH big
  WITH HTTP GET 'http://127.0.0.1:9/customers/{customer}'
  RETURNS (tier STRING)
  ON ERROR DEAD LETTER 'target/dlq';

STREAM per_minute = SELECT tier, window(ts, '1 minute') AS w, count(*) AS n
  FROM enriched GROUP BY tier, window(ts, '1 minute');

SINK per_minute TO PARQUET 'target/out/per_minute';
"""


def test_a_streaming_case_with_a_dead_letter_emits_every_window(spark, shop, tmp_path):
    """docs/testing.md: "every window of the case is emitted", also when the ENRICH has a DEAD
    LETTER (a stage in STREAMING): the end-of-input rows, dropped right after the read, still
    move the stage readers' watermark (#33 item 1: 0 of 2 windows were written)."""
    (tmp_path / "shop.flow").write_text(WINDOWED)
    path = shop("""
    cases:
      - name: two windows
        sources:
          orders:
            - {id: o1, customer: c1, amount: 20.0, ts: 2026-11-01 12:00:00}
            - {id: o2, customer: c2, amount: 30.0, ts: 2026-11-01 12:01:10}
            - {id: o3, customer: c3, amount: 40.0, ts: 2026-11-01 12:01:20}
        enrich:
          enriched:
            - {key: c1, answer: {tier: gold}}
            - {key: c2, answer: {tier: gold}}
            - {key: c3, error: HTTP 500 boom}
        expect:
          per_minute:
            - {tier: gold, w: {start: 2026-11-01 12:00:00, end: 2026-11-01 12:01:00}, n: 1}
            - {tier: gold, w: {start: 2026-11-01 12:01:00, end: 2026-11-01 12:02:00}, n: 1}
        dead_letters:
          enriched:
            - {kind: error, key: {customer: c3}, error: "CallError: HTTP 500 boom", attempts: 1}
    """)
    code, text = _run(path)
    assert code == 0, text
    assert "PASS  two windows" in text, text


def test_a_case_gets_an_answer_store_of_its_own(spark, shop, tmp_path):
    """STORE: a case starts from an empty store of its own, as a first run does; the pipeline's
    store (which may hold a real run's answers) is neither read nor written."""
    import asyncio

    from dslc.runtime.store.open_stores import make_store

    flow = tmp_path / "shop.flow"
    flow.write_text(flow.read_text().replace("PIPELINE shop MODE BATCH;", "PIPELINE shop MODE BATCH ANSWERS 'real.db';")
                    .replace("  TIMEOUT 1s\n", "  TIMEOUT 1s STORE\n"))
    real = tmp_path / "real.db"

    async def fill() -> None:       # a real run's answer for c1: not the case's
        store = make_store(str(real))
        await store.open()
        await store.put_many("enriched", [('["GET","http://127.0.0.1:9/customers/c1"]', {"tier": "stale"})], None)
        await store.close()

    asyncio.run(fill())
    before = real.read_bytes()
    path = shop(f"""
    cases:
      - name: the case's own answers
        sources:{ORDERS}
        enrich:{ANSWERS}
        expect:
          enriched:
            - {{id: o1, customer: c1, tier: gold}}
            - {{id: o2, tier: null}}
    """)
    code, text = _run(path)
    assert code == 0, text
    assert real.read_bytes() == before


def test_one_line_per_case_unless_verbose(spark, shop, capfd):
    """#41 item 10: a case is one line (its live progress, metrics table and diagnosis stay in its
    folder); `dslc test -v` shows them too."""
    path = shop(f"""
    cases:
      - name: answers, a miss and an error
        sources:{ORDERS}
        enrich:{ANSWERS}
        expect:
          enriched:
            - {{id: o1, customer: c1, tier: gold}}
            - {{id: o2, tier: null, ts: 2026-11-01 12:00:01}}
    """)
    capfd.readouterr()
    code, text = _run(path)
    assert code == 0 and text.splitlines()[1:] == [text.splitlines()[1], "1 passed, 0 failed"], text
    assert text.splitlines()[1].startswith("  PASS  answers, a miss and an error (")
    quiet = capfd.readouterr()
    assert "dslc: per-operator metrics" not in quiet.err + quiet.out and "dslc: progress" not in quiet.err
    out = io.StringIO()
    assert run_paths([str(path)], out=out, verbose=True) == 0
    loud = capfd.readouterr()
    assert "dslc: per-operator metrics" in loud.err and "dslc: enriched: " in loud.err
