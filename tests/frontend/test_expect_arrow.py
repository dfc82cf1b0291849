"""A constraint judged per batch with pyarrow.compute (compiler/plan/expect_arrow.py,
runtime/core/expect_batch.py) gives, row by row, what its Python form gives and what Spark gives;
the chain's EXPECT operator passes on, drops, quarantines and counts the same rows either way."""
from __future__ import annotations

import decimal
import math
import random

import pytest
import sqlglot
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dslc.compiler.plan import expect_arrow
from dslc.compiler.plan.expect_python import translate
from dslc.runtime import config as C
from dslc.runtime.core import expect_batch
from dslc.runtime.core.chain import OperatorChain
from dslc.runtime.core.expect_operator import ExpectationFailed, ExpectOperator, compiled
from dslc.runtime.core.operator import Watermark

COLUMNS = {"amount": ("amount", "DOUBLE"), "n": ("n", "INT"), "fee": ("fee", "DECIMAL(10,2)"),
           "country": ("country", "STRING"), "ok": ("ok", "BOOLEAN")}
NUMBERS = ["amount", "n", "fee"]
LITERALS = ["0", "1", "-2", "2.5", "0.1", "-0.05", "1e1", "2 * 100.0", "100"]
OPS = ["=", "<>", "<", "<=", ">", ">="]
TEXTS = ["FR", "a", "", " a ", "ß", "é"]
PATTERNS = ["F%", "%a%", "_", "a_%", "%", "ß%"]


def condition(rng: random.Random, depth: int = 0) -> str:
    """A random condition over COLUMNS from the part of Spark SQL both forms cover."""
    if depth < 2 and rng.random() < 0.4:
        pick = rng.random()
        if pick < 0.4:
            return f"({condition(rng, depth + 1)}) AND ({condition(rng, depth + 1)})"
        if pick < 0.8:
            return f"({condition(rng, depth + 1)}) OR ({condition(rng, depth + 1)})"
        return f"NOT ({condition(rng, depth + 1)})"
    number, other, literal, op = rng.choice(NUMBERS), rng.choice(NUMBERS), rng.choice(LITERALS), rng.choice(OPS)
    atoms = [
        f"{number} {op} {literal}", f"{literal} {op} {number}", f"{number} {op} {other}",
        f"{number} BETWEEN {rng.choice(LITERALS)} AND {rng.choice(LITERALS)}",
        f"{number} IN ({literal}, {rng.choice(LITERALS)}{', NULL' if rng.random() < 0.3 else ''})",
        f"{number} IS NULL", f"{number} IS NOT NULL", "country IS NULL", "isnotnull(country)",
        f"country {op} '{rng.choice(TEXTS)}'", f"country LIKE '{rng.choice(PATTERNS)}'",
        f"country IN ('{rng.choice(TEXTS)}', '{rng.choice(TEXTS)}'{', NULL' if rng.random() < 0.3 else ''})",
        f"length(trim(country)) {op} {rng.randint(0, 3)}", f"coalesce({number}, {literal}) {op} {rng.choice(LITERALS)}",
        f"{number} * {rng.choice(['2', '-1', '0.5'])} + {other} {op} {literal}", f"{number} - {other} {op} 0",
        f"-{number} {op} {literal}", "abs(amount) < 5", "abs(fee) >= 0.5", "ok", "NOT ok", "ok = (n > 0)",
    ]
    return rng.choice(atoms)


def row(rng: random.Random) -> dict:
    def maybe(value):
        return None if rng.random() < 0.15 else value
    amount = rng.choice([0.0, -0.0, 2.5, -2.0, 0.1, 10.0, 100.0, 200.0, math.inf, -math.inf, math.nan,
                         rng.uniform(-300, 300)])
    return {"amount": maybe(amount), "n": maybe(rng.randint(-200, 200)),
            "fee": maybe(decimal.Decimal(rng.randint(-30000, 30000)).scaleb(-2)),
            "country": maybe(rng.choice(TEXTS + ["FRA", "xa", "aß"])), "ok": maybe(rng.random() < 0.5)}


def forms(text: str):
    tree = sqlglot.parse_one(text, dialect="spark")
    python = translate(tree, COLUMNS)
    return python, expect_arrow.translate(tree, COLUMNS) if python.python else python


def arrow_values(arrow: str, rows: list[dict]) -> list:
    return expect_batch.compiled(arrow)(expect_batch.Columns(rows)).to_pylist()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.randoms(use_true_random=False))
def test_the_arrow_form_judges_every_row_as_the_python_form_does(rng):
    text = condition(rng)
    python, arrow = forms(text)
    rows = [row(rng) for _ in range(30)]
    if arrow.python is None:
        return
    check = compiled(python.python)
    assert arrow_values(arrow.python, rows) == [check(r) for r in rows], text


