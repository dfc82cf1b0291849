"""The grammar and parser: every statement and option of the contract parses into the right AST,
with spans that point at the text they came from."""
from __future__ import annotations

import pytest
from frontend_support import VALID_PROGRAMS

from dslc.compiler.diagnostics import CompileError
from dslc.compiler.frontend import ast
from dslc.compiler.frontend.lexical import split_statements, unescape_string
from dslc.compiler.frontend.parser import parse
from dslc.compiler.source import SourceFile


def parse_one(text: str) -> tuple[SourceFile, ast.Statement]:
    source = SourceFile("t.flow", text)
    program = parse(source)
    assert len(program.statements) == 1
    return source, program.statements[0]


def at(source: SourceFile, node) -> str:
    """The source text a node's span covers."""
    return source.text[node.span.start:node.span.end]


def opts(stmt) -> dict[str, ast.Opt]:
    return {o.key: o for o in stmt.options}


# ---- PIPELINE and SET ---------------------------------------------------------------------

def test_pipeline_every_option():
    src, stmt = parse_one("PIPELINE fraud MODE STREAMING CHECKPOINT 'target/chk' TRIGGER EVERY 10s;")
    assert isinstance(stmt, ast.Pipeline)
    assert stmt.name.value == "fraud" and at(src, stmt.name) == "fraud"
    o = opts(stmt)
    assert o["mode"].args[0].value == "STREAMING"
    assert o["checkpoint"].args[0].value == "target/chk"
    assert at(src, o["checkpoint"].args[0]) == "'target/chk'"
    assert o["trigger"].args[0].text == "10s"
    assert at(src, o["trigger"]) == "TRIGGER EVERY 10s"
    assert at(src, stmt) == "PIPELINE fraud MODE STREAMING CHECKPOINT 'target/chk' TRIGGER EVERY 10s"


def test_pipeline_trigger_available_now_and_bare_pipeline():
    _, stmt = parse_one("pipeline p mode streaming trigger available now;")
    assert opts(stmt)["trigger"].args == ()
    _, bare = parse_one("PIPELINE p;")
    assert bare.options == ()


@pytest.mark.parametrize("text, value", [
    ("SET spark.sql.shuffle.partitions = 8;", "8"),
    ("SET spark.sql.session.timeZone = 'UTC';", "UTC"),
    ("set spark.x-y.z = true;", "true"),
    ("SET a.b = -1;", "-1"),
])
def test_set(text, value):
    from dslc.compiler.plan.values import literal_text
    src, stmt = parse_one(text)
    assert isinstance(stmt, ast.SetConf)
    assert literal_text(stmt.value) == value
    assert at(src, stmt.key) == stmt.key.value


# ---- SOURCE -------------------------------------------------------------------------------

def test_source_with_options_schema_watermark():
    text = ("SOURCE orders FROM JSON 'data/orders/'\n"
            "  OPTIONS (multiLine = 'false', 'max.files' = 10, header = true)\n"
            "  SCHEMA (order_id STRING, amount DECIMAL(10, 2), tags ARRAY<STRING>,\n"
            "          geo STRUCT<lat: DOUBLE, lon: DOUBLE>, attrs MAP<STRING, INT>, ts TIMESTAMP)\n"
            "  WATERMARK ts DELAY 30s;")
    src, stmt = parse_one(text)
    assert isinstance(stmt, ast.Source)
    assert stmt.connector.kind.value == "JSON" and stmt.connector.arg.value == "data/orders/"
    o = opts(stmt)
    pairs = [(k.value, v) for k, v in o["options"].args]
    assert [k for k, _ in pairs] == ["multiLine", "max.files", "header"]
    assert isinstance(pairs[0][1], ast.Str) and isinstance(pairs[1][1], ast.Num)
    assert isinstance(pairs[2][1], ast.Word)
    columns = o["schema"].args
    assert [(c.name.value, c.type.text) for c in columns] == [
        ("order_id", "STRING"), ("amount", "DECIMAL(10,2)"), ("tags", "ARRAY<STRING>"),
        ("geo", "STRUCT<lat:DOUBLE,lon:DOUBLE>"), ("attrs", "MAP<STRING,INT>"), ("ts", "TIMESTAMP")]
    assert at(src, columns[1]) == "amount DECIMAL(10, 2)"
    assert at(src, columns[3].type) == "STRUCT<lat: DOUBLE, lon: DOUBLE>"
    column, delay = o["watermark"].args
    assert (column.value, delay.text) == ("ts", "30s")
    assert at(src, delay) == "30s"


