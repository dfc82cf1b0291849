"""Each semantic check of the planner: the code, line and column it reports, and the schemas it
propagates when the program is right."""
from __future__ import annotations

import pytest
from frontend_support import ORDERS, PROGRAMS, diagnostics_of, errors_of, marked

from dslc.compiler.diagnostics import CompileError
from dslc.compiler.pipeline import check_source, check_text
from dslc.compiler.source import SourceFile

FOLDER = PROGRAMS / "fraud"          # fraud_rules.py lives there
RULES = ("SOURCE rule_updates FROM CSV 'data/rules/'\n"
         "  SCHEMA (rule_id STRING, op STRING, country STRING, max_amount DOUBLE);\n"
         "BROADCAST rules FROM rule_updates KEY rule_id OP op;\n")


def plan_of(text: str):
    return check_text(text, str(FOLDER / "test.flow"))


def schema(text: str, name: str) -> list[tuple[str, str]]:
    return [(f.name, f.type) for f in plan_of(text).node(name).schema]


def expect(text: str, *marks: tuple[str, str] | tuple[str, str, int]) -> None:
    """The diagnostics of `text` are exactly these (code, marked text[, nth occurrence])."""
    wanted = [(code, *marked(text, mark, *nth)) for code, mark, *nth in marks]
    assert errors_of(text, FOLDER) == sorted(wanted, key=lambda e: (e[1], e[2], e[0]))


# ---- names and structure -------------------------------------------------------------------

def test_unknown_relation_in_sql():
    text = ORDERS + "STREAM big = SELECT amount FROM ordrs;\nSINK big TO CONSOLE;"
    expect(text, ("E0201", "ordrs"))
    _, [diag] = diagnostics_of(text, FOLDER)
    assert diag.hint == "did you mean 'orders'?"


def test_unknown_input_of_enrich_match_process():
    text = (ORDERS + RULES
            + "STREAM e = ENRICH ordrs WITH PYTHON 'fraud_rules:score' RETURNS (x INT);\n"
            + "STREAM m = MATCH orders AGAINST rulez WHERE orders.country = rulez.country;\n"
            + "STREAM p = PROCESS orders WITH BROADCAST rulse USING PYTHON 'fraud_rules:score' RETURNS (x INT);\n"
            + "SINK orders TO CONSOLE;")
    expect(text, ("E0201", "ordrs"), ("E0201", "rulez"), ("E0201", "rulse"))


def test_duplicate_names_point_at_the_second():
    text = ORDERS + "STREAM Orders = SELECT amount FROM orders;\nSINK orders TO CONSOLE;"
    expect(text, ("E0202", "Orders"))
    _, [diag] = diagnostics_of(text, FOLDER)
    assert diag.hint == "first defined on line 1; pick another name"


def test_cycle_is_reported_once_with_its_path():
    text = (ORDERS + "STREAM a = SELECT amount FROM b;\nSTREAM b = SELECT amount FROM a;\n"
            + "SINK b TO CONSOLE;")
    expect(text, ("E0203", "a ="))
    _, [diag] = diagnostics_of(text, FOLDER)
    assert diag.message == "'a' depends on itself: a -> b -> a"


def test_self_reference_is_a_cycle():
    text = ORDERS + "STREAM a = SELECT * FROM a;\nSINK a TO CONSOLE;"
    expect(text, ("E0203", "a ="))


def test_sink_of_nothing():
    text = ORDERS + "SINK ordres TO CONSOLE;"
    expect(text, ("E0207", "ordres"))


def test_sink_of_a_broadcast_state():
    text = ORDERS + RULES + "SINK rules TO CONSOLE;"
    expect(text, ("E0209", "rules", 3))


def test_no_sink_at_all():
    expect(ORDERS, ("E0208", "SOURCE"))


def test_broadcast_state_read_by_a_query():
    text = ORDERS + RULES + "STREAM s = SELECT * FROM rules;\nSINK s TO CONSOLE;"
    expect(text, ("E0209", "SELECT * FROM rules"))


def test_match_against_a_stream_is_a_kind_error():
    text = ORDERS + "STREAM m = MATCH orders AGAINST orders WHERE orders.amount > 0;\nSINK m TO CONSOLE;"
    expect(text, ("E0209", "orders WHERE"))


def test_second_pipeline_statement():
    text = "PIPELINE a;\nPIPELINE b;\n" + ORDERS + "SINK orders TO CONSOLE;"
    expect(text, ("E0210", "PIPELINE b"))


# ---- schema propagation --------------------------------------------------------------------

