"""PROCESS, as the contract states it, in BATCH and STREAMING."""
from __future__ import annotations

import pytest

from contract.support import by

pytestmark = pytest.mark.spark

PIPE = """
SOURCE orders FROM JSON 'in/orders/' SCHEMA (id STRING, country STRING, amount DOUBLE);
SOURCE a_updates FROM JSON 'in/a/' SCHEMA (k STRING, v STRING);
SOURCE b_updates FROM JSON 'in/b/' SCHEMA (k STRING, v STRING);
BROADCAST sa FROM a_updates KEY k;
BROADCAST sb FROM b_updates KEY k;
"""


def _data(flow):
    flow.rows_file("in/orders/1.json", [{"id": "o1", "country": "NL", "amount": 3.0},
                                        {"id": "o2", "country": "DE", "amount": 0.0}])
    flow.rows_file("in/a/1.json", [{"k": "NL", "v": "from a"}])
    flow.rows_file("in/b/1.json", [{"k": "NL", "v": "from b"}, {"k": "DE", "v": "b only"}])


def test_one_argument_per_named_state_and_exactly_the_returns_columns(flow, mode):
    """"def score(row: dict, rules: Mapping) -> Iterable[dict] -- PROCESS ... WITH BROADCAST rules:
    one argument per named state"; docs/language.md: "The function maps one row to zero or more
    rows with exactly the RETURNS columns (input columns are **not** passed through; missing keys
    become NULL, extra keys are ignored)."""
    flow.module("proc", """
def score(row, a, b):
    for i in range(int(row["amount"])):
        yield {"id": row["id"], "i": i, "a": (a.get(row["country"]) or {}).get("v"),
               "b": (b.get(row["country"]) or {}).get("v"), "extra": "ignored"}
""")
    _data(flow)
    flow.run(PIPE + """
STREAM s = PROCESS orders WITH BROADCAST sa, sb USING PYTHON 'proc:score' RETURNS (id STRING, i INT, a STRING, b STRING, missing STRING);
SINK s TO PARQUET 'out/s';""", mode)
    rows = flow.read("out/s")
    assert list(rows[0]) == ["id", "i", "a", "b", "missing"]
    assert by(rows, "id", "i", "a", "b", "missing") == [("o1", i, "from a", "from b", None) for i in range(3)]


def test_an_exception_stops_the_job_naming_the_operator(flow):
    """docs/language.md: "An exception in the function stops the job (there are no ON ...
    policies for PROCESS)."; errors "name the operator, its line and the element's key"."""
    flow.module("boom", """
def score(row, a, b):
    if row["id"] == "o2":
        raise ValueError("no good")
    return {"id": row["id"]}
""")
    _data(flow)
    with pytest.raises(Exception) as failed:
        flow.run(PIPE + """
STREAM scored = PROCESS orders WITH BROADCAST sa, sb USING PYTHON 'boom:score' RETURNS (id STRING);
SINK scored TO PARQUET 'out/s';""", "BATCH")
    assert "operator 'scored' (line 9)" in str(failed.value) and "no good" in str(failed.value)


def test_a_class_is_opened_called_and_closed(flow, mode):
    """"`'module:name'` may also name a class: it is created once per Python worker, `open()` is
    called before the first element, `close()` after the last (also after a failure), and calls go
    to `__call__`."""
    flow.module("klass", """
class Score:
    def __init__(self):
        self.opened = 0
    def open(self):
        self.opened += 1
        self.state = "open"
    def close(self):
        self.state = "closed"
    def __call__(self, row, a, b):
        return {"id": row["id"], "state": self.state}
""")
    _data(flow)
    flow.run(PIPE + """
STREAM s = PROCESS orders WITH BROADCAST sa, sb USING PYTHON 'klass:Score' RETURNS (id STRING, state STRING);
SINK s TO PARQUET 'out/s';""", mode)
    assert by(flow.read("out/s"), "id", "state") == [("o1", "open"), ("o2", "open")]


def test_consecutive_python_operators_run_in_one_python_pass(flow, mode):
    """"Chaining: ... consecutive Python operators (ENRICH, PROCESS, Python MAP) run in one Python pass over the rows.\""""
    flow.module("chain", """
import os
async def tag(row):
    return {"enrich_pid": os.getpid()}
def process(row):
    return {"id": row["id"], "enrich_pid": row["enrich_pid"], "process_pid": os.getpid()}
""")
    flow.rows_file("in/orders/1.json", [{"id": f"o{i}", "key": "k"} for i in range(5)])
    flow.run("SOURCE orders FROM JSON 'in/orders/' SCHEMA (id STRING, key STRING);\n" + """STREAM e = ENRICH orders WITH PYTHON 'chain:tag' RETURNS (enrich_pid INT);
STREAM p = PROCESS e USING PYTHON 'chain:process' RETURNS (id STRING, enrich_pid INT, process_pid INT);
SINK p TO PARQUET 'out/p';""", mode)
    rows = flow.read("out/p")
    assert len(rows) == 5 and all(r["enrich_pid"] == r["process_pid"] for r in rows)
