"""The `dslc check` and `dslc explain` commands, run in-process."""
from __future__ import annotations

import json

import pytest
from frontend_support import PROGRAMS, VALID_PROGRAMS

from dslc.compiler.cli.main import main

FRAUD = PROGRAMS / "fraud" / "pipeline.flow"


@pytest.mark.parametrize("path", VALID_PROGRAMS, ids=lambda p: p.parent.name)
def test_check_valid_file_prints_ok(path, capsys):
    assert main(["check", str(path)]) == 0
    out = capsys.readouterr()
    assert out.out == f"{path}: ok\n" and out.err == ""


def test_check_missing_file(tmp_path, capsys):
    missing = tmp_path / "nope.flow"
    assert main(["check", str(missing)]) == 1
    out = capsys.readouterr()
    assert out.err == f"{missing}: error: cannot read file\n"
    assert "Traceback" not in out.err


def test_check_reports_every_error_on_stderr(tmp_path, capsys):
    bad = tmp_path / "bad.flow"
    bad.write_text("SOURCE s FROM JSON 'p' SCHEMA (a STRNG);\nSINK t TO CONSOLE;\n")
    assert main(["check", str(bad)]) == 1
    err = capsys.readouterr().err
    assert f"{bad}:1:34: error[E0306]" in err and f"{bad}:2:6: error[E0207]" in err
    assert err.endswith("2 errors found\n")


def test_check_module_beside_the_flow_file(tmp_path, capsys):
    (tmp_path / "beside_only_lookup.py").write_text("def f(row):\n    return None\n")
    flow = tmp_path / "p.flow"
    flow.write_text("SOURCE s FROM RATE;\nSTREAM e = ENRICH s WITH PYTHON 'beside_only_lookup:f' RETURNS (x INT);\n"
                    "SINK e TO CONSOLE;\n")
    assert main(["check", str(flow)]) == 0
    (tmp_path / "beside_only_lookup.py").unlink()
    assert main(["check", str(flow)]) == 1
    assert "error[E0201]: unknown Python module 'beside_only_lookup'" in capsys.readouterr().err


@pytest.mark.parametrize("path", VALID_PROGRAMS, ids=lambda p: p.parent.name)
def test_explain_json_is_valid(path, capsys):
    assert main(["explain", str(path), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data) == {"settings", "nodes", "sinks"}
    assert data["nodes"] and data["sinks"]
    assert all("kind" in node and "schema" in node for node in data["nodes"])


def test_explain_json_describes_the_plan(capsys):
    main(["explain", str(FRAUD), "--format", "json"])
    data = json.loads(capsys.readouterr().out)
    kinds = {n["name"]: n["kind"] for n in data["nodes"]}
    assert kinds == {"orders": "Source", "rule_updates": "Source", "rules": "BroadcastState",
                     "paid": "Query", "enriched": "Enrich", "flagged": "Match", "scored": "Process",
                     "per_customer": "Query"}
    assert data["settings"]["mode"] == "BATCH"


@pytest.mark.parametrize("path", VALID_PROGRAMS, ids=lambda p: p.parent.name)
def test_explain_text_is_deterministic(path, capsys):
    outputs = []
    for _ in range(2):
        assert main(["explain", str(path)]) == 0
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1]
    assert outputs[0].startswith("pipeline ")


def test_explain_text_lists_nodes_and_sinks(capsys):
    main(["explain", str(FRAUD)])
    out = capsys.readouterr().out
    assert "flagged := Match[enriched x rules AS r]" in out
    assert "sink flagged -> PARQUET 'target/out/flagged' mode=APPEND" in out


def test_explain_of_a_bad_file_reports_errors(tmp_path, capsys):
    bad = tmp_path / "bad.flow"
    bad.write_text("SINK nothing TO CONSOLE;\n")
    assert main(["explain", str(bad)]) == 1
    assert "error[E0207]" in capsys.readouterr().err


def test_run_summary_table_aligns_and_shows_missing_latency_as_dash():
    from dslc.compiler.cli.commands import render_metrics
    table = render_metrics({"checked": {"elements_in": 144, "elements_out": 96, "p50_ms": None, "p99_ms": None},
                            "located": {"elements_in": 5, "calls": 3, "p50_ms": 20.5, "p99_ms": 41.0}}).splitlines()
    assert table[0] == "dslc: per-operator metrics"
    assert table[1].split() == ["operator", "elements_in", "elements_out", "calls", "mean_batch_size", "retries",
                                "timeouts", "misses",
                                "errors", "dead_letters", "cache_hits", "max_in_flight", "blocked_seconds",
                                "p50_ms", "p99_ms"]
    assert table[2].split()[:3] == ["checked", "144", "96"] and table[2].split()[-2:] == ["-", "-"]
    assert table[3].split()[-2:] == ["20.5", "41.0"]
    assert len({len(line) for line in table[1:]}) == 1, "columns are aligned"


# ---- dslc run: the spec's argument order (issue #16 item 5) -------------------------------

@pytest.mark.parametrize("argv, expected", [
    (["run", "f.flow", "--mode", "batch"], {"mode": "batch", "trigger": None, "master": None, "spark_args": []}),
    (["run", "f.flow", "--trigger", "available-now", "--master", "local[2]"],
     {"mode": None, "trigger": "available-now", "master": "local[2]", "spark_args": []}),
    (["run", "f.flow", "--mode", "streaming", "--trigger", "every=10s", "--master", "local[2]",
      "--", "--conf", "spark.x=1", "--verbose"],
     {"mode": "streaming", "trigger": "every=10s", "master": "local[2]",
      "spark_args": ["--conf", "spark.x=1", "--verbose"]}),
    (["run", "--master", "local[2]", "f.flow", "--", "--mode", "batch"],
     {"mode": None, "trigger": None, "master": "local[2]", "spark_args": ["--mode", "batch"]}),
    (["run", "f.flow"], {"mode": None, "trigger": None, "master": None, "spark_args": []}),
])
def test_run_options_after_the_file_are_dslc_options_and_only_what_follows_dashdash_goes_to_spark_submit(
        argv, expected):
    from dslc.compiler.cli.main import parse_args
    args = parse_args(argv)
    assert args.file == "f.flow"
    assert {key: getattr(args, key) for key in expected} == expected


def test_run_with_an_unknown_option_is_a_usage_error_not_a_spark_submit_argument(capsys):
    from dslc.compiler.cli.main import parse_args
    with pytest.raises(SystemExit) as info:
        parse_args(["run", "f.flow", "--trigerr", "available-now"])
    assert info.value.code == 2
    assert "--trigerr" in capsys.readouterr().err


def test_dashdash_is_only_for_run(capsys):
    from dslc.compiler.cli.main import parse_args
    with pytest.raises(SystemExit):
        parse_args(["check", "f.flow", "--", "--verbose"])
    assert "spark-submit" in capsys.readouterr().err