def test_source_schema_is_canonical():
    text = ("SOURCE s FROM JSON 'p' SCHEMA (a string, b decimal(10,2), c array<int>, d long, "
            "e struct<x: int>);\nSINK s TO CONSOLE;")
    assert schema(text, "s") == [("a", "STRING"), ("b", "DECIMAL(10, 2)"), ("c", "ARRAY<INT>"),
                                 ("d", "BIGINT"), ("e", "STRUCT<x: INT>")]


def test_fixed_schema_sources():
    text = "SOURCE r FROM RATE;\nSOURCE t FROM TEXT 'p';\nSINK r TO CONSOLE;\nSINK t TO CONSOLE;"
    assert schema(text, "r") == [("timestamp", "TIMESTAMP"), ("value", "BIGINT")]
    assert schema(text, "t") == [("value", "STRING")]


def test_select_types_come_from_sqlglot():
    text = (ORDERS + "STREAM s = SELECT order_id, amount * 2 AS twice, upper(country) AS c,\n"
            "  CAST(amount AS INT) AS whole, amount > 10 AS big, count(*) AS n,\n"
            "  window(ts, '1 minute') AS w\n"
            "  FROM orders GROUP BY order_id, amount, country, window(ts, '1 minute');\n"
            "SINK s TO CONSOLE;")
    assert schema(text, "s") == [("order_id", "STRING"), ("twice", "DOUBLE"), ("c", "STRING"),
                                 ("whole", "INT"), ("big", "BOOLEAN"), ("n", "BIGINT"),
                                 ("w", "STRUCT<start: TIMESTAMP, end: TIMESTAMP>")]


def test_group_by_starting_with_a_time_window():
    """sqlglot alone reads `GROUP BY window(` as the WINDOW clause; Spark reads a function call."""
    text = (ORDERS + "STREAM s = SELECT window(ts, '1 minute') AS w, count(*) AS n\n"
            "  FROM orders GROUP BY window(ts, '1 minute'), country;\n"
            "SINK s TO CONSOLE;")
    assert schema(text, "s") == [("w", "STRUCT<start: TIMESTAMP, end: TIMESTAMP>"), ("n", "BIGINT")]
    broken = text.replace("count(*) AS n", "count(* AS n")
    assert [code for code, *_ in errors_of(broken)] == ["E0206"]


def test_select_star_and_ctes():
    text = (ORDERS + "STREAM s = WITH t AS (SELECT order_id, amount FROM orders) SELECT * FROM t;\n"
            "SINK s TO CONSOLE;")
    assert schema(text, "s") == [("order_id", "STRING"), ("amount", "DOUBLE")]


def test_enrich_appends_returns():
    text = (ORDERS + "STREAM e = ENRICH orders WITH HTTP GET 'http://h/{customer_id}' "
            "RETURNS (tier STRING, risk DOUBLE);\nSINK e TO CONSOLE;")
    assert [n for n, _ in schema(text, "e")] == ["order_id", "customer_id", "amount", "country", "ts",
                                                 "tier", "risk"]
    assert plan_of(text).node("e").key_columns == ("customer_id",)


def test_match_appends_state_columns_renaming_clashes_and_dropping_op():
    text = (ORDERS + RULES + "STREAM m = MATCH orders AGAINST rules AS r\n"
            "  WHERE orders.country = r.country AND orders.amount > r.max_amount;\nSINK m TO CONSOLE;")
    assert [n for n, _ in schema(text, "m")] == ["order_id", "customer_id", "amount", "country", "ts",
                                                 "rule_id", "r_country", "max_amount"]
    assert plan_of(text).node("rules").schema[0].name == "rule_id"


def test_match_without_alias_renames_with_the_state_name():
    text = (ORDERS + RULES + "STREAM m = MATCH orders AGAINST rules WHERE orders.country = rules.country;\n"
            "SINK m TO CONSOLE;")
    assert "rules_country" in [n for n, _ in schema(text, "m")]


def test_process_gives_its_returns():
    text = (ORDERS + RULES + "STREAM p = PROCESS orders WITH BROADCAST rules USING PYTHON 'fraud_rules:score'\n"
            "  RETURNS (order_id STRING, score DOUBLE);\nSINK p TO CONSOLE;")
    assert schema(text, "p") == [("order_id", "STRING"), ("score", "DOUBLE")]


def test_schemas_flow_through_a_chain():
    text = (ORDERS + "STREAM a = SELECT order_id, amount FROM orders;\n"
            "STREAM b = ENRICH a WITH PYTHON 'fraud_rules:score' RETURNS (risk DOUBLE);\n"
            "STREAM c = SELECT order_id, risk * amount AS exposure FROM b;\nSINK c TO CONSOLE;")
    assert schema(text, "c") == [("order_id", "STRING"), ("exposure", "DOUBLE")]


