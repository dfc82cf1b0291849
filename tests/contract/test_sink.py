"""SINK, as the contract states it."""
from __future__ import annotations

import json

import pytest

from contract.support import by
from dslc.compiler.diagnostics import CompileError
from dslc.compiler.pipeline import check_file

pytestmark = pytest.mark.spark

SOURCE = "SOURCE orders FROM JSON 'in/orders/' SCHEMA (id STRING, country STRING);\n"
ORDERS = [{"id": "o1", "country": "NL"}, {"id": "o2", "country": "DE"}, {"id": "o3", "country": "NL"}]


@pytest.mark.parametrize("fmt", ["parquet", "json", "csv"])
def test_file_sinks_append_by_default_and_overwrite_replaces(flow, fmt):
    """"PARQUET | JSON | CSV ... MODE APPEND (default) | OVERWRITE | COMPLETE": a BATCH job run twice
    appends twice; with OVERWRITE it replaces."""
    flow.rows_file("in/orders/1.json", ORDERS)
    options = " OPTIONS (header = 'true')" if fmt == "csv" else ""
    append = SOURCE + f"SINK orders TO {fmt.upper()} 'out/a'{options};"
    flow.run(append, "BATCH")
    flow.run(append, "BATCH")
    assert len(flow.read("out/a", fmt)) == 6
    overwrite = SOURCE + f"SINK orders TO {fmt.upper()} 'out/o'{options} MODE OVERWRITE;"
    flow.run(overwrite, "BATCH")
    flow.run(overwrite, "BATCH")
    assert by(flow.read("out/o", fmt), "id", "country") == by(ORDERS, "id", "country")


def test_partition_by(flow, mode):
    """"PARTITION BY (col, ...)"."""
    flow.rows_file("in/orders/1.json", ORDERS)
    flow.run(SOURCE + "SINK orders TO PARQUET 'out/p' PARTITION BY (country);", mode)
    assert sorted(p.name for p in (flow.folder / "out/p").glob("country=*")) == ["country=DE", "country=NL"]
    assert by(flow.read("out/p"), "id", "country") == by(ORDERS, "id", "country")


def test_python_sink_gets_each_partitions_rows_as_dicts(flow, mode):
    """"PYTHON 'module:function'" sink; docs/language.md: "`function(rows)` once per partition,
    `rows` an iterator of dicts"."""
    out = flow.folder / "python_sink.jsonl"
    flow.module("send", f"""
import json
def send(rows):
    rows = list(rows)
    assert all(type(r) is dict for r in rows)
    with open({str(out)!r}, "a") as f:
        f.write(json.dumps(rows) + "\\n")
""")
    flow.rows_file("in/orders/1.json", ORDERS)
    flow.run(SOURCE + "SINK orders TO PYTHON 'send:send';", mode)
    calls = [json.loads(line) for line in out.read_text().splitlines()]
    assert by([r for call in calls for r in call], "id", "country") == by(ORDERS, "id", "country")


def test_console_sink_prints_the_rows(flow, capsys):
    """"SINK per_customer TO CONSOLE;" (BATCH: docs/language.md "`show(numRows, truncate)`;
    default 20 rows, not truncated")."""
    flow.rows_file("in/orders/1.json", ORDERS)
    flow.run(SOURCE + "SINK orders TO CONSOLE;", "BATCH")
    out = capsys.readouterr().out
    assert all(o["id"] in out for o in ORDERS)


def test_complete_is_for_streaming_and_overwrite_for_batch(flow):
    """docs/language.md: "`MODE OVERWRITE` in BATCH only; `MODE COMPLETE` in STREAMING only (for
    aggregations); anything else is E0304."""
    for head, sink in (("", "MODE COMPLETE"),
                       ("PIPELINE p MODE STREAMING CHECKPOINT 'c';\n", "MODE OVERWRITE")):
        path = flow.write(head + SOURCE + f"SINK orders TO PARQUET 'out' {sink};")
        with pytest.raises(CompileError) as failed:
            check_file(path)
        assert [d.code for d in failed.value.diagnostics] == ["E0304"]


def test_streaming_file_sink_holds_each_row_once_across_runs(flow):
    """spec: "PIPELINE ... MODE STREAMING CHECKPOINT" and "TRIGGER AVAILABLE NOW (process what is
    there, then stop)": a second run on the same checkpoint reads only new files."""
    flow.rows_file("in/orders/1.json", ORDERS)
    flow.run(SOURCE + "SINK orders TO PARQUET 'out/s';", "STREAMING")
    flow.rows_file("in/orders/2.json", [{"id": "o4", "country": "FR"}])
    flow.run(SOURCE + "SINK orders TO PARQUET 'out/s';", "STREAMING")
    assert sorted(r["id"] for r in flow.read("out/s")) == ["o1", "o2", "o3", "o4"]
