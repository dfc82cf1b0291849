"""Column lineage derived by the compiler (SQL through sqlglot, ENRICH, MATCH, PROCESS), `dslc
explain --lineage`, and the OpenLineage events `dslc run --lineage` sends, built with the
openlineage-python client and validated against OpenLineage's published JSON schemas; every
transport a DEST can name (a file, a folder, a real HTTP endpoint). No Spark."""
from __future__ import annotations

import json
from pathlib import Path

from aiohttp import web
from lineage_schemas import problems

from dslc.compiler.cli.lineage_events import RunLineage, ended
from dslc.compiler.cli.main import main
from dslc.compiler.pipeline import check_file
from dslc.compiler.plan.lineage import columns_of, sinks_of
from dslc.runtime import exit_codes

FLOW = """PIPELINE traced MODE BATCH;
SOURCE orders FROM JSON 'in/' SCHEMA (order_id STRING, customer_id STRING, note STRING, amount DOUBLE);
SOURCE rule_updates FROM CSV 'rules/' SCHEMA (rule_id STRING, op STRING, max_amount DOUBLE);
BROADCAST rules FROM rule_updates KEY rule_id OP op;
STREAM big = SELECT order_id, customer_id, note, amount * 2 AS doubled FROM orders WHERE amount > 0;
STREAM scored = ENRICH big WITH HTTP GET 'http://127.0.0.1:9/k/${API_KEY}/score/{customer_id}?token=${TOKEN}'
  RETURNS (score DOUBLE) PROVENANCE AS how;
STREAM labelled = ENRICH scored WITH MODEL 'gpt-test' AT 'http://127.0.0.1:9/v1'
    SYSTEM 'Label orders.' PROMPT 'Note: {note}'
  RETURNS (label STRING);
STREAM flagged = MATCH labelled AGAINST rules AS r WHERE labelled.doubled > r.max_amount;
SINK flagged TO PARQUET 'out/flagged';
"""


def _flow(tmp_path: Path) -> Path:
    path = tmp_path / "pipeline.flow"
    path.write_text(FLOW)
    return path


def test_an_enrich_column_comes_from_exactly_the_columns_its_request_reads(tmp_path):
    known = columns_of(check_file(str(_flow(tmp_path))))
    scored, labelled = known["scored"], known["labelled"]
    assert scored["score"] == scored["how"] == {("orders", "customer_id")}    # not API_KEY, TOKEN: secrets
    assert labelled["label"] == {("orders", "note")}                           # the PROMPT's column, not SYSTEM's
    assert labelled["doubled"] == {("orders", "amount")}                        # through SQL
    [flagged] = sinks_of(check_file(str(_flow(tmp_path))))
    assert flagged.columns["max_amount"] == {("rule_updates", "max_amount")}     # through MATCH's state
    assert flagged.columns["label"] == {("orders", "note")}


def test_explain_prints_the_column_lineage(tmp_path, capsys):
    assert main(["explain", str(_flow(tmp_path)), "--lineage"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["sink", "column", "comes", "from"]
    assert [line.split() for line in lines if " label " in line] == [["flagged", "(line", "12)", "label", "orders.note"]]
    assert [line.split() for line in lines if " how " in line] == [
        ["flagged", "(line", "12)", "how", "orders.customer_id"]]


def _events(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def test_every_event_validates_against_the_published_schemas(tmp_path):
    p = check_file(str(_flow(tmp_path)))
    dest = tmp_path / "events.jsonl"
    lineage = RunLineage(p, str(dest), tmp_path, streaming=False)
    lineage.emit(lineage.START)
    ended(lineage, exit_codes.DONE, "done")
    ended(lineage, exit_codes.FAILED, "the job failed")
    events = _events(dest)
    assert [e["eventType"] for e in events] == ["START", "COMPLETE", "FAIL"]
    for event in events:
        assert problems(event) == []
    start = events[0]
    assert {e["run"]["runId"] for e in events} == {start["run"]["runId"]}
    inputs = {(d["namespace"], d["name"]) for d in start["inputs"]}
    assert ("file", str((tmp_path / "in").resolve())) in inputs
    assert ("http://127.0.0.1:9", "/k/${API_KEY}/score/{customer_id}?token=***") in inputs   # a service, masked
    [output] = start["outputs"]
    assert output["name"] == str((tmp_path / "out/flagged").resolve())
    fields = output["facets"]["columnLineage"]["fields"]
    assert fields["score"]["inputFields"] == [{"namespace": "file", "name": str((tmp_path / "in").resolve()),
                                              "field": "customer_id", "transformations": []}]
    schema = {f["name"]: f["type"] for f in output["facets"]["schema"]["fields"]}
    assert schema["score"] == "DOUBLE" and schema["how"].startswith("STRUCT<source: STRING")
    assert events[2]["run"]["facets"]["errorMessage"]["message"].startswith(f"exit code {exit_codes.FAILED}")


def test_a_folder_gets_one_file_per_event_and_an_endpoint_gets_them_posted(tmp_path, serve_app):
    p = check_file(str(_flow(tmp_path)))
    folder = tmp_path / "lineage/"
    lineage = RunLineage(p, f"{folder}/", tmp_path, streaming=True)
    lineage.emit(lineage.START)
    ended(lineage, exit_codes.DONE, "done")
    files = sorted(folder.glob("event-*.json"))
    assert len(files) == 2 and [json.loads(f.read_text())["eventType"] for f in files] == ["START", "COMPLETE"]
    assert json.loads(files[0].read_text())["job"]["facets"]["jobType"]["processingType"] == "STREAMING"

    received: list[dict] = []

    async def collect(request):
        received.append(await request.json())
        return web.json_response({}, status=201)

    app = web.Application()
    app.router.add_post("/api/v1/lineage", collect)
    server = serve_app(app)
    lineage = RunLineage(p, f"http://127.0.0.1:{server.port}", tmp_path, streaming=False)
    lineage.emit(lineage.START)
    ended(lineage, exit_codes.DONE, "done")
    assert [e["eventType"] for e in received] == ["START", "COMPLETE"]
    assert all(problems(e) == [] for e in received)


def test_an_endpoint_that_does_not_answer_loses_the_event_not_the_run(tmp_path, capsys):
    from dslc.testing.app_thread import free_port

    lineage = RunLineage(check_file(str(_flow(tmp_path))), f"http://127.0.0.1:{free_port()}", tmp_path,
                         streaming=False)
    lineage.emit(lineage.START)
    assert "dslc: warning: the START lineage event was not sent" in capsys.readouterr().err