# ---- columns --------------------------------------------------------------------------------

def test_unknown_column_in_select():
    text = ORDERS + "STREAM big = SELECT amout FROM orders;\nSINK big TO CONSOLE;"
    expect(text, ("E0204", "amout"))
    _, [diag] = diagnostics_of(text, FOLDER)
    assert diag.message == "unknown column 'amout' in 'orders'" and diag.hint == "did you mean 'amount'?"


def test_unknown_columns_in_where_group_by_and_qualified():
    text = (ORDERS + "STREAM s = SELECT o.order_id, count(*) AS n FROM orders o\n"
            "  WHERE o.amont > 0 GROUP BY o.order_id, contry;\nSINK s TO CONSOLE;")
    expect(text, ("E0204", "amont"), ("E0204", "contry"))


def test_unknown_qualifier():
    text = ORDERS + "STREAM s = SELECT x.amount FROM orders o;\nSINK s TO CONSOLE;"
    expect(text, ("E0201", "x."))


def test_select_aliases_may_be_used_in_group_and_order_by():
    text = ORDERS + "STREAM s = SELECT country AS c, count(*) AS n FROM orders GROUP BY c ORDER BY n;\nSINK s TO CONSOLE;"
    assert schema(text, "s") == [("c", "STRING"), ("n", "BIGINT")]


def test_unknown_column_in_match_predicate():
    text = (ORDERS + RULES + "STREAM m = MATCH orders AGAINST rules AS r\n"
            "  WHERE orders.country = r.contry;\nSINK m TO CONSOLE;")
    expect(text, ("E0204", "contry"))


def test_unknown_column_in_url_placeholder():
    text = (ORDERS + "STREAM e = ENRICH orders WITH HTTP GET 'http://h/c/{customer}?o={order_id}'\n"
            "  RETURNS (tier STRING);\nSINK e TO CONSOLE;")
    expect(text, ("E0205", "customer}"))
    _, [diag] = diagnostics_of(text, FOLDER)
    assert diag.hint == "did you mean 'customer_id'?"


def test_unknown_key_and_op_columns_of_broadcast():
    text = (ORDERS + "BROADCAST st FROM orders KEY order KEY_TYPO;\nSINK orders TO CONSOLE;")
    assert errors_of(text, FOLDER)[0][0] == "E0101"      # two KEYs is a syntax error
    text = ORDERS + "BROADCAST st FROM orders KEY ordr_id OP opp;\nSINK orders TO CONSOLE;"
    expect(text, ("E0204", "ordr_id"), ("E0204", "opp"))


def test_unknown_partition_column():
    text = ORDERS + "SINK orders TO PARQUET 'out' PARTITION BY (countri);"
    expect(text, ("E0204", "countri"))


def test_duplicate_columns():
    text = "SOURCE s FROM JSON 'p' SCHEMA (a STRING, A INT);\nSINK s TO CONSOLE;"
    expect(text, ("E0211", "A INT"))
    text = ORDERS + "STREAM e = ENRICH orders WITH PYTHON 'fraud_rules:score' RETURNS (amount DOUBLE);\nSINK e TO CONSOLE;"
    expect(text, ("E0211", "amount DOUBLE", 2))


def test_repeated_output_names_only_where_a_consumer_must_tell_them_apart():
    """Spark allows `SELECT amount, amount`; a file sink, a query reading the name, or an
    ENRICH/MATCH/PROCESS input cannot tell the two apart: E0211 on the outer select item."""
    query = ORDERS + ("STREAM s = WITH t AS (SELECT amount, amount AS a2 FROM orders)\n"
                      "  SELECT order_id, amount, amount FROM orders;\n")
    assert errors_of(query + "SINK s TO CONSOLE;") == []
    assert schema(query + "SINK s TO CONSOLE;", "s") == [("order_id", "STRING"), ("amount", "DOUBLE"),
                                                         ("amount", "DOUBLE")]
    text = query + "SINK s TO PARQUET 'out';"
    expect(text, ("E0211", "amount FROM orders;"))
    text = query + "STREAM r = SELECT amount FROM s;\nSINK r TO CONSOLE;"
    expect(text, ("E0211", "amount FROM orders;"))
    text = query + "STREAM r = SELECT order_id FROM s;\nSINK r TO CONSOLE;"
    assert errors_of(text) == []
    text = query + "STREAM e = ENRICH s WITH PYTHON 'fraud_rules:score' RETURNS (y INT);\nSINK e TO CONSOLE;"
    expect(text, ("E0211", "amount FROM orders;"))
    text = (query + "STREAM r = SELECT * FROM s;\nSTREAM z = SELECT amount FROM r;\nSINK z TO CONSOLE;")
    expect(text, ("E0211", "* FROM s"))