@pytest.mark.parametrize("connector, arg", [
    ("JSON 'p'", "p"), ("CSV 'p'", "p"), ("PARQUET 'p'", "p"), ("TEXT 'p'", "p"),
    ("RATE", None), ("KAFKA", None), ("PYTHON 'mod:Cls'", "mod:Cls"),
])
def test_source_connectors(connector, arg):
    _, stmt = parse_one(f"SOURCE s FROM {connector};")
    assert stmt.connector.kind.value == connector.split()[0]
    assert (stmt.connector.arg.value if stmt.connector.arg else None) == arg


# ---- BROADCAST ----------------------------------------------------------------------------

def test_broadcast_key_op():
    src, stmt = parse_one("BROADCAST rules FROM rule_updates KEY rule_id OP op;")
    assert isinstance(stmt, ast.Broadcast)
    assert (stmt.name.value, stmt.source.value, stmt.key.value, stmt.op.value, stmt.using) == \
        ("rules", "rule_updates", "rule_id", "op", None)
    assert at(src, stmt.op) == "op"


def test_broadcast_key_only_and_using_python():
    _, keyed = parse_one("BROADCAST rules FROM updates KEY id;")
    assert keyed.op is None
    _, python = parse_one("BROADCAST rules FROM updates USING PYTHON 'fraud_rules:apply';")
    assert python.key is None and python.using.value == "fraud_rules:apply"


# ---- STREAM -------------------------------------------------------------------------------

def test_select_keeps_the_query_text():
    text = "STREAM paid = SELECT order_id, amount\n  FROM orders WHERE amount > 0  -- trailing\n;"
    src, stmt = parse_one(text)
    assert isinstance(stmt, ast.Select)
    assert stmt.sql.text.startswith("SELECT order_id") and stmt.sql.text.endswith("-- trailing")
    assert at(src, stmt.sql) == stmt.sql.text


@pytest.mark.parametrize("query", [
    "WITH t AS (SELECT a FROM s) SELECT a FROM t",
    "VALUES (1), (2)",
    "select a from s where b = 'x; y' and c = \"--z\"",
])
def test_select_forms(query):
    _, stmt = parse_one(f"STREAM q = {query};")
    assert stmt.sql.text == query


def test_enrich_http_with_every_option():
    text = ("STREAM enriched = ENRICH paid\n"
            "  WITH HTTP GET 'http://127.0.0.1:8765/customers/{customer_id}'\n"
            "  RETURNS (tier STRING, risk DOUBLE)\n"
            "  ASYNC UNORDERED CAPACITY 100 TIMEOUT 1s\n"
            "  RETRY 3 BACKOFF 50ms EXPONENTIAL\n"
            "  CACHE 10000 TTL 5m\n"
            "  RATE 500 PER SECOND\n"
            "  ON MISS NULL\n"
            "  ON TIMEOUT DEAD LETTER 'target/dlq/enrich'\n"
            "  ON ERROR FAIL;")
    src, stmt = parse_one(text)
    assert isinstance(stmt, ast.Enrich)
    assert stmt.input.value == "paid"
    assert isinstance(stmt.call, ast.HttpCall)
    assert stmt.call.method.value == "GET"
    assert stmt.call.url.value == "http://127.0.0.1:8765/customers/{customer_id}"
    assert [(c.name.value, c.type.text) for c in stmt.returns] == [("tier", "STRING"), ("risk", "DOUBLE")]
    o = opts(stmt)
    assert o["async"].args[0].value == "UNORDERED"
    assert o["capacity"].args[0].text == "100"
    assert o["timeout"].args[0].text == "1s"
    assert [a.text if isinstance(a, ast.Num) else a.value for a in o["retry"].args] == ["3", "50ms", "EXPONENTIAL"]
    assert [a.text for a in o["cache"].args] == ["10000", "5m"]
    assert o["rate"].args[0].text == "500"
    assert o["on_miss"].args[0].value == "NULL"
    dead = o["on_timeout"].args[0]
    assert isinstance(dead, ast.Opt) and dead.args[0].value == "target/dlq/enrich"
    assert o["on_error"].args[0].value == "FAIL"
    assert at(src, o["retry"]) == "RETRY 3 BACKOFF 50ms EXPONENTIAL"
    assert at(src, o["on_timeout"]) == "ON TIMEOUT DEAD LETTER 'target/dlq/enrich'"


