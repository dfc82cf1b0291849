"""The command line, as the contract states it."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from dslc.compiler.cli.main import main

SOURCE = "SOURCE orders FROM JSON 'in/orders/' SCHEMA (id STRING, amount DOUBLE);\n"


def test_check_exits_0_or_1_with_every_problem_found(flow, capsys):
    """"dslc check FILE -- exit 0, or 1 with FILE:LINE:COL: error: ... for every problem found"."""
    good = flow.write(SOURCE + "SINK orders TO CONSOLE;")
    assert main(["check", str(good)]) == 0
    assert capsys.readouterr().out == f"{good}: ok\n"
    bad = flow.write("SOURCE orders FROM JSON 'in/' SCHEMA (id STRING, ts DATETIME);\n"
                     "STREAM a = SELECT amout FROM orders;\n"
                     "STREAM e = ENRICH orders WITH HTTP GET 'http://h/{idd}' RETURNS (x INT) CAPACITY 0;\n"
                     "SINK a TO PARKET 'x';\nSINK e TO CONSOLE;")
    assert main(["check", str(bad)]) == 1
    err = capsys.readouterr().err
    found = re.findall(rf"^{re.escape(str(bad))}:(\d+):(\d+): error\[(E\d+)\]: ", err, re.M)
    assert [(int(line), code) for line, _, code in found] == [
        (1, "E0306"), (2, "E0204"), (3, "E0205"), (3, "E0302"), (4, "E0305")]


def test_explain_formats(flow, capsys):
    """"dslc explain FILE [--physical] [--format text|json|dot]"."""
    path = flow.write(SOURCE + "STREAM big = SELECT id FROM orders WHERE amount > 1;\nSINK big TO CONSOLE;")
    assert main(["explain", str(path)]) == 0
    assert "big" in capsys.readouterr().out
    assert main(["explain", str(path), "--format", "json"]) == 0
    assert {n["name"] for n in json.loads(capsys.readouterr().out)["nodes"]} == {"orders", "big"}
    assert main(["explain", str(path), "--format", "dot"]) == 0
    assert capsys.readouterr().out.lstrip().startswith("digraph")
    assert main(["explain", str(path), "--physical"]) == 0
    assert "passes" in capsys.readouterr().out


def test_compile_writes_one_job_file_and_mode_overrides(flow, capsys):
    """"dslc compile FILE [-o job.py] [--mode batch|streaming]"; "A compiled job is one Python file"."""
    path = flow.write(SOURCE + "SINK orders TO CONSOLE;")
    job = flow.folder / "build" / "job.py"
    assert main(["compile", str(path), "-o", str(job), "--mode", "streaming"]) == 0
    code = job.read_text()
    compile(code, str(job), "exec")
    assert "readStream" in code
    assert main(["compile", str(path)]) == 0
    assert "readStream" not in capsys.readouterr().out


@pytest.mark.spark
@pytest.mark.slow
def test_run_takes_its_options_after_the_file_and_passes_only_what_follows_dashdash(flow):
    """"dslc run FILE [--mode ...] [--trigger available-now|every=10s] [--master URL] [-- extra
    spark-submit arguments]" (issue #16 item 5: options after FILE went to spark-submit)."""
    flow.rows_file("in/orders/1.json", [{"id": "o1", "amount": 1.0}, {"id": "o2", "amount": 2.0}])
    path = flow.write("PIPELINE p MODE STREAMING CHECKPOINT 'chk';\n" + SOURCE + "SINK orders TO JSON 'out/o';")
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    env.pop("DSLC_FLOW_FOLDER", None)
    result = subprocess.run([sys.executable, "-m", "dslc.compiler.cli", "run", str(path), "--mode", "batch",
                             "--master", "local[1]", "--", "--conf", "spark.ui.enabled=false"],
                            cwd=flow.folder.parent, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert sorted(r["id"] for r in flow.read("out/o", "json")) == ["o1", "o2"]
    assert not (flow.folder / "chk").exists()          # --mode batch: no streaming query ran


FAILING = """PIPELINE failing MODE BATCH;
SOURCE orders FROM JSON 'in/orders/' SCHEMA (id STRING, key STRING);
STREAM e = ENRICH orders WITH HTTP GET 'http://127.0.0.1:9/kv/{key}' RETURNS (value STRING) TIMEOUT 2s;
SINK e TO PARQUET 'out/e';
"""


def _dslc(flow, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    env.pop("DSLC_FLOW_FOLDER", None)
    return subprocess.run([sys.executable, "-m", "dslc.compiler.cli", *args], cwd=flow.folder, env=env,
                          capture_output=True, text=True, timeout=600)


@pytest.mark.spark
@pytest.mark.slow
def test_a_failing_run_shows_the_clear_line_and_where_the_log_is_not_tracebacks(flow):
    """docs/language.md: run-time errors name the operator, its line and the element's key. A
    failing `dslc run` shows that line and where Spark's full log is; the tracebacks (Spark's
    executors', the job's) are in the log only (#33 item 6: six worker tracebacks came first)."""
    flow.rows_file("in/orders/1.json", [{"id": "o1", "key": "a"}])
    path = flow.write(FAILING)
    result = _dslc(flow, "run", str(path), "--master", "local[1]")
    shown = result.stdout + result.stderr
    assert result.returncode == 1, shown[-3000:]
    assert "Traceback" not in shown and "PythonException" not in shown, shown[-3000:]
    assert "dslc: error: operator 'e' (line 3) failed on element key='a': ClientConnectorError" in shown
    log = re.search(r"Spark's full log: (\S+)", shown).group(1)
    text = open(log).read()
    assert "Traceback" in text and "ElementFailure" in text and "Executor" in text


@pytest.mark.spark
@pytest.mark.slow
def test_a_failing_dslc_test_case_shows_its_clear_line_not_task_tracebacks(flow):
    """`dslc test`: a case whose ENRICH fails reports the clear line; the task's traceback goes to
    Spark's log, whose path the report gives (#33 item 6: printed twice above the report), and so
    does what the JVM prints before its logger starts (#48 item 16)."""
    flow.write(FAILING)
    (flow.folder / "pipeline.test.yaml").write_text(
        "cases:\n  - name: fails\n    sources:\n      orders:\n        - {id: o1, key: a}\n"
        "    enrich:\n      e:\n        - {key: a, error: HTTP 500 boom}\n    expect:\n      e: []\n")
    result = _dslc(flow, "test", str(flow.folder / "pipeline.test.yaml"))
    shown = result.stdout + result.stderr
    assert result.returncode == 1, shown[-3000:]
    assert "ERROR fails" in shown and "failed on element key='a'" in shown, shown[-3000:]
    assert "Traceback" not in shown and "PythonException" not in shown, shown[-3000:]
    assert "Using incubator modules" not in shown, shown[-3000:]   # #48 item 16: the JVM's own warning
    log = re.search(r"Spark's full log: (\S+)", shown).group(1)
    assert "ElementFailure" in open(log).read()


ONLY_SPARK_REFUSES = """PIPELINE only_spark MODE BATCH;
SOURCE orders FROM JSON 'in/orders/' SCHEMA (id STRING, amount DOUBLE);
STREAM q = SELECT id, sort_array(amount) AS s FROM orders;
STREAM fine = SELECT id, amount * 2 AS twice FROM orders;
STREAM g = SELECT id, size(twice) AS x FROM fine;
SINK fine TO PARQUET 'out/fine';
SINK q TO PARQUET 'out/q';
SINK g TO PARQUET 'out/g';
"""


@pytest.mark.spark
@pytest.mark.slow
def test_a_query_only_spark_refuses_fails_the_run_at_its_line_in_the_flow(flow):
    """#34: the fast check leaves a function's argument types to Spark;
    `dslc run` has Spark's analyzer look at every query before the job's first action and shows
    each one it refuses where `dslc check --spark` would, at the .flow file's line: all of them,
    and nothing is written (the first SINK's query is valid)."""
    flow.rows_file("in/orders/1.json", [{"id": "o1", "amount": 2.5}])
    path = flow.write(ONLY_SPARK_REFUSES)
    assert main(["check", str(path)]) == 0             # the fast check accepts it
    result = _dslc(flow, "run", str(path), "--master", "local[1]")
    shown = result.stdout + result.stderr
    assert result.returncode == 1, shown[-3000:]
    assert "Traceback" not in shown, shown[-3000:]
    assert re.search(r"\S+\.flow:3:23: error\[E0212\]: Spark rejects this query "
                     r"\(DATATYPE_MISMATCH\.UNEXPECTED_INPUT_TYPE\)", shown), shown[-3000:]
    assert "    3 | STREAM q = SELECT id, sort_array(amount) AS s FROM orders;" in shown or \
        " 3 | STREAM q = SELECT id, sort_array(amount) AS s FROM orders;" in shown
    assert "^" * len("sort_array(amount)") in shown
    assert re.search(r"\S+\.flow:5:23: error\[E0212\]: Spark rejects this query "
                     r"\(DATATYPE_MISMATCH\.UNEXPECTED_INPUT_TYPE\): Cannot resolve \"size\(twice\)\"", shown), shown[-3000:]
    assert "2 errors found" in shown
    assert not (flow.folder / "out").exists()       # refused before the first SINK wrote
    assert "SQLQueryContextLogger" not in shown and "at org.apache" not in shown, shown[-3000:]