def test_subquery_columns_resolve_in_their_own_scope_first():
    users = "SOURCE users FROM JSON 'u' SCHEMA (user_id STRING, name STRING, visits INT);\n"
    for where in ("customer_id IN (SELECT user_id FROM users WHERE visits > 2)",
                  "EXISTS (SELECT 1 FROM users WHERE user_id = customer_id AND visits > 0)",
                  "amount > (SELECT avg(visits) FROM users)"):
        text = ORDERS + users + f"STREAM s = SELECT order_id FROM orders WHERE {where};\nSINK s TO CONSOLE;"
        assert errors_of(text) == [], where
    text = ORDERS + users + ("STREAM s = SELECT order_id FROM orders\n"
                             "  WHERE customer_id IN (SELECT user_id FROM users WHERE visitz > 2);\nSINK s TO CONSOLE;")
    expect(text, ("E0204", "visitz"))
    text = ORDERS + ("STREAM s = SELECT a, b FROM (SELECT order_id, amount FROM orders) AS t(a, b);\n"
                     "SINK s TO CONSOLE;")
    assert schema(text, "s") == [("a", "STRING"), ("b", "DOUBLE")]


def test_unknown_type():
    text = "SOURCE s FROM JSON 'p' SCHEMA (a STRNG, b DOUBLE);\nSINK s TO CONSOLE;"
    expect(text, ("E0306", "STRNG"))


# ---- values and options ---------------------------------------------------------------------

@pytest.mark.parametrize("bad", ["10", "10sec", "1.5s", "5w", "0.5m"])
def test_bad_durations(bad):
    text = (ORDERS + f"STREAM e = ENRICH orders WITH PYTHON 'fraud_rules:score' RETURNS (x INT) TIMEOUT {bad};\n"
            "SINK e TO CONSOLE;")
    expect(text, ("E0301", f"TIMEOUT {bad}"[8:]))


@pytest.mark.parametrize("good, seconds", [("250ms", 0.25), ("3s", 3.0), ("2m", 120.0), ("1h", 3600.0), ("5S", 5.0), ("30d", 2592000.0)])
def test_good_durations(good, seconds):
    text = (ORDERS + f"STREAM e = ENRICH orders WITH PYTHON 'fraud_rules:score' RETURNS (x INT) TIMEOUT {good};\n"
            "SINK e TO CONSOLE;")
    assert plan_of(text).node("e").timeout_s == seconds


def test_bad_durations_in_watermark_trigger_backoff_and_ttl():
    text = ("PIPELINE p MODE STREAMING CHECKPOINT 'c' TRIGGER EVERY 10;\n"
            "SOURCE s FROM JSON 'p' SCHEMA (ts TIMESTAMP) WATERMARK ts DELAY 30;\nSINK s TO CONSOLE;")
    expect(text, ("E0301", "10;"), ("E0301", "30;"))
    text = ("SOURCE s FROM JSON 'p' SCHEMA (ts TIMESTAMP) WATERMARK ts DELAY 30x;\n"
            "STREAM e = ENRICH s WITH PYTHON 'fraud_rules:score' RETURNS (x INT) RETRY 2 BACKOFF 5 CACHE 10 TTL 1y;\n"
            "SINK e TO CONSOLE;")
    expect(text, ("E0301", "30x"), ("E0301", "5 CACHE"), ("E0301", "1y"))


@pytest.mark.parametrize("clause, mark", [("CAPACITY 0", "0;"), ("CAPACITY 1.5", "1.5"),
                                          ("CACHE 0 TTL 1m", "0 TTL"), ("RATE 0 PER SECOND", "0 PER"),
                                          ("RETRY 1.5", "1.5")])
def test_counts_must_be_whole_and_positive(clause, mark):
    text = (ORDERS + f"STREAM e = ENRICH orders WITH PYTHON 'fraud_rules:score' RETURNS (x INT) {clause};\n"
            "SINK e TO CONSOLE;")
    expect(text, ("E0302", mark))


