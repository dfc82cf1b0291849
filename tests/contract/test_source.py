"""SOURCE, as the contract states it."""
from __future__ import annotations

import pytest

from contract.support import by

pytestmark = pytest.mark.spark


def test_json_source_reads_the_declared_schema(flow, mode):
    """"SOURCE orders FROM JSON 'data/orders/' -- JSON | CSV | PARQUET | TEXT | RATE | KAFKA | PYTHON
    'module:Class' ... SCHEMA (order_id STRING, customer_id STRING, amount DOUBLE, country STRING,
    ts TIMESTAMP)": the columns and types as declared."""
    flow.rows_file("in/orders/1.json", [{"id": "o1", "amount": 1.5, "ts": "2024-01-01T00:00:00Z", "n": 3}])
    flow.run("SOURCE orders FROM JSON 'in/orders/' SCHEMA (id STRING, amount DOUBLE, ts TIMESTAMP, n BIGINT);\n"
             "SINK orders TO PARQUET 'out/o';", mode)
    types = dict(flow.spark.read.parquet(str(flow.folder / "out/o")).dtypes)
    assert {k: v for k, v in types.items() if k != "batch_id"} == {
        "id": "string", "amount": "double", "ts": "timestamp", "n": "bigint"}


def test_csv_options_are_passed_to_the_reader(flow, mode):
    """"OPTIONS (multiLine = 'false') -- passed to the Spark reader"."""
    flow.text_file("in/rules/1.csv", "rule_id;max\nr1;10\nr2;20\n")
    flow.run("SOURCE rules FROM CSV 'in/rules/' OPTIONS (header = 'true', sep = ';') "
             "SCHEMA (rule_id STRING, max DOUBLE);\nSINK rules TO PARQUET 'out/r';", mode)
    assert by(flow.read("out/r"), "rule_id", "max") == [("r1", 10.0), ("r2", 20.0)]


def test_text_source_has_one_value_column(flow):
    """"TEXT" source; docs/language.md: "`value STRING`"."""
    flow.text_file("in/lines/1.txt", "first line\nsecond line\n")
    flow.run("SOURCE lines FROM TEXT 'in/lines/';\nSINK lines TO PARQUET 'out/l';", "BATCH")
    assert sorted(r["value"] for r in flow.read("out/l")) == ["first line", "second line"]


def test_strings_follow_spark_sql_rules(flow):
    """"strings everywhere follow Spark SQL's rules (single or double quotes, backslash escapes such
    as `\\'`; as in Spark, `'a' 'b'` is one string `ab`)"; "`--` starts a comment"."""
    flow.rows_file("in/it's/1.json", [{"id": "o1"}])
    flow.run("SOURCE orders FROM JSON 'in/it\\'s' \"/\"  -- a path in two pieces\n"
             "  SCHEMA (id STRING);\n"
             "STREAM s = SELECT id, 'it\\'s' AS quoted FROM orders;\n"
             "SINK s TO PARQUET 'out/s';", "BATCH")
    assert flow.read("out/s") == [{"id": "o1", "quoted": "it's"}]


def test_keywords_are_case_insensitive_and_identifiers_may_be_back_quoted(flow):
    """"Keywords are case-insensitive; identifiers are `[A-Za-z_][A-Za-z0-9_]*` or back-quoted"."""
    flow.rows_file("in/orders/1.json", [{"order id": "o1", "amount": 2.0}])
    flow.run("source `raw orders` from json 'in/orders/' schema (`order id` string, amount double);\n"
             "stream `big-ones` = select `order id` from `raw orders` where amount > 1;\n"
             "sink `big-ones` to parquet 'out/b';", "BATCH")
    assert flow.read("out/b") == [{"order id": "o1"}]


SPLITS = """
class Numbers:
    def __init__(self, options):
        self.count = int(options["count"])
    def splits(self):
        return [{"part": p} for p in range(self.count)]
    def read(self, split):
        for i in range(3):
            yield {"part": split["part"], "i": i}
"""


def test_python_source_one_partition_per_split(flow, mode):
    """"`SOURCE ... FROM PYTHON 'module:Class'`: the class enumerates splits and reads one split at a
    time ...; it runs on Spark's Python data source API, one Spark partition per split"; "In
    STREAMING mode each split is read exactly once"."""
    flow.module("numbers", SPLITS)
    flow.run("SOURCE n FROM PYTHON 'numbers:Numbers' OPTIONS (count = '3') SCHEMA (part INT, i INT);\n"
             "STREAM p = SELECT part, i, spark_partition_id() AS pid FROM n;\n"
             "SINK p TO PARQUET 'out/p';", mode)
    rows = flow.read("out/p")
    assert by(rows, "part", "i") == [(p, i) for p in range(3) for i in range(3)]
    assert len({r["pid"] for r in rows}) == 3
    assert all(len({r["pid"] for r in rows if r["part"] == p}) == 1 for p in range(3))