@pytest.mark.parametrize("clause, key, value", [
    ("ASYNC", "async", None), ("ASYNC ORDERED", "async", "ORDERED"),
    ("RETRY 2", "retry", None), ("RETRY 2 BACKOFF 1s FIXED", "retry", "FIXED"),
    ("ON MISS DROP", "on_miss", "DROP"), ("ON MISS RETRY", "on_miss", "RETRY"),
    ("ON ERROR NULL", "on_error", "NULL"), ("on timeout drop", "on_timeout", "DROP"),
])
def test_enrich_option_variants(clause, key, value):
    _, stmt = parse_one(f"STREAM e = ENRICH s WITH PYTHON 'm:f' RETURNS (x INT) {clause};")
    assert isinstance(stmt.call, ast.PythonCall) and stmt.call.ref.value == "m:f"
    args = opts(stmt)[key].args
    words = [a.value for a in args if isinstance(a, ast.Word)]
    assert (words[-1] if words else None) == value


def test_match_with_and_without_alias():
    text = "STREAM flagged = MATCH enriched AGAINST rules AS r\n  WHERE enriched.country = r.country;"
    src, stmt = parse_one(text)
    assert isinstance(stmt, ast.Match)
    assert (stmt.input.value, stmt.state.value, stmt.alias.value) == ("enriched", "rules", "r")
    assert stmt.predicate.text == "enriched.country = r.country"
    assert at(src, stmt.predicate) == stmt.predicate.text
    _, plain = parse_one("STREAM f = MATCH e AGAINST rules WHERE e.a = rules.a;")
    assert plain.alias is None


def test_process_with_and_without_states():
    src, stmt = parse_one("STREAM scored = PROCESS enriched WITH BROADCAST rules, limits "
                          "USING PYTHON 'fraud_rules:score' RETURNS (order_id STRING, score DOUBLE);")
    assert isinstance(stmt, ast.Process)
    assert [s.value for s in stmt.states] == ["rules", "limits"]
    assert stmt.ref.value == "fraud_rules:score"
    assert [c.name.value for c in stmt.returns] == ["order_id", "score"]
    assert at(src, stmt.states[1]) == "limits"
    _, bare = parse_one("STREAM p = PROCESS e USING PYTHON 'm:f' RETURNS (a INT);")
    assert bare.states == ()


# ---- SINK ---------------------------------------------------------------------------------

def test_sink_every_option():
    src, stmt = parse_one("SINK flagged TO PARQUET 'target/out' MODE APPEND PARTITION BY (country, day)"
                          " OPTIONS (compression = 'snappy');")
    assert isinstance(stmt, ast.Sink)
    assert stmt.input.value == "flagged" and stmt.connector.kind.value == "PARQUET"
    o = opts(stmt)
    assert o["mode"].args[0].value == "APPEND"
    assert [n.value for n in o["partition_by"].args] == ["country", "day"]
    assert at(src, o["partition_by"]) == "PARTITION BY (country, day)"
    assert o["options"].args[0][0].value == "compression"


@pytest.mark.parametrize("target", ["CONSOLE", "KAFKA OPTIONS (topic = 't')", "PYTHON 'm:f'", "JSON 'p'", "CSV 'p'"])
def test_sink_connectors(target):
    _, stmt = parse_one(f"SINK s TO {target};")
    assert stmt.connector.kind.value == target.split()[0]


# ---- lexical rules ------------------------------------------------------------------------

def test_keywords_are_case_insensitive():
    lower = parse(SourceFile("a", "source s from json 'p' schema (a string) watermark a delay 1s;"))
    mixed = parse(SourceFile("b", "SoUrCe s FrOm JSON 'p' ScHeMa (a STRING) WaTeRmArK a DeLaY 1s;"))
    strip = lambda p: [(type(s).__name__, s.name.value, [o.key for o in s.options]) for s in p.statements]
    assert strip(lower) == strip(mixed) == [("Source", "s", ["schema", "watermark"])]


def test_back_quoted_identifiers():
    src, stmt = parse_one("SOURCE `my source` FROM JSON 'p' SCHEMA (`a``b` STRING, `select` INT);")
    assert stmt.name.value == "my source"
    assert at(src, stmt.name) == "`my source`"
    assert [c.name.value for c in opts(stmt)["schema"].args] == ["a`b", "select"]