def test_repeated_options():
    text = (ORDERS + "STREAM e = ENRICH orders WITH PYTHON 'fraud_rules:score' RETURNS (x INT)\n"
            "  TIMEOUT 1s CAPACITY 5 TIMEOUT 2s;\n"
            "SINK e TO PARQUET 'o' MODE APPEND MODE APPEND OPTIONS (compression = 'zstd', compression = 'gzip');")
    expect(text, ("E0303", "TIMEOUT 2s"), ("E0303", "MODE APPEND", 2), ("E0303", "compression = 'gzip'"))


def test_on_miss_retry_without_retry_contradicts():
    text = (ORDERS + "STREAM e = ENRICH orders WITH PYTHON 'fraud_rules:score' RETURNS (x INT) ON MISS RETRY;\n"
            "SINK e TO CONSOLE;")
    expect(text, ("E0304", "ON MISS RETRY"))


def test_backoff_longer_than_timeout_contradicts():
    text = (ORDERS + "STREAM e = ENRICH orders WITH PYTHON 'fraud_rules:score' RETURNS (x INT)\n"
            "  TIMEOUT 1s RETRY 3 BACKOFF 2s;\nSINK e TO CONSOLE;")
    expect(text, ("E0304", "RETRY 3"))


def test_two_dead_letter_paths_contradict():
    text = (ORDERS + "STREAM e = ENRICH orders WITH PYTHON 'fraud_rules:score' RETURNS (x INT)\n"
            "  ON TIMEOUT DEAD LETTER 'a' ON ERROR DEAD LETTER 'b';\nSINK e TO CONSOLE;")
    expect(text, ("E0304", "'b'"))


def test_retry_is_no_timeout_outcome():
    text = (ORDERS + "STREAM e = ENRICH orders WITH PYTHON 'fraud_rules:score' RETURNS (x INT) ON ERROR RETRY;\n"
            "SINK e TO CONSOLE;")
    expect(text, ("E0309", "RETRY;"))


def test_trigger_contradicts_batch_mode():
    text = "PIPELINE p TRIGGER AVAILABLE NOW;\n" + ORDERS + "SINK orders TO CONSOLE;"
    expect(text, ("E0304", "TRIGGER"))


def test_sink_modes_contradict_pipeline_mode():
    text = ORDERS + "SINK orders TO CONSOLE MODE COMPLETE;"
    expect(text, ("E0304", "MODE COMPLETE"))
    text = "PIPELINE p MODE STREAMING CHECKPOINT 'c';\n" + ORDERS + "SINK orders TO PARQUET 'o' MODE OVERWRITE;"
    expect(text, ("E0304", "MODE OVERWRITE"))


def test_schema_on_a_fixed_schema_source_and_path_on_console():
    text = "SOURCE r FROM RATE SCHEMA (a INT);\nSINK r TO CONSOLE 'out';"
    expect(text, ("E0304", "SCHEMA"), ("E0304", "'out'"))


def test_partition_by_on_a_sink_that_cannot():
    text = ORDERS + "SINK orders TO CONSOLE PARTITION BY (country);"
    expect(text, ("E0304", "PARTITION"))


def test_unknown_connectors_and_words():
    text = ("PIPELINE p MODE STREEMING;\nSOURCE s FROM JSN 'p' SCHEMA (a INT);\n" + ORDERS
            + "SINK orders TO PARQET 'o' MODE APPND;")
    expect(text, ("E0309", "STREEMING"), ("E0305", "JSN"), ("E0305", "PARQET"))


def test_connectors_needing_a_schema_path_or_options():
    text = ("SOURCE a FROM JSON 'p';\nSOURCE b FROM CSV SCHEMA (x INT);\nSOURCE k FROM KAFKA;\n"
            "SINK a TO KAFKA OPTIONS (topic = 't');")
    expect(text, ("E0310", "JSON"), ("E0310", "CSV"), ("E0310", "KAFKA"), ("E0310", "KAFKA", 2))


def test_bad_python_references():
    text = (ORDERS + "STREAM e = ENRICH orders WITH PYTHON 'fraud_rules.score' RETURNS (x INT);\n"
            "STREAM f = ENRICH orders WITH PYTHON 'no_such_module:f' RETURNS (x INT);\n"
            "SINK e TO CONSOLE;\nSINK f TO CONSOLE;")
    expect(text, ("E0309", "'fraud_rules.score'"), ("E0201", "'no_such_module:f'"))


def test_http_method_and_url():
    text = (ORDERS + "STREAM e = ENRICH orders WITH HTTP PUT 'ftp://h/{order_id}' RETURNS (x INT);\n"
            "SINK e TO CONSOLE;")
    expect(text, ("E0309", "PUT"), ("E0309", "'ftp"))


