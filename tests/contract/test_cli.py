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
