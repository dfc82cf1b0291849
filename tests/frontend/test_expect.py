"""EXPECT as written → the plan: which ON VIOLATION is whose, the actions, the conditions checked
as SQL, the limits a MODEL is asked to keep, and the Python form a chain runs (run against
real rows by the runtime's own compiler of it)."""
from __future__ import annotations

import decimal

import pytest
import sqlglot
from frontend_support import ORDERS, errors_of

from dslc.compiler.frontend.parser import parse_text
from dslc.compiler.pipeline import check_text
from dslc.compiler.plan.expect_python import translate
from dslc.runtime.core.expect_operator import compiled
from dslc.runtime.schema.json_schema import mismatch, returns_schema

LABELLED = """
SOURCE tickets FROM JSON 'data/' SCHEMA (ticket_id STRING, subject STRING);
STREAM labelled = ENRICH tickets
  WITH MODEL 'm' AT 'http://127.0.0.1:1/v1' PROMPT 'Subject: {subject}'
  RETURNS (category STRING, urgency INT, score DOUBLE);
EXPECT ON labelled
  CONSTRAINT known_category CHECK (category IN ('billing', 'bug', 'account', 'other'))
  CONSTRAINT urgency_range  CHECK (urgency BETWEEN 1 AND 5) ON VIOLATION DROP
  CONSTRAINT has_ticket     CHECK (ticket_id IS NOT NULL) ON VIOLATION FAIL
  CONSTRAINT no_bugs        CHECK (category IN ('billing', 'account', 'bug'))
  CONSTRAINT sure           CHECK (score > 0.5 AND category <> 'x' AND 1 <= urgency) ON VIOLATION WARN
  ON VIOLATION QUARANTINE 'target/quarantine/labelled';
SINK labelled TO PARQUET 'target/out';
"""


def test_an_on_violation_after_a_constraint_is_its_own_unless_it_has_one():
    (expect,) = [s for s in parse_text("EXPECT ON x ON VIOLATION DROP CONSTRAINT a CHECK (a > 0) "
                                       "CONSTRAINT b CHECK (b) ON VIOLATION FAIL;").statements]
    assert expect.default.action.value == "DROP"
    assert [c.violation.action.value if c.violation else None for c in expect.constraints] == [None, "FAIL"]
    (expect,) = parse_text("EXPECT ON x CONSTRAINT a CHECK (a) ON VIOLATION FAIL ON VIOLATION WARN;").statements
    assert expect.constraints[0].violation.action.value == "FAIL" and expect.default.action.value == "WARN"
    (expect,) = parse_text("EXPECT ON x CONSTRAINT a CHECK (f(')') = ') on (') -- ) ON\n);").statements
    assert expect.constraints[0].check.text == "(f(')') = ') on (') -- ) ON\n)"


def test_the_plan_holds_each_constraint_with_its_action_and_columns():
    plan = check_text(LABELLED, "t.flow")
    expect = plan.expectation("LABELLED")
    assert [(c.name, c.action, c.path, c.line) for c in expect.constraints] == [
        ("known_category", "QUARANTINE", "target/quarantine/labelled", 7),
        ("urgency_range", "DROP", None, 8), ("has_ticket", "FAIL", None, 9),
        ("no_bugs", "QUARANTINE", "target/quarantine/labelled", 10), ("sure", "WARN", None, 11)]
    assert expect.constraints[4].columns == ("score", "category", "urgency")
    assert expect.strictest == "FAIL" and expect.columns() is None
    assert plan.expectation("tickets") is None


def test_what_json_schema_can_say_is_sent_to_the_model_and_still_checked():
    call = check_text(LABELLED, "t.flow").node("labelled").call
    assert call.limits == (("category", "enum", ("billing", "bug", "account")), ("urgency", "minimum", 1),
                           ("urgency", "maximum", 5), ("score", "exclusiveMinimum", 0.5))
    schema = returns_schema(check_text(LABELLED, "t.flow").node("labelled").returns, call.limits)
    assert schema["properties"]["category"] == {"type": "string", "enum": ["billing", "bug", "account"]}
    assert schema["properties"]["urgency"] == {"type": "integer", "minimum": 1, "maximum": 5}
    # an answer outside the enum still fits RETURNS: the EXPECT decides what becomes of it
    assert mismatch({"category": "other", "urgency": 9, "score": 0.1}, schema) is None