def test_watermark_on_non_timestamp_column():
    text = ("SOURCE s FROM JSON 'p' SCHEMA (id STRING, ts STRING) WATERMARK ts DELAY 10s;\n"
            "SINK s TO CONSOLE;")
    expect(text, ("E0307", "ts DELAY"))
    _, [diag] = diagnostics_of(text)
    assert diag.message == "WATERMARK column 'ts' has type STRING, not TIMESTAMP"


def test_watermark_on_unknown_column():
    text = "SOURCE s FROM JSON 'p' SCHEMA (id STRING, ts TIMESTAMP) WATERMARK tss DELAY 10s;\nSINK s TO CONSOLE;"
    expect(text, ("E0204", "tss"))


def test_streaming_without_checkpoint_where_a_sink_needs_one():
    text = "PIPELINE p MODE STREAMING;\n" + ORDERS + "SINK orders TO CONSOLE;\nSINK orders TO PARQUET 'o';"
    expect(text, ("E0308", "SINK orders TO PARQUET"))
    ok = "PIPELINE p MODE STREAMING;\n" + ORDERS + "SINK orders TO CONSOLE;"
    assert errors_of(ok) == []


def test_streaming_runs_an_aggregation_after_match():
    """#12: what BATCH runs, STREAMING runs: an aggregation after MATCH is no longer E0311."""
    text = ("PIPELINE p MODE STREAMING CHECKPOINT 'c';\n" + ORDERS + RULES
            + "STREAM m = MATCH orders AGAINST rules AS r WHERE orders.country = r.country;\n"
            + "STREAM n = SELECT country, count(*) AS k FROM m GROUP BY country;\nSINK n TO PARQUET 'n' MODE COMPLETE;")
    assert errors_of(text) == []
    windowed = ("PIPELINE p MODE STREAMING CHECKPOINT 'c';\n" + ORDERS.replace(";\n", "\n  WATERMARK ts DELAY 10s;\n")
                + RULES + "STREAM m = MATCH orders AGAINST rules AS r WHERE orders.country = r.country;\n"
                + "STREAM n = SELECT country, window(ts, '1 minute') AS w, count(*) AS k FROM m "
                  "GROUP BY country, window(ts, '1 minute');\nSINK n TO PARQUET 'n';")
    assert errors_of(windowed) == []


def test_streaming_append_of_an_aggregation_needs_a_watermark():
    """#16 item 4: Spark refuses APPEND of an aggregation without a watermark when the query
    starts; `dslc check` says so, with Spark's rule and both ways out."""
    text = ("PIPELINE p MODE STREAMING CHECKPOINT 'c';\n" + ORDERS
            + "STREAM n = SELECT country, count(*) AS k FROM orders GROUP BY country;\nSINK n TO PARQUET 'n';")
    expect(text, ("E0311", "SINK n"))
    _, [diag] = diagnostics_of(text, FOLDER)
    assert "not supported for streaming aggregations without watermark" in diag.message
    assert "WATERMARK" in diag.hint and "MODE COMPLETE" in diag.hint
    # a watermark the GROUP BY does not use does not help either (Spark's rule)
    unused = text.replace(";\nSTREAM n", "\n  WATERMARK ts DELAY 10s;\nSTREAM n", 1)
    expect(unused, ("E0311", "SINK n"))


def test_streaming_complete_needs_an_aggregation():
    text = "PIPELINE p MODE STREAMING CHECKPOINT 'c';\n" + ORDERS + "SINK orders TO PARQUET 'o' MODE COMPLETE;"
    expect(text, ("E0311", "SINK orders"))


def test_one_mistake_is_reported_once_not_at_every_consumer():
    text = (ORDERS + "STREAM a = SELECT amout FROM orders;\nSTREAM b = SELECT * FROM a;\n"
            "STREAM c = ENRICH b WITH HTTP GET 'http://h/{x}' RETURNS (y INT);\nSINK c TO CONSOLE;")
    expect(text, ("E0204", "amout"))


def test_valid_examples_check_clean():
    from frontend_support import VALID_PROGRAMS

    from dslc.compiler.pipeline import check_file
    for path in VALID_PROGRAMS:
        assert check_file(path).sinks


# ---- issue #16: clashing MATCH renames, and every problem in one run ------------------------

OWNERS = ("SOURCE owner_updates FROM CSV 'data/owners/'\n"
          "  SCHEMA (owner_id STRING, op STRING, country STRING);\n"
          "BROADCAST owners FROM owner_updates KEY owner_id OP op;\n")


