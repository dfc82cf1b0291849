"""The REPL's `:db on`: statements are also checked against the live DATABASEs (as `dslc check
--db`); a statement the database refuses is not kept; `:db off` goes back to the fast check."""
from __future__ import annotations

import io

from dslc.compiler.cli.repl import Repl
from dslc.compiler.cli.repl_session import Session


def test_db_on_checks_statements_against_the_database(postgres, tmp_path):
    postgres.execute("DROP TABLE IF EXISTS repl_customers")
    postgres.execute("CREATE TABLE repl_customers (customer_id TEXT PRIMARY KEY, tier TEXT)")
    out, err = io.StringIO(), io.StringIO()
    repl = Repl(Session(folder=tmp_path), out=out, err=err)
    repl.feed(f"DATABASE crm AT '{postgres.url()}';")
    repl.feed("SOURCE orders FROM JSON 'in/' SCHEMA (order_id STRING, customer_id STRING);")
    wrong = ("STREAM e = ENRICH orders WITH SQL crm 'SELECT tierr FROM repl_customers "
             "WHERE customer_id = {customer_id}' RETURNS (tierr STRING);")
    repl.feed(wrong)
    assert repl.errors == 0                  # the fast check knows no table
    repl.feed(":db on")
    assert "then the live databases" not in out.getvalue()
    assert repl.errors == 1 and 'column "tierr" does not exist' in err.getvalue()
    assert repl.session.db_check is False    # the kept statements did not pass: still off
    repl.feed(":reset")
    repl.feed(":db on")
    assert out.getvalue().rstrip().endswith("checks: the fast check only, then the live databases")
    repl.feed(f"DATABASE crm AT '{postgres.url()}';")
    repl.feed("SOURCE orders FROM JSON 'in/' SCHEMA (order_id STRING, customer_id STRING);")
    repl.feed(wrong)
    assert repl.errors == 2 and len(repl.session.statements) == 2      # refused, not kept
    repl.feed(wrong.replace("tierr", "tier"))
    assert repl.errors == 2 and len(repl.session.statements) == 3
    repl.feed(":db off")
    assert out.getvalue().rstrip().endswith("checks: the fast check only")
