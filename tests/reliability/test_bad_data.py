"""6. Bad data: every kind has a defined outcome (the table in docs/operations.md, "Guarantees").

- Input rows that do not match the SCHEMA: the job fails with Spark's message (FAILFAST, the
  default since #33 item 4); with OPTIONS (mode = 'PERMISSIVE') the bad field is NULL, a line
  that is not JSON at all a row of NULLs, and `_corrupt_record` keeps the line.
- NULL in a URL placeholder column: an error of the element (ON ERROR), no request is made.
- NULL in a BROADCAST KEY column: the job fails, naming the state, the column and the row.
- Service answers that are not JSON, too big (> 10 MiB), a JSON scalar, or whose field does
  not fit its RETURNS type: errors of the element (ON ERROR), retried like any error; an answer
  with missing fields gives NULLs, extra fields are ignored, 404 is a miss.
"""
from __future__ import annotations

import json
from collections import Counter

import pytest
from reliability_support import dead_letters, parquet_rows, run_flow, write_jsonl

from dslc.runtime.calls.http import MAX_BODY_BYTES

pytestmark = [pytest.mark.spark]

FLOW = """SOURCE items FROM JSON 'in/' OPTIONS (mode = 'PERMISSIVE') SCHEMA (id STRING, amount DOUBLE);
STREAM enriched = ENRICH items WITH HTTP GET '{base}/svc/{{id}}' RETURNS (score DOUBLE, label STRING)
  ASYNC ORDERED CAPACITY 4 TIMEOUT 10s RETRY 1
  ON MISS NULL ON ERROR DEAD LETTER 'dlq' UP TO 100%;   -- most rows are bad on purpose
SINK enriched TO PARQUET 'out' MODE OVERWRITE;
"""
JSON_TYPE = "application/json"


def test_bad_rows_and_bad_answers_have_defined_outcomes(spark, flaky, tmp_path):
    service = flaky()
    service.bodies.update({
        "good": (200, JSON_TYPE, json.dumps({"score": 0.5, "label": "g"})),
        "badtype": (200, JSON_TYPE, json.dumps({"score": 1.0, "label": "b"})),
        "extra": (200, JSON_TYPE, json.dumps({"score": 2, "label": 7, "other": [1, 2]})),
        "missing": (200, JSON_TYPE, json.dumps({})),
        "gone": (404, JSON_TYPE, json.dumps({"error": "no such key"})),
        "html": (200, "text/html", "<html>oops</html>"),
        "scalar": (200, JSON_TYPE, "42"),
        "wrongtype": (200, JSON_TYPE, json.dumps({"score": "high", "label": "w"})),
        "big": (200, JSON_TYPE, json.dumps({"score": 1.0, "label": "x" * MAX_BODY_BYTES})),
    })
    lines = [json.dumps({"id": "good", "amount": 1.5}),
             json.dumps({"id": "badtype", "amount": "not a number"}),       # field does not fit SCHEMA
             "this line is not JSON at all",                                 # whole row malformed
             json.dumps({"amount": 2.0}),                                    # id missing -> NULL
             json.dumps({"id": None, "amount": 3.0}),
             *[json.dumps({"id": k, "amount": 1.0}) for k in ("extra", "missing", "gone", "html",
                                                              "scalar", "wrongtype", "big")]]
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "rows.json").write_text("\n".join(lines) + "\n")
    flow = tmp_path / "pipeline.flow"
    flow.write_text(FLOW.format(base=service.base))
    run_flow(flow)

    rows = parquet_rows(tmp_path / "out")
    corrupt = {r["id"]: r.pop("_corrupt_record") for r in rows}
    assert corrupt == {"good": None, "badtype": lines[1], "extra": None, "missing": None, "gone": None}
    out = {r["id"]: r for r in rows}
    assert out == {
        "good": {"id": "good", "amount": 1.5, "score": 0.5, "label": "g"},
        "badtype": {"id": "badtype", "amount": None, "score": 1.0, "label": "b"},     # PERMISSIVE: NULL
        "extra": {"id": "extra", "amount": 1.0, "score": 2.0, "label": "7"},          # extra field ignored
        "missing": {"id": "missing", "amount": 1.0, "score": None, "label": None},
        "gone": {"id": "gone", "amount": 1.0, "score": None, "label": None},           # 404: miss -> NULL
    }
    letters = dead_letters(tmp_path / "dlq")
    by_key = Counter(json.dumps(d["key"]) for d in letters)
    assert by_key.pop(json.dumps({"id": None})) == 3 and set(by_key.values()) == {1}   # the three NULL ids
    errors = {d["key"]["id"]: d for d in letters}
    null_rows = sorted((d["row"]["amount"] or 0.0) for d in letters if d["key"]["id"] is None)
    assert null_rows == [0.0, 2.0, 3.0]       # the malformed line (all NULL), the missing and the null id
    assert all(d["attempts"] == 1 for d in letters if d["key"]["id"] is None)   # never sent, not retried
    assert errors[None]["error"].endswith("placeholder column id is null")
    assert "not JSON" in errors["html"]["error"]
    assert "expected an object or array" in errors["scalar"]["error"]
    assert f"exceeds {MAX_BODY_BYTES}" in errors["big"]["error"]
    assert "answer field 'score' is declared DOUBLE but got str 'high'" in errors["wrongtype"]["error"]
    for key in ("html", "scalar", "big", "wrongtype"):      # the same call would answer the same: not retried
        assert errors[key]["kind"] == "error" and errors[key]["error_class"] == "answer"
        assert errors[key]["attempts"] == 1 and service.by_key[key] == 1
    assert len(letters) == 7
    assert "None" not in service.by_key and "" not in service.by_key     # a NULL key never makes a call
    # every input line is accounted for exactly once
    assert len(out) + len(letters) == len(lines)