def test_an_expect_on_an_input_column_or_an_or_asks_nothing_of_the_model():
    text = LABELLED.replace("CONSTRAINT no_bugs        CHECK (category IN ('billing', 'account', 'bug'))", "")
    text = text.replace("(category IN ('billing', 'bug', 'account', 'other'))", "(category = 'a' OR urgency = 1)")
    text = text.replace("(urgency BETWEEN 1 AND 5)", "(subject IN ('a'))").replace("score > 0.5 AND ", "")
    assert check_text(text, "t.flow").node("labelled").call.limits == (("urgency", "minimum", 1),)


@pytest.mark.parametrize("condition, expected", [
    ("amount > 0", [True, False, None, True]),             # NaN is above every number, as in Spark
    ("amount BETWEEN 0 AND 10", [True, False, None, False]),
    ("country IN ('FR', 'DE')", [True, False, None, False]),
    ("country NOT IN ('FR', NULL)", [False, None, None, None]),
    ("country IS NOT NULL AND upper(country) LIKE 'F_'", [True, False, False, False]),
    ("NOT (amount < 5) OR length(trim(country)) = 2", [True, True, None, True]),
    ("NOT (amount < 5) OR length(country) = 3", [False, False, None, True]),
    ("coalesce(fee, 0) >= 0.1", [True, False, False, True]),
    ("amount <= 2 * 100.0", [True, True, None, False]),    # 2 * 100.0 is a DECIMAL in Spark
    ("fee * 2 > 0.1", [True, None, False, True]),
    ("fee * amount > 0.1", [True, None, None, True]),     # DECIMAL times DOUBLE is a DOUBLE
    ("fee > -0.05 AND fee * -2 > -0.5 - 1 * 0.1", [True, None, True, False]),    # literals folded once
    ("amount > 2 * -1.5", [True, True, None, True]),
])
def test_the_python_form_of_a_condition_judges_rows_as_spark_does(condition, expected):
    columns = {"amount": ("amount", "DOUBLE"), "country": ("country", "STRING"), "fee": ("fee", "DECIMAL(10,2)")}
    translated = translate(sqlglot.parse_one(condition, dialect="spark"), columns)
    check = compiled(translated.python)
    rows = [{"amount": 3.0, "country": "FR", "fee": decimal.Decimal("0.10")},
            {"amount": -1.0, "country": "US", "fee": None},
            {"amount": None, "country": None, "fee": decimal.Decimal("0.00")},
            {"amount": float("nan"), "country": " XY ", "fee": decimal.Decimal("0.50")}]
    assert [check(row) for row in rows] == expected


@pytest.mark.parametrize("condition, why", [
    ("amount / 2 > 1", "DIV"), ("CAST(country AS INT) > 1", "CAST"), ("country RLIKE 'x'", "regexp_like"),
    ("country = 1", "compares a string with a number"),
])
def test_a_condition_without_an_exact_python_form_says_why(condition, why):
    translated = translate(sqlglot.parse_one(condition, dialect="spark"),
                           {"amount": ("amount", "DOUBLE"), "country": ("country", "STRING")})
    assert translated.python is None and why in translated.why_not


def test_every_problem_of_an_expect_is_reported_at_its_place():
    text = ORDERS + ("EXPECT ON orders\n"
                     "  CONSTRAINT a CHECK (amout > 0)\n"
                     "  CONSTRAINT b CHECK (country) ON VIOLATION QUARANTINE 'target/out'\n"
                     "  CONSTRAINT c CHECK (sum(amount) > 0);\n"
                     "SINK orders TO PARQUET 'target/out';\n")
    assert errors_of(text) == [("E0204", 4, 23), ("E0354", 5, 22), ("E0353", 5, 56), ("E0355", 6, 22)]
