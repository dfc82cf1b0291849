"""SOURCE and SINK OPTIONS checked against the names Spark's readers and writers take
(compiler/plan/format_options.py): why (Spark ignores a misspelt name and the data changes), the
table against the names the installed Spark declares, and the checks as `dslc check` reports them."""
from __future__ import annotations

import pytest

from dslc.compiler.diagnostics import CompileError
from dslc.compiler.pipeline import check_text
from dslc.compiler.plan.format_options import FORMATS

# Spark's options objects that list their names (DataSourceOptions.getAllOptions), by format;
# FileIndexOptions holds the options of every file reader.
_DECLARED = {
    "CSV": "org.apache.spark.sql.catalyst.csv.CSVOptions",
    "JSON": "org.apache.spark.sql.catalyst.json.JSONOptions",
    "TEXT": "org.apache.spark.sql.execution.datasources.text.TextOptions",
    "PARQUET": "org.apache.spark.sql.execution.datasources.parquet.ParquetOptions",
}
_FILE_INDEX = "org.apache.spark.sql.execution.datasources.FileIndexOptions"


def _declared(spark, cls: str) -> set[str]:
    names = getattr(spark._jvm, cls).getAllOptions().mkString("\n")
    return {n.lower() for n in names.split("\n") if n}


def _lower(names) -> set[str]:
    return {n.lower() for n in names}


@pytest.mark.spark
def test_spark_reads_a_misspelt_option_as_no_option_at_all(spark, tmp_path):
    """The reason for the check: `headr` passes Spark without a word and the header row becomes data."""
    (tmp_path / "p.csv").write_text("sku,qty\na,1\nb,2\n")
    read = spark.read.schema("sku STRING, qty INT")
    misspelt = read.option("headr", "true").csv(str(tmp_path)).collect()
    assert [r.sku for r in misspelt] == ["sku", "a", "b"]
    assert [r.sku for r in read.option("header", "true").csv(str(tmp_path)).collect()] == ["a", "b"]


@pytest.mark.spark
@pytest.mark.parametrize("connector", sorted(_DECLARED))
def test_the_table_holds_every_option_spark_declares_for_the_format(spark, connector):
    fmt = FORMATS[connector]
    declared = _declared(spark, _DECLARED[connector])
    assert declared - _lower(fmt.reader() | fmt.write) == set()
    assert _declared(spark, _FILE_INDEX) - _lower(fmt.reader()) == set()


@pytest.mark.spark
@pytest.mark.parametrize("connector", sorted(_DECLARED))
def test_each_format_specific_name_of_the_table_is_one_spark_declares(spark, connector):
    """No invented names: what the table adds to the generic file options is Spark's own."""
    from dslc.compiler.plan import format_options as fo
    fmt = FORMATS[connector]
    generic = fo._FILES | fo._FILES_BATCH | fo._FILES_STREAMING | fo._FILE_WRITES
    assert _lower(fmt.read | fmt.write) - _lower(generic) - _declared(spark, _DECLARED[connector]) == set()


def _problems(text: str) -> list[tuple[str, str, str | None]]:
    with pytest.raises(CompileError) as caught:
        check_text(text)
    return [(d.code, text[d.span.start:d.span.end], d.hint) for d in caught.value.diagnostics]


def test_a_misspelt_reader_option_is_an_error_with_the_name_meant():
    problems = _problems("SOURCE p FROM CSV 'in/' OPTIONS (headr = 'true') SCHEMA (sku STRING);\n"
                         "SINK p TO CONSOLE;")
    assert problems == [("E0315", "headr", "did you mean 'header'?")]


def test_every_unknown_option_of_every_statement_is_reported_at_once():
    problems = _problems(
        "SOURCE p FROM JSON 'in/' OPTIONS (multiline = 'true', primitivesAsStrin = 'true') SCHEMA (sku STRING);\n"
        "SOURCE k FROM KAFKA OPTIONS ('kafka.bootstrap.servers' = 'b:9092', subscribe = 't', startingOffset = 'x');\n"
        "SINK p TO PARQUET 'out' OPTIONS (compresion = 'zstd');\n"
        "SINK k TO CONSOLE OPTIONS (numrows = '5', truncat = 'false');")
    assert problems == [("E0315", "primitivesAsStrin", "did you mean 'primitivesAsString'?"),
                        ("E0315", "startingOffset", "did you mean 'startingOffsets'?"),
                        ("E0315", "compresion", "did you mean 'compression'?"),
                        ("E0315", "truncat", "did you mean 'truncate'?")]


def test_an_option_of_the_other_side_says_where_it_belongs():
    problems = _problems("SOURCE p FROM CSV 'in/' OPTIONS (quoteAll = 'true') SCHEMA (sku STRING);\n"
                         "SINK p TO CSV 'out' OPTIONS (inferSchema = 'true');")
    assert [(code, key) for code, key, _ in problems] == [("E0315", "quoteAll"), ("E0315", "inferSchema")]
    assert problems[0][2] == "give it to a SINK ... TO CSV"
    assert problems[1][2] == "give it to the SOURCE ... FROM CSV that reads these files"


@pytest.mark.parametrize("options", [
    "header = 'true', SEP = ';', fs.s3a.endpoint = 'http://127.0.0.1:9000'",     # any case; Hadoop's settings
    "maxFilesPerTrigger = '1', modifiedBefore = '2030-01-01T00:00:00', pathGlobFilter = '*.csv'",
])
def test_spark_names_in_any_case_and_hadoop_settings_pass(options):
    check_text(f"PIPELINE p MODE BATCH;\nSOURCE p FROM CSV 'in/' OPTIONS ({options}) SCHEMA (sku STRING);\n"
               "SINK p TO PARQUET 'out' OPTIONS (compression = 'zstd', parquet.block.size = '1048576');")


def test_python_sources_and_sinks_take_their_own_options():
    check_text("SOURCE p FROM PYTHON 'fraud_rules:score' OPTIONS (anything = '1') SCHEMA (sku STRING);\n"
               "SINK p TO CONSOLE;", path="tests/frontend/programs/fraud/pipeline.flow")


def test_an_option_the_streaming_file_source_refuses_is_a_streaming_error():
    problems = _problems("PIPELINE p MODE STREAMING CHECKPOINT 'chk';\n"
                         "SOURCE p FROM JSON 'in/' OPTIONS (modifiedAfter = '2024-01-01T00:00:00') SCHEMA (sku STRING);\n"
                         "SINK p TO CONSOLE;")
    assert [(code, key) for code, key, _ in problems] == [("E0311", "modifiedAfter")]