def test_malformed_rows_fail_the_job_with_failfast(spark, tmp_path):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "rows.json").write_text('{"id": "a", "amount": 1}\nnot json\n')
    flow = tmp_path / "pipeline.flow"
    flow.write_text("SOURCE items FROM JSON 'in/' OPTIONS (mode = 'FAILFAST') SCHEMA (id STRING, amount DOUBLE);\n"
                    "SINK items TO PARQUET 'out' MODE OVERWRITE;\n")
    with pytest.raises(Exception, match="(?i)malformed"):
        run_flow(flow)
    assert not (tmp_path / "out" / "_SUCCESS").exists()


def test_null_broadcast_key_fails_naming_state_column_and_row(spark, tmp_path):
    write_jsonl(tmp_path / "in" / "orders.json", [{"id": "o1", "country": "FR"}])
    write_jsonl(tmp_path / "rules" / "r.json", [{"rule_id": "r1", "country": "FR"},
                                                {"rule_id": None, "country": "DE"}])
    flow = tmp_path / "pipeline.flow"
    flow.write_text("SOURCE orders FROM JSON 'in/' SCHEMA (id STRING, country STRING);\n"
                    "SOURCE rule_rows FROM JSON 'rules/' SCHEMA (rule_id STRING, country STRING);\n"
                    "BROADCAST rules FROM rule_rows KEY rule_id;\n"
                    "STREAM hits = MATCH orders AGAINST rules AS r WHERE orders.country = r.country;\n"
                    "SINK hits TO PARQUET 'out' MODE OVERWRITE;\n")
    with pytest.raises(Exception, match=r"broadcast state 'rules': KEY column 'rule_id' is null in row .*'DE'"):
        run_flow(flow)


def test_python_enrich_answer_of_the_wrong_type_is_an_element_error(tmp_path):
    """The same rule for WITH PYTHON: a user function's bad field is the element's error, with
    the column named, instead of a failed task when the chain builds its Arrow batch."""
    from dslc.runtime.config import Column, Enrich, Outcome, PythonCall
    from dslc.runtime.core.async_operator import EnrichOperator

    (tmp_path / "answers.py").write_text(
        "def answer(row):\n"
        "    return {'ok': {'n': 1, 'flag': True}, 'float': {'n': 2.0, 'flag': False},\n"
        "            'text': {'n': 'three'}, 'big': {'n': 2**40}, 'flag': {'flag': 'yes'}}[row['id']]\n")
    config = Enrich(name="typed", line=4, call=PythonCall("answers:answer", (str(tmp_path),)),
                    returns=(Column("n", "INT"), Column("flag", "BOOLEAN")), key_columns=("id",),
                    on_error=Outcome.DEAD_LETTER)

    class Out:
        rows: list = []
        letters: list = []

        def emit(self, row):
            self.rows.append(row)

        def emit_watermark(self, watermark):
            pass

        def emit_dead_letter(self, letter):
            self.letters.append(letter)

    out = Out()
    op = EnrichOperator(config)
    op.open(out)
    try:
        for key in ("ok", "float", "text", "big", "flag"):
            op.process_element({"id": key})
        op.finish()
        op.close()
    finally:
        op.dispose()
    assert [(r["id"], r["n"], r["flag"]) for r in out.rows] == [("ok", 1, True), ("float", 2.0, False)]
    errors = {d["key"]["id"]: d["error"] for d in out.letters}
    assert errors == {
        "text": "CallError: answer field 'n' is declared INT but got str 'three'",
        "big": "CallError: answer field 'n' is declared INT but got int 1099511627776",
        "flag": "CallError: answer field 'flag' is declared BOOLEAN but got str 'yes'",
    }
