"""`dslc check --db`: the queries, sources and sinks of a pipeline against the live PostgreSQL, with
file:line:col diagnostics, a caret and a hint; `dslc check` without --db never connects for them.
Also the SCHEMA read from the database at compile time, and what is said when it cannot be."""
from __future__ import annotations

import socket

import pytest

from dslc.compiler.cli.main import main
from dslc.compiler.plan import live_database


@pytest.fixture(autouse=True)
def fresh_answers():
    """Each test sees the database as it made it (the compiler keeps answers for a minute)."""
    live_database.forget()
    yield
    live_database.forget()


@pytest.fixture
def shop(crm):
    crm.execute("DROP TABLE IF EXISTS chk_customers; DROP TABLE IF EXISTS chk_out; DROP TABLE IF EXISTS chk_rules")
    crm.execute("CREATE TABLE chk_customers (customer_id TEXT PRIMARY KEY, tier TEXT, risk DOUBLE PRECISION, "
                "since DATE)")
    crm.execute("CREATE TABLE chk_out (order_id TEXT, tier INTEGER)")
    crm.execute("CREATE TABLE chk_rules (rule_id TEXT PRIMARY KEY, country TEXT, max_amount NUMERIC(10,2))")
    return crm


def _check(tmp_path, capsys, text: str, *extra: str) -> tuple[int, str]:
    flow = tmp_path / "pipeline.flow"
    flow.write_text(text)
    status = main(["check", *extra, str(flow)])
    out = capsys.readouterr()
    return status, out.out + out.err


HEAD = "DATABASE crm AT '{url}';\nSOURCE orders FROM JSON 'in/' SCHEMA (order_id STRING, customer_id STRING);\n"


def test_a_pipeline_that_fits_its_database_checks_ok(shop, tmp_path, capsys):
    text = HEAD.format(url=shop.flow_url) + (
        "STREAM e = ENRICH orders WITH SQL crm 'SELECT tier, risk FROM chk_customers WHERE customer_id = {customer_id}'\n"
        "  RETURNS (tier STRING, risk DOUBLE) BATCH 10;\n"
        "BROADCAST rules FROM DATABASE crm TABLE 'chk_rules' KEY rule_id;\n"
        "SINK e TO DATABASE crm TABLE 'chk_new' KEY (order_id) MODE UPSERT;\n")
    status, out = _check(tmp_path, capsys, text, "--db")
    assert (status, out.strip()) == (0, f"{tmp_path / 'pipeline.flow'}: ok")


def test_unknown_table_and_unknown_column_inside_the_query_with_did_you_mean(shop, tmp_path, capsys):
    text = HEAD.format(url=shop.flow_url) + (
        "STREAM e = ENRICH orders WITH SQL crm 'SELECT tier FROM chk_customer WHERE customer_id = {customer_id}'\n"
        "  RETURNS (tier STRING);\n"
        "STREAM f = ENRICH e WITH SQL crm 'SELECT tierr AS t2 FROM chk_customers WHERE customer_id = {customer_id}'\n"
        "  RETURNS (t2 STRING);\n"
        "SINK f TO JSON 'out';\n")
    status, out = _check(tmp_path, capsys, text)
    assert status == 0                                  # without --db nothing is asked
    status, shown = _check(tmp_path, capsys, text, "--db")
    assert status == 1, shown
    lines = shown.splitlines()
    table = next(i for i, line in enumerate(lines) if 'relation "chk_customer" does not exist' in line)
    assert lines[table].startswith(f"{tmp_path / 'pipeline.flow'}:3:57: error[E0336]: DATABASE crm:")
    assert lines[table + 2].strip().endswith("^" * len("chk_customer"))
    assert "did you mean 'chk_customers'?" in lines[table + 3]
    column = next(i for i, line in enumerate(lines) if 'column "tierr" does not exist' in line)
    assert ":5:42: error[E0336]" in lines[column]
    assert "tier" in lines[column + 3]                  # PostgreSQL's own hint, or did-you-mean
    assert "2 errors found" in shown


def test_a_returns_type_the_query_cannot_fill(shop, tmp_path, capsys):
    text = HEAD.format(url=shop.flow_url) + (
        "STREAM e = ENRICH orders WITH SQL crm 'SELECT tier, risk, since FROM chk_customers WHERE customer_id = {customer_id}'\n"
        "  RETURNS (tier INT, risk DOUBLE, since DATE);\n"
        "SINK e TO JSON 'out';\n")
    status, shown = _check(tmp_path, capsys, text, "--db")
    assert status == 1, shown
    assert ":4:17: error[E0336]: RETURNS column 'tier' is INT, but the query's tier is text (STRING)" in shown
    assert "hint: declare it STRING" in shown
    assert "risk" not in shown.split("error[E0336]")[1].split("\n")[0]
    assert "1 error found" in shown