def test_most_conditions_have_an_arrow_form():
    rng = random.Random(3)
    texts = [condition(rng) for _ in range(300)]
    with_python = [t for t in texts if forms(t)[0].python]
    assert sum(forms(t)[1].python is not None for t in with_python) > 0.9 * len(with_python)


@pytest.mark.parametrize("text", ["coalesce(fee, 0.1) = 0.1", "coalesce(0.1, fee) = 0.1",
                                  "(amount = 0) OR (coalesce(fee, -0.05) = -0.05)"])
def test_a_constant_in_coalesce_takes_the_decimal_columns_type(text):
    """Found by the property above in CI: the Python form filled a NULL fee (DECIMAL) with the
    float 0.1, which is not Decimal('0.1'); Spark and the Arrow form say the row holds."""
    python, arrow = forms(text)
    rows = [{"amount": 1.0, "n": 1, "fee": None, "country": "FR", "ok": True}]
    assert [compiled(python.python)(r) for r in rows] == arrow_values(arrow.python, rows) == [True]


@pytest.mark.parametrize("text, why", [
    ("upper(country) = 'SS'", "upper"), ("n > NULL", "NULL"), ("1 < 2", "constant"),
    ("country LIKE 'a\\\\%'", "backslash"),
])
def test_a_condition_without_an_arrow_form_says_why(text, why):
    python, arrow = forms(text)
    assert python.python is not None and arrow.python is None and why in arrow.why_not


def test_a_value_that_does_not_fit_its_type_sends_the_batch_to_the_python_form():
    check = expect_batch.compiled(forms("fee > 0.1")[1].python)
    with pytest.raises(expect_batch.Unjudged):
        expect_batch.broken([check], [{"fee": 0.5}])     # a float where a DECIMAL is declared


@pytest.mark.spark
def test_the_arrow_form_judges_generated_rows_as_spark_does(spark):
    from pyspark.sql.types import (
        BooleanType,
        DecimalType,
        DoubleType,
        IntegerType,
        StringType,
        StructField,
        StructType,
    )
    rng = random.Random(45)
    rows = [row(rng) for _ in range(60)]
    texts = [t for t in dict.fromkeys(condition(rng) for _ in range(80)) if forms(t)[1].python]
    schema = StructType([StructField("amount", DoubleType()), StructField("n", IntegerType()),
                         StructField("fee", DecimalType(10, 2)), StructField("country", StringType()),
                         StructField("ok", BooleanType())])
    frame = spark.createDataFrame([tuple(r[c] for c in COLUMNS) for r in rows], schema)
    got = frame.selectExpr(*[f"({t}) AS c{i}" for i, t in enumerate(texts)]).collect()
    for i, text in enumerate(texts):
        assert arrow_values(forms(text)[1].python, rows) == [g[i] for g in got], text


# ---- the operator: per batch and per row, the same rows out


def _expect(arrow: bool, actions=("WARN", "DROP", "QUARANTINE")) -> C.Expect:
    texts = ["amount > 0", "country IN ('FR', 'a', 'ß')", "fee BETWEEN -100 AND 100", "upper(country) <> 'SS'"]
    constraints = []
    for i, text in enumerate(texts):
        python, form = forms(text)
        action = actions[i % len(actions)]
        constraints.append(C.Constraint(name=f"c{i}", line=10 + i, sql=text, action=action,
                                        path=f"q/{i}" if action == "QUARANTINE" else None,
                                        python=python.python, arrow=form.python if arrow else None))
    return C.Expect(name="orders", line=9, constraints=tuple(constraints))