def test_two_matches_with_the_same_alias_must_not_make_one_column_twice():
    """Both states have `country`; the second MATCH would add a second `r_country` (Spark:
    COLUMN_ALREADY_EXISTS at run time), so `dslc check` reports it with a way out."""
    text = (ORDERS + RULES + OWNERS
            + "STREAM a = MATCH orders AGAINST rules AS r WHERE orders.country = r.country;\n"
            + "STREAM b = MATCH a AGAINST owners AS r WHERE a.country = r.country;\n"
            + "SINK b TO CONSOLE;")
    expect(text, ("E0211", "r WHERE a.country"))
    _, [diag] = diagnostics_of(text, FOLDER)
    assert "r_country" in diag.message and "alias" in diag.hint
    other_alias = text.replace("owners AS r WHERE a.country = r.country", "owners AS o WHERE a.country = o.country")
    names = [f for f, _ in schema(other_alias, "b")]
    assert names.count("r_country") == 1 and "o_country" in names and len(names) == len(set(names))


def test_a_renamed_state_column_must_not_clash_with_another_state_column():
    text = ("SOURCE upd FROM CSV 'u' SCHEMA (k STRING, op STRING, country STRING, r_country STRING);\n"
            "BROADCAST st FROM upd KEY k OP op;\n" + ORDERS
            + "STREAM m = MATCH orders AGAINST st AS r WHERE orders.country = r.country;\nSINK m TO CONSOLE;")
    expect(text, ("E0211", "r WHERE"))


def test_an_unknown_type_does_not_hide_later_unknown_columns_and_placeholders():
    text = ("SOURCE orders FROM JSON 'o' SCHEMA (order_id STRING, amount DOUBLE, ts DATETIME);\n"
            "STREAM big = SELECT order_id, amout FROM orders;\n"
            "STREAM e = ENRICH orders WITH HTTP GET 'http://h/{customer}' RETURNS (x INT);\n"
            "SINK big TO CONSOLE;\nSINK e TO CONSOLE;")
    expect(text, ("E0306", "DATETIME"), ("E0204", "amout"), ("E0205", "customer"))


def test_streaming_problems_are_reported_alongside_an_unrelated_unknown_sink():
    text = ("PIPELINE p MODE STREAMING CHECKPOINT 'c';\n" + ORDERS + RULES
            + "STREAM m = MATCH orders AGAINST rules AS r WHERE orders.country = r.country;\n"
            + "STREAM n = SELECT country, count(*) AS k FROM m GROUP BY country;\n"
            + "SINK n TO CONSOLE;\nSINK orders TO PARKET 'x';")
    expect(text, ("E0311", "SINK n"), ("E0305", "PARKET"))


def test_every_streaming_error_of_a_sink_with_a_wrong_mode_is_reported_at_once():
    """A BATCH file checked for STREAMING: the MODE OVERWRITE of each sink, with the mode that
    fits its stream, and the CHECKPOINT they need, in one run (not one after the other)."""
    text = ("PIPELINE p MODE BATCH;\n" + ORDERS
            + "STREAM n = SELECT country, count(*) AS k FROM orders GROUP BY country;\n"
            + "SINK n TO PARQUET 'a' MODE OVERWRITE;\nSINK orders TO PARQUET 'b' MODE OVERWRITE PARTITION BY (cuntry);")
    with pytest.raises(CompileError) as caught:
        check_source(SourceFile(str(FOLDER / "test.flow"), text), mode="streaming")
    found = [(d.code, text[d.span.start:d.span.end], d.hint) for d in caught.value.diagnostics]
    assert sorted(found) == sorted([
        ("E0308", "SINK", "add CHECKPOINT 'target/chk/p' to PIPELINE"),
        ("E0304", "MODE OVERWRITE", "use MODE COMPLETE: the whole result of the aggregation, replaced after each "
                                    "micro-batch"),
        ("E0308", "SINK", "add CHECKPOINT 'target/chk/p' to PIPELINE"),
        ("E0304", "MODE OVERWRITE", "drop MODE OVERWRITE: a streaming SINK appends each micro-batch's new rows"),
        ("E0204", "cuntry", "did you mean 'country'?")])


def test_overwrite_in_streaming_is_reported_alongside_an_error_in_the_stream_it_writes():
    text = ("PIPELINE p MODE STREAMING CHECKPOINT 'c';\n" + ORDERS
            + "STREAM bad = SELECT order_id, cuntry FROM orders;\nSINK bad TO PARQUET 'o' MODE OVERWRITE;")
    expect(text, ("E0204", "cuntry"), ("E0304", "MODE OVERWRITE"))