def test_relative_paths_resolve_against_the_flow_folder(flow, tmp_path_factory, monkeypatch):
    """docs/language.md: "Every relative path in a `.flow` file (SOURCE, SINK, DEAD LETTER,
    CHECKPOINT) is resolved against the folder of the `.flow` file, not the current directory."""
    monkeypatch.chdir(tmp_path_factory.mktemp("elsewhere"))
    flow.rows_file("in/orders/1.json", [{"id": "o1"}])
    flow.run("SOURCE orders FROM JSON 'in/orders/' SCHEMA (id STRING);\nSINK orders TO JSON 'out/o';", "BATCH")
    assert flow.read("out/o", "json") == [{"id": "o1"}]


def test_rate_source_in_batch_is_a_fixed_run_of_num_rows(flow):
    """"RATE" source; docs/language.md: "`timestamp TIMESTAMP, value BIGINT`; ... in BATCH (Spark's
    rate source is streaming-only) dslc generates a fixed run of `numRows` rows"."""
    flow.run("SOURCE ticks FROM RATE OPTIONS (rowsPerSecond = '5', numRows = '7');\n"
             "SINK ticks TO PARQUET 'out/t';", "BATCH")
    rows = flow.read("out/t")
    assert sorted(r["value"] for r in rows) == list(range(7)) and set(rows[0]) == {"timestamp", "value"}


FILE_SPLITS = """
import os
class Files:
    def __init__(self, options):
        self.folder = options["folder"]
    def splits(self):
        return sorted(os.listdir(self.folder))
    def discover(self, known):
        return [s for s in self.splits() if s not in known]
    def read(self, split):
        for line in open(os.path.join(self.folder, split)):
            yield {"split": split, "line": line.strip()}
"""


def test_python_source_streaming_reads_each_split_once_across_runs(flow):
    """"In STREAMING mode each split is read exactly once; the splits already handed out are the
    source's offset, kept in the checkpoint."; "discover(self, known) ... STREAMING (optional): new splits"."""
    flow.module("files", FILE_SPLITS)
    flow.text_file("raw/a.txt", "1\n2\n")
    text = (f"SOURCE f FROM PYTHON 'files:Files' OPTIONS (folder = '{flow.folder / 'raw'}') "
            "SCHEMA (split STRING, line STRING);\nSINK f TO PARQUET 'out/f';")
    flow.run(text, "STREAMING")
    flow.text_file("raw/b.txt", "3\n")
    flow.run(text, "STREAMING")
    assert by(flow.read("out/f"), "split", "line") == [("a.txt", "1"), ("a.txt", "2"), ("b.txt", "3")]


def test_a_malformed_json_line_fails_the_job_with_sparks_message(flow, mode):
    """docs/language.md: malformed input records of a source fail the job with Spark's message
    (#33 item 4: they became all-NULL rows silently)."""
    flow.text_file("in/orders/1.json", '{"id": "o1", "amount": 1.5}\n{"id": "o2", "amount": \n')
    with pytest.raises(Exception, match="(?i)malformed"):
        flow.run("SOURCE orders FROM JSON 'in/orders/' SCHEMA (id STRING, amount DOUBLE);\n"
                 "SINK orders TO PARQUET 'out/o';", mode)
    assert flow.read("out/o") == []


def test_permissive_json_keeps_the_malformed_line_in_corrupt_record(flow, mode):
    """`OPTIONS (mode = 'PERMISSIVE')` chosen knowingly: the malformed line is a row whose
    `_corrupt_record` holds it whole (added to the SCHEMA when not declared)."""
    flow.text_file("in/orders/1.json", '{"id": "o1", "amount": 1.5}\n{"id": "o2", "amount": \n')
    flow.run("SOURCE orders FROM JSON 'in/orders/' OPTIONS (mode = 'PERMISSIVE') SCHEMA (id STRING, amount DOUBLE);\n"
             "SINK orders TO PARQUET 'out/o';", mode)
    assert by(flow.read("out/o"), "id", "amount", "_corrupt_record") == [
        ("o1", 1.5, None), (None, None, '{"id": "o2", "amount": ')]
