"""PROVENANCE AS col on an ENRICH: parsed on any kind of call, typed as the struct of its kind
after the RETURNS columns, usable in SQL, and a name already taken is E0211 at the name."""
from __future__ import annotations

from frontend_support import ORDERS, PROGRAMS, errors_of, marked

from dslc.compiler.pipeline import check_text

FOLDER = PROGRAMS / "fraud"
HTTP = ORDERS + ("STREAM scored = ENRICH orders WITH HTTP GET 'http://127.0.0.1:9/c/{customer_id}'\n"
                 "  RETURNS (tier STRING) PROVENANCE AS NAME;\n"
                 "STREAM shown = SELECT order_id, how.source AS source, how.answered_at AS at, how.status FROM scored;\n"
                 "SINK shown TO CONSOLE;\n")


def test_the_column_is_the_struct_of_its_kind_after_returns_and_sql_reads_its_fields():
    p = check_text(HTTP.replace("NAME", "how"), str(FOLDER / "test.flow"))
    columns = [(c.name, c.type) for c in p.node("scored").schema]
    assert columns[-2:] == [("tier", "STRING"), ("how", "STRUCT<source: STRING, operator: STRING, line: INT, key: STRING, "
                            "attempts: INT, latency_ms: DOUBLE, answered_at: TIMESTAMP, status: INT, url: STRING>")]
    assert [(c.name, c.type) for c in p.node("shown").schema] == [
        ("order_id", "STRING"), ("source", "STRING"), ("at", "TIMESTAMP"), ("status", "INT")]
    assert p.node("scored").provenance == "how"


def test_a_model_adds_its_model_fields():
    text = ORDERS + ("STREAM labelled = ENRICH orders WITH MODEL 'gpt-test' AT 'http://127.0.0.1:9/v1'\n"
                     "  PROMPT 'Order {order_id}' RETURNS (label STRING) PROVENANCE AS how;\n"
                     "SINK labelled TO CONSOLE;\n")
    how = check_text(text, str(FOLDER / "test.flow")).node("labelled").schema[-1]
    assert how.type.endswith("model: STRING, system_fingerprint: STRING, prompt_sha256: STRING, tier: STRING>")


def test_a_name_already_taken_is_e0211_at_the_name():
    for taken in ("amount", "tier"):        # an input column, a RETURNS column
        text = HTTP.replace("NAME", taken).replace("how.", f"{taken}.")
        line, col = marked(text, f"AS {taken}")
        assert ("E0211", line, col + 3) in errors_of(text, FOLDER)