@pytest.mark.parametrize("literal, value", [
    ("'plain'", "plain"),
    ('"double"', "double"),
    (r"'it\'s'", "it's"),
    (r'"say \"hi\""', 'say "hi"'),
    (r"'a\nb\tc'", "a\nb\tc"),
    (r"'back\\slash'", "back\\slash"),
    (r"'\u00e9'", "é"),
    ("'a' 'b'", "ab"),
    ("'a'\n  \"b\" 'c'", "abc"),
    ("'semi;colon -- not a comment'", "semi;colon -- not a comment"),
    ("'multi\nline'", "multi\nline"),
])
def test_spark_string_rules(literal, value):
    src, stmt = parse_one(f"SINK s TO JSON {literal};")
    assert stmt.connector.arg.value == value
    assert at(src, stmt.connector.arg) == literal


def test_unescape_string_spark_escapes():
    assert unescape_string(r"'\0\b\r\Z'") == "\0\b\r\x1a"
    assert unescape_string(r"'\101'") == "A"
    assert unescape_string(r"'\%\_'") == "\\%\\_"          # kept for LIKE, as Spark does
    assert unescape_string(r"'\q'") == "q"                   # unknown escapes drop the backslash


def test_comments_anywhere_even_with_semicolons_and_quotes():
    text = ("-- header comment; with 'quotes' and \"more\";\n"
            "SOURCE s FROM JSON 'p' -- it's; a comment\n"
            "  SCHEMA (a STRING); -- after ; the end\n"
            "-- SINK s TO CONSOLE;\n"
            "SINK s TO CONSOLE; --")
    program = parse(SourceFile("t", text))
    assert [type(s).__name__ for s in program.statements] == ["Source", "Sink"]


def test_semicolons_inside_sql_strings_and_comments():
    text = ("STREAM q = SELECT a FROM s\n"
            "  WHERE b = 'x;y' AND c = \"it\\\"s; ok\" -- c; 'd'\n"
            "  AND `we;ird` > 0;\n"
            "SINK q TO CONSOLE;")
    program = parse(SourceFile("t", text))
    assert len(program.statements) == 2
    sql = program.statements[0].sql.text
    assert sql.endswith("AND `we;ird` > 0") and "'x;y'" in sql


def test_split_statements_marks_missing_final_semicolon():
    chunks = split_statements("SOURCE a FROM RATE; SINK a TO CONSOLE")
    assert [c.terminated for c in chunks] == [True, False]
    assert chunks[1].start == 19 and chunks[1].text == " SINK a TO CONSOLE"


def test_empty_and_comment_only_files_parse_to_nothing():
    assert parse(SourceFile("t", "")).statements == ()
    assert parse(SourceFile("t", "-- nothing here;\n\n;;\n")).statements == ()


@pytest.mark.parametrize("path", VALID_PROGRAMS, ids=lambda p: p.parent.name)
def test_every_span_points_into_its_statement(path):
    source = SourceFile.read(path)
    for stmt in parse(source).statements:
        text = at(source, stmt)
        assert text.split()[0].upper() in ("PIPELINE", "SET", "SOURCE", "BROADCAST", "STREAM", "SINK")
        name = getattr(stmt, "name", None) or getattr(stmt, "input", None) or stmt.key
        raw = at(source, name)
        assert raw.strip("`") == name.value or raw == name.value
        assert stmt.span.start <= name.span.start < name.span.end <= stmt.span.end


def test_syntax_errors_are_collected_per_statement():
    text = "SOURCE a FROM JSON 'p' SCHEMA (x STRING;\nSINK a TO;\nSINK a TO CONSOLE;"
    with pytest.raises(CompileError) as info:
        parse(SourceFile("t", text))
    assert [(d.code, *info.value.source.line_col(d.span.start)) for d in info.value.diagnostics] == \
        [("E0101", 1, 40), ("E0101", 2, 10)]


@pytest.mark.parametrize("clause, number, unit", [
    ("UP TO 5%", "5", "%"), ("up to 2.5 %", "2.5", "%"), ("UP TO 100 ROWS", "100", "ROWS"), ("UP TO 0 rows", "0", "ROWS"),
])
def test_a_dead_letter_path_with_its_ceiling(clause, number, unit):
    src, stmt = parse_one(f"STREAM e = ENRICH s WITH PYTHON 'm:f' RETURNS (x INT) ON ERROR DEAD LETTER 'dlq' {clause};")
    dead = opts(stmt)["on_error"].args[0]
    path, ceiling = dead.args
    assert path.value == "dlq" and ceiling.key == "ceiling"
    assert ceiling.args[0].text == number and ceiling.args[1].value == unit
    assert at(src, ceiling) == clause