def test_missing_checkpoint_is_reported_alongside_a_failed_sink():
    text = ("PIPELINE p MODE STREAMING;\n" + ORDERS
            + "SINK nothing TO CONSOLE;\nSINK orders TO PARQUET 'o';")
    expect(text, ("E0207", "nothing"), ("E0308", "SINK orders TO PARQUET"))


def test_a_query_may_start_with_a_parenthesis():
    text = ORDERS + ("STREAM s = (SELECT order_id FROM orders) UNION ALL (SELECT customer_id FROM orders);\n"
                     "SINK s TO CONSOLE;")
    assert schema(text, "s") == [("order_id", "STRING")]


def test_later_statements_see_the_names_spark_gives():
    """`count(*)` is the column `count(1)` in Spark, not a made-up `_col_1`."""
    text = (ORDERS + "STREAM a = SELECT country, count(*), sum(amount), amount > 10 FROM orders\n"
            "  GROUP BY country, amount > 10;\n"
            "STREAM b = SELECT `count(1)` AS n, `sum(amount)` AS total, `(amount > 10)` AS big FROM a;\n"
            "SINK b TO CONSOLE;")
    assert schema(text, "a") == [("country", "STRING"), ("count(1)", "BIGINT"), ("sum(amount)", "DOUBLE"),
                                 ("(amount > 10)", "BOOLEAN")]
    assert schema(text, "b") == [("n", "BIGINT"), ("total", "DOUBLE"), ("big", "BOOLEAN")]
    broken = text.replace("`count(1)` AS n", "_col_1 AS n")
    expect(broken, ("E0204", "_col_1"))


def test_unknown_sql_functions_unless_the_pipeline_adds_some():
    text = ORDERS + "STREAM s = SELECT country, cout(*) AS n FROM orders GROUP BY country;\nSINK s TO CONSOLE;"
    expect(text, ("E0201", "cout"))
    extended = "SET spark.sql.extensions = 'org.example.Functions';\n" + text
    assert errors_of(extended) == []


def test_struct_fields_are_checked_against_the_declared_struct():
    text = ("SOURCE o FROM JSON 'p' SCHEMA (id STRING, address STRUCT<city: STRING, zip: INT>);\n"
            "STREAM s = SELECT address.city, o.address.zip, address.cty FROM o;\nSINK s TO CONSOLE;")
    expect(text, ("E0204", "cty"))


def test_header_names_and_values_with_line_breaks_are_refused_on_one_line_each():
    """#48 item 27: a header name's CR/LF was printed raw (the diagnostic split over lines), and a
    literal value holding CR/LF passed the check to fail row by row at run time."""
    text = (ORDERS + "STREAM e = ENRICH orders WITH HTTP GET 'https://api.example.com/c/{customer_id}'\n"
            "  HEADERS ('X-A\\r\\nEvil' = 'on', 'X-B' = 'one\\r\\nInjected: yes', 'X-C' = 'a\\ttab')\n"
            "  RETURNS (tier STRING);\nSINK e TO CONSOLE;")
    expect(text, ("E0323", "'X-A"), ("E0309", "'one"))
    source, diags = diagnostics_of(text, FOLDER)
    assert [d.message.split(" is not")[0] for d in diags] == ["'X-A\\r\\nEvil'", "'one\\r\\nInjected: yes'"]
    assert all(len(d.render(source).splitlines()) == 4 for d in diags)


def test_every_header_diagnostic_quotes_a_name_with_a_line_break_on_one_line():
    """#48 item 27: a header without a value and a header given twice quoted the name raw too,
    and a raw CR inside a string moved the terminal's cursor in the source line shown."""
    text = (ORDERS + "STREAM e = ENRICH orders WITH HTTP GET 'https://api.example.com/c/{customer_id}'\n"
            "  HEADERS ('X-A\\nB' = 'on', 'X-A\\nB' = 'two', 'X-C\\r\\nD', 'X-E\rF' = 'v')\n"
            "  RETURNS (tier STRING);\nSINK e TO CONSOLE;")
    source, diags = diagnostics_of(text, FOLDER)
    assert {d.code for d in diags} == {"E0320", "E0323", "E0324"}
    for d in diags:
        shown = d.render(source)
        assert len(shown.splitlines()) == 4 and "\r" not in shown, shown
    line = next(d.render(source).splitlines()[1] for d in diags if "X-E" in d.message)
    caret = next(d.render(source).splitlines()[2] for d in diags if "X-E" in d.message)
    assert line[caret.index("^"):caret.index("^") + 6] == "'X-E\u240dF"