def _run(expect: C.Expect, rows: list, chunks: int = 3):
    operator = ExpectOperator(expect)
    chain = OperatorChain([operator])
    size = max(1, len(rows) // chunks)
    pieces = [rows[i:i + size] for i in range(0, len(rows), size)]
    out = chain.run_all([e for piece in pieces for e in piece]) if chunks == 1 else None
    if out is None:
        got_rows, letters = [], []
        for emitted in chain.run(pieces):
            got_rows += emitted.rows
            letters += emitted.dead_letters
        return got_rows, letters, operator.metrics()
    return out.rows, out.dead_letters, operator.metrics()


def test_the_operator_passes_drops_quarantines_and_counts_the_same_rows_per_batch_and_per_row():
    rng = random.Random(7)
    rows = [row(rng) for _ in range(500)]
    batched, per_row = _run(_expect(True), rows), _run(_expect(False), rows)
    assert batched == per_row
    assert batched[2]["dropped"] and batched[2]["quarantined"] and batched[2]["failed.c3"]   # every path taken


def test_the_operator_judges_rows_held_for_a_batch_before_a_watermark_passes():
    rows = [{"amount": 1.0, "n": 1, "fee": None, "country": "FR", "ok": True},
            {"amount": -1.0, "n": 1, "fee": None, "country": "FR", "ok": True}]
    elements = [rows[0], Watermark(5.0), rows[1]]
    seen = []

    class Probe:
        def open(self, output): self.output = output
        def process_element(self, r): seen.append(("row", r["amount"]))
        def process_watermark(self, w): seen.append(("watermark", w.timestamp))
        def finish(self): pass
        def close(self): pass
        def dispose(self): pass
        def metrics(self): return {"operator": "probe"}

    OperatorChain([ExpectOperator(_expect(True, ("WARN",))), Probe()]).run_all(elements)
    assert seen == [("row", 1.0), ("watermark", 5.0), ("row", -1.0)]


def test_a_batch_that_does_not_fit_is_judged_per_row_with_the_same_outcome():
    rng = random.Random(8)
    rows = [row(rng) for _ in range(100)]
    rows[50] = {**rows[50], "fee": 0.5}      # an answer's float where DECIMAL(10,2) is declared
    assert _run(_expect(True), rows, chunks=1) == _run(_expect(False), rows, chunks=1)


def test_fail_names_the_first_offending_row_per_batch_as_per_row():
    rows = [{"amount": a, "n": 1, "fee": None, "country": "FR", "ok": True} for a in (1.0, 2.0, -3.0, -4.0)]
    messages = []
    for arrow in (True, False):
        with pytest.raises(ExpectationFailed) as failed:
            _run(_expect(arrow, ("FAIL",)), rows, chunks=1)
        messages.append(str(failed.value))
    assert messages[0] == messages[1] and '"amount":-3.0' in messages[0]


def test_explain_says_how_each_constraint_inside_a_chain_is_judged(tmp_path):
    from dslc.compiler.optimizer.explain import render_text
    from dslc.compiler.optimizer.optimize import Options, optimize
    from dslc.compiler.pipeline import check_text

    text = """SOURCE readings FROM PARQUET 'input/' SCHEMA (device STRING, value DOUBLE);
STREAM scored = ENRICH readings WITH PYTHON 'u:score' RETURNS (score DOUBLE) ASYNC;
EXPECT ON scored
  CONSTRAINT in_range CHECK (value BETWEEN 0 AND 100)
  CONSTRAINT shouting CHECK (upper(device) <> device);
STREAM labelled = PROCESS scored USING PYTHON 'u:label' RETURNS (device STRING, score DOUBLE);
SINK labelled TO PARQUET 'out/' MODE OVERWRITE;
"""
    (tmp_path / "u.py").write_text("async def score(row):\n    return {}\n\ndef label(row):\n    return row\n")
    explained = render_text(optimize(check_text(text, str(tmp_path / "t.flow")), Options()))
    assert "in_range -> WARN, judged per batch (Arrow)" in explained
    assert "shouting -> WARN, judged per row (UPPER(device) (function upper) has no Arrow form)" in explained


def _counted(operator: ExpectOperator) -> list[int]:
    """Count how many batches reach the operator's Arrow checks."""
    tries = [0]
    checks = operator.batch_checks

    def first(b):
        tries[0] += 1
        return checks[0](b)
    operator.batch_checks = [first, *checks[1:]]
    return tries


def test_a_type_arrow_has_no_kernel_for_is_judged_per_row_without_trying_each_batch_again():
    python, _ = forms("amount > 0")
    expect = C.Expect(name="orders", line=9, constraints=(C.Constraint(
        name="c0", line=10, sql="amount > 0", action="DROP", python=python.python,
        arrow="pc.and_(pc.greater(b('amount', 'DOUBLE'), 0.0), pc.greater(b('tag', 'BINARY'), 0.0))"),))
    operator = ExpectOperator(expect)      # no kernel compares a binary with a double
    tries = _counted(operator)
    rows = [{"amount": float(i - 2), "tag": b"x"} for i in range(9)]
    out = [r for emitted in OperatorChain([operator]).run([rows[0:3], rows[3:6], rows[6:9]]) for r in emitted.rows]
    assert out == rows[3:] and tries == [1]


def test_a_value_that_does_not_fit_sends_only_its_batch_per_row():
    rng = random.Random(9)
    rows = [row(rng) for _ in range(90)]
    rows[10] = {**rows[10], "fee": 0.5}      # in the first of three batches only
    operator = ExpectOperator(_expect(True))
    tries = _counted(operator)
    got = [r for emitted in OperatorChain([operator]).run([rows[0:30], rows[30:60], rows[60:90]]) for r in emitted.rows]
    assert got == _run(_expect(False), rows)[0] and tries == [3]
