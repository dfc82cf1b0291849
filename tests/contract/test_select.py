"""STREAM = SELECT, as the contract states it: "any Spark SQL query over streams and sources"."""
from __future__ import annotations

import datetime as dt

import pytest

from contract.support import by
from dslc.compiler.diagnostics import CompileError
from dslc.compiler.pipeline import check_file

pytestmark = pytest.mark.spark

SOURCE = ("SOURCE orders FROM JSON 'in/orders/' SCHEMA (id STRING, customer_id STRING, amount DOUBLE, "
          "country STRING, ts TIMESTAMP);\n")
ORDERS = [{"id": f"o{i}", "customer_id": "c1" if i % 2 else "c2", "amount": float(i * 10), "country": "NL",
           "ts": f"2024-01-01T10:0{i}:30Z"} for i in range(6)]


def test_a_filter_and_projection_over_a_source(flow, mode):
    """"STREAM paid = SELECT order_id, customer_id, amount, country, ts FROM orders WHERE amount > 0;
    -- any Spark SQL query over streams and sources"."""
    flow.rows_file("in/orders/1.json", ORDERS)
    flow.run(SOURCE + """
STREAM paid = SELECT id, amount * 2 AS twice FROM orders WHERE amount > 0;
STREAM big = SELECT id FROM paid WHERE twice > 50;
SINK big TO PARQUET 'out/big';""", mode)
    assert sorted(r["id"] for r in flow.read("out/big")) == ["o3", "o4", "o5"]


def test_ctes_and_joins_of_two_sources(flow):
    """"any Spark SQL query over streams and sources" (docs/language.md: "`SELECT`, `WITH ... SELECT`, `VALUES`")."""
    flow.rows_file("in/orders/1.json", ORDERS)
    flow.rows_file("in/customers/1.json", [{"customer_id": "c1", "name": "Ann"}, {"customer_id": "c2", "name": "Bob"}])
    flow.run(SOURCE + """
SOURCE customers FROM JSON 'in/customers/' SCHEMA (customer_id STRING, name STRING);
STREAM named = WITH big AS (SELECT * FROM orders WHERE amount >= 30)
  SELECT big.id, c.name FROM big JOIN customers c ON big.customer_id = c.customer_id;
SINK named TO PARQUET 'out/n';""", "BATCH")
    assert by(flow.read("out/n"), "id", "name") == [("o3", "Ann"), ("o4", "Bob"), ("o5", "Ann")]


def test_a_windowed_count(flow):
    """"STREAM per_customer = SELECT customer_id, window(ts, '1 minute') AS w, count(*) AS n FROM
    flagged GROUP BY customer_id, window(ts, '1 minute');" (BATCH: docs/language.md E0311 for
    STREAMING after per-micro-batch operators)."""
    flow.rows_file("in/orders/1.json", ORDERS + [{**ORDERS[1], "id": "o9", "ts": "2024-01-01T10:01:50Z"}])
    flow.run(SOURCE + """
STREAM per_customer = SELECT customer_id, window(ts, '1 minute') AS w, count(*) AS n
  FROM orders GROUP BY customer_id, window(ts, '1 minute');
SINK per_customer TO PARQUET 'out/w';""", "BATCH")
    rows = flow.read("out/w")
    assert len(rows) == 6
    minute = {(r["customer_id"], r["w"]["start"].replace(tzinfo=None) if r["w"]["start"].tzinfo else r["w"]["start"]): r["n"]
              for r in rows}
    assert minute[("c1", dt.datetime(2024, 1, 1, 10, 1))] == 2


def test_unknown_columns_and_relations_are_reported_with_a_hint(flow):
    """docs/language.md: "Tables and columns are checked (E0201, E0204, with did-you-mean hints)"."""
    path = flow.write(SOURCE + "STREAM a = SELECT amout FROM orders;\nSTREAM b = SELECT id FROM ordrs;\n"
                      "SINK a TO CONSOLE;\nSINK b TO CONSOLE;")
    with pytest.raises(CompileError) as failed:
        check_file(path)
    assert [(d.code, d.hint) for d in failed.value.diagnostics] == [
        ("E0204", "did you mean 'amount'?"), ("E0201", "did you mean 'orders'?")]


def test_spark_sql_text_is_spark_sql(flow, mode):
    """"any Spark SQL query over streams and sources"; "`--` starts a comment"; strings "follow
    Spark SQL's rules (single or double quotes ...)": a `;` inside a string or a comment does not
    end the statement, a double-quoted string is a string, and VALUES may be joined with a source."""
    flow.rows_file("in/orders/1.json", [{**o, "note": ";" if o["id"] == "o1" else "x"} for o in ORDERS])
    flow.run("SOURCE orders FROM JSON 'in/orders/' SCHEMA (id STRING, note STRING, country STRING);\n"
             "STREAM semi = SELECT o.id, t.label -- a comment; with a semicolon\n"
             "  FROM orders o JOIN (VALUES ('NL', 'dutch')) AS t(c, label) ON o.country = t.c\n"
             "  WHERE o.note <> ';' AND o.country = \"NL\";\n"
             "SINK semi TO PARQUET 'out/s';", mode)
    assert by(flow.read("out/s"), "id", "label") == [(f"o{i}", "dutch") for i in (0, 2, 3, 4, 5)]