def test_a_sink_table_with_an_incompatible_column_and_an_upsert_key_that_is_not_unique(shop, tmp_path, capsys):
    text = HEAD.format(url=shop.flow_url) + (
        "STREAM e = SELECT order_id, customer_id AS tier FROM orders;\n"
        "SINK e TO DATABASE crm TABLE 'chk_out' KEY (order_id) MODE UPSERT;\n")
    status, shown = _check(tmp_path, capsys, text, "--db")
    assert status == 1, shown
    assert ":4:30: error[E0336]: table chk_out does not fit SINK e: its column tier is integer, the stream's " \
           "is STRING" in shown
    assert "KEY (order_id) is not a unique key of table chk_out" in shown
    assert "hint: ALTER TABLE chk_out ADD PRIMARY KEY (order_id)" in shown


def test_a_source_schema_column_the_table_does_not_have(shop, tmp_path, capsys):
    text = f"DATABASE crm AT '{shop.flow_url}';\n" + (
        "SOURCE customers FROM DATABASE crm TABLE 'chk_customers' SCHEMA (customer_id STRING, tiers STRING, risk INT);\n"
        "SOURCE missing FROM DATABASE crm TABLE 'chk_custmers' SCHEMA (customer_id STRING);\n"
        "STREAM both = SELECT c.customer_id FROM customers c JOIN missing m ON c.customer_id = m.customer_id;\n"
        "SINK both TO JSON 'out';\n")
    status, shown = _check(tmp_path, capsys, text, "--db")
    assert status == 1, shown
    assert "'chk_customers' has no column 'tiers'" in shown and "did you mean 'tier'?" in shown
    assert "SCHEMA column 'risk' is INT, but 'chk_customers' has it as double precision" in shown
    assert "there is no table chk_custmers" in shown and "did you mean 'chk_customers'?" in shown


def test_without_schema_the_columns_and_types_come_from_the_database(shop, tmp_path, capsys):
    from dslc.compiler.pipeline import check_text

    p = check_text(f"DATABASE crm AT '{shop.flow_url}';\n"
                   "SOURCE customers FROM DATABASE crm TABLE 'chk_customers';\n"
                   "BROADCAST rules FROM DATABASE crm QUERY 'SELECT rule_id, max_amount * 2 AS doubled FROM chk_rules' "
                   "KEY rule_id;\n"
                   "SINK customers TO JSON 'out';\n", path=str(tmp_path / "p.flow"))
    assert [(c.name, c.type) for c in p.node("customers").schema] == [
        ("customer_id", "STRING"), ("tier", "STRING"), ("risk", "DOUBLE"), ("since", "DATE")]
    assert [(c.name, c.type) for c in p.node("rules").schema] == [("rule_id", "STRING"), ("doubled", "DECIMAL(38,18)")]


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_an_unreachable_database_is_said_at_its_statement_and_a_schema_is_asked_for(shop, tmp_path, capsys):
    url = shop.flow_url.replace(f":{shop.port}/", f":{_closed_port()}/")
    text = f"DATABASE crm AT '{url}';\nSOURCE customers FROM DATABASE crm TABLE 'chk_customers';\n" \
           "SINK customers TO JSON 'out';\n"
    status, shown = _check(tmp_path, capsys, text)
    assert status == 1, shown
    assert ":2:23: error[E0337]: the columns of SOURCE customers are read from DATABASE crm, which cannot " \
           "tell them: DATABASE crm" in shown and "cannot be reached" in shown
    assert "hint: write its columns: SCHEMA (col TYPE, ...)" in shown
    assert shop.password not in shown
    text = f"DATABASE crm AT '{url}';\nSOURCE customers FROM DATABASE crm TABLE 'chk_customers' " \
           "SCHEMA (customer_id STRING);\nSINK customers TO JSON 'out';\n"
    status, shown = _check(tmp_path, capsys, text, "--db")
    assert status == 1, shown
    assert ":1:1: error[E0336]: DATABASE crm cannot be checked" in shown and shop.password not in shown


def test_secrets_from_a_file(shop, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("CRM_PASSWORD")
    (tmp_path / "secrets.env").write_text(f"CRM_PASSWORD={shop.password}\n")
    monkeypatch.delenv("DSLC_SECRETS_FILE", raising=False)
    text = f"DATABASE crm AT '{shop.flow_url}';\nSOURCE customers FROM DATABASE crm TABLE 'chk_customers';\n" \
           "SINK customers TO JSON 'out';\n"
    status, out = _check(tmp_path, capsys, text, "--db", "--secrets", str(tmp_path / "secrets.env"))
    assert status == 0, out
