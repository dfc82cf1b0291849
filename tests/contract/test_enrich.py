"""ENRICH, as the contract states it (spec: Statements, Semantics, User functions), in BATCH and
STREAMING, against a real HTTP service that counts its calls."""
from __future__ import annotations

import datetime as dt
import json

import pytest

from contract.support import Reply, by
from dslc.compiler.cli.main import main

pytestmark = pytest.mark.spark

ORDERS = [{"id": f"o{i}", "key": k} for i, k in enumerate(["a", "b", "a", "c", "d"])]
SOURCE = "SOURCE orders FROM JSON 'in/orders/' SCHEMA (id STRING, key STRING);\n"


def test_enrich_keeps_every_input_column_and_appends_the_returns_columns(flow, service, mode):
    """"ENRICH keeps every input column and appends the RETURNS columns." ... "placeholders
    `{col}` are filled with URL-encoded values; a JSON object or array body is the result"."""
    flow.rows_file("in/orders/1.json", ORDERS)
    flow.run(SOURCE + f"""
STREAM e = ENRICH orders WITH HTTP GET '{service.url}/kv/{{key}}' RETURNS (value STRING);
SINK e TO PARQUET 'out/e';""", mode)
    rows = flow.read("out/e")
    assert by(rows, "id", "key", "value") == sorted((o["id"], o["key"], f"v-{o['key']}") for o in ORDERS)
    assert list(rows[0]) == ["id", "key", "value"]
    assert service.calls == {"a": 2, "b": 1, "c": 1, "d": 1}          # one call per row, no cache


def test_one_object_one_row_a_list_one_row_each_and_no_result_is_a_miss(flow, service, mode):
    """"A result of one object gives one row, a list gives one row per element, and no result
    (None, an empty list, HTTP 404) is a miss." With the default ON MISS NULL a miss keeps its
    row with NULL RETURNS columns; JSON `null` is no result too (docs/operations.md)."""
    service.script("a", Reply(body={"value": "one"}))
    service.script("b", Reply(body=[{"value": "x"}, {"value": "y"}]))
    service.script("c", Reply(body=[]))
    service.script("d", Reply(status=404, body={"error": "no such key"}))
    service.script("n", Reply(body="null"))
    flow.rows_file("in/orders/1.json", [{"id": k, "key": k} for k in "abcdn"])
    flow.run(SOURCE + f"""
STREAM e = ENRICH orders WITH HTTP GET '{service.url}/kv/{{key}}' RETURNS (value STRING);
SINK e TO PARQUET 'out/e';""", mode)
    assert by(flow.read("out/e"), "id", "value") == sorted(
        [("a", "one"), ("b", "x"), ("b", "y"), ("c", None), ("d", None), ("n", None)], key=repr)
    assert service.total == 5


def test_on_miss_drop_drops_the_row(flow, service, mode):
    """"ON MISS NULL -- NULL (default) | DROP | RETRY"."""
    service.script("b", Reply(status=404))
    flow.rows_file("in/orders/1.json", ORDERS)
    flow.run(SOURCE + f"""
STREAM e = ENRICH orders WITH HTTP GET '{service.url}/kv/{{key}}' RETURNS (value STRING) ON MISS DROP;
SINK e TO PARQUET 'out/e';""", mode)
    assert sorted(r["id"] for r in flow.read("out/e")) == ["o0", "o2", "o3", "o4"]


def test_on_miss_retry_retries_a_miss(flow, service):
    """"ON MISS NULL -- NULL (default) | DROP | RETRY": a miss is tried again (RETRY n times)."""
    service.script("a", Reply(status=404), Reply(status=404), Reply(body={"value": "late"}))
    flow.rows_file("in/orders/1.json", [{"id": "o0", "key": "a"}])
    flow.run(SOURCE + f"""
STREAM e = ENRICH orders WITH HTTP GET '{service.url}/kv/{{key}}' RETURNS (value STRING)
  RETRY 3 BACKOFF 10ms ON MISS RETRY;
SINK e TO PARQUET 'out/e';""", "BATCH")
    assert by(flow.read("out/e"), "id", "value") == [("o0", "late")]
    assert service.calls["a"] == 3


def test_placeholders_are_url_encoded(flow, service, mode):
    """"HTTP: placeholders `{col}` are filled with URL-encoded values"."""
    keys = ["a b", "x/y", "q?r#s", "ü"]
    flow.rows_file("in/orders/1.json", [{"id": str(i), "key": k} for i, k in enumerate(keys)])
    flow.run(SOURCE + f"""
STREAM e = ENRICH orders WITH HTTP GET '{service.url}/kv/{{key}}' RETURNS (value STRING);
SINK e TO PARQUET 'out/e';""", mode)
    assert by(flow.read("out/e"), "key", "value") == sorted((k, f"v-{k}") for k in keys)
    assert sorted(service.calls) == sorted(keys)                       # each value in one path segment
    assert all(p.count("/") == 2 for p in service.raw_paths)


def test_non_2xx_answers_are_errors_that_retry_retries(flow, service, mode):
    """"other non-2xx answers and connection faults are errors"; "RETRY 3 BACKOFF 50ms
    EXPONENTIAL -- optional"; "ON ERROR FAIL; -- same choices as ON TIMEOUT"."""
    service.script("a", Reply(status=500), Reply(status=503), Reply(body={"value": "third time"}))
    service.script("b", Reply(status=500))
    flow.rows_file("in/orders/1.json", [{"id": "o1", "key": "a"}, {"id": "o2", "key": "b"}])
    flow.run(SOURCE + f"""
STREAM e = ENRICH orders WITH HTTP GET '{service.url}/kv/{{key}}' RETURNS (value STRING)
  RETRY 2 BACKOFF 10ms EXPONENTIAL ON ERROR NULL;
SINK e TO PARQUET 'out/e';""", mode)
    assert by(flow.read("out/e"), "id", "value") == [("o1", "third time"), ("o2", None)]
    assert service.calls == {"a": 3, "b": 3}                           # 1 + RETRY 2 each


def test_an_error_fails_the_job_by_default_naming_operator_line_and_key(flow, service):
    """"Defaults: ... `ON TIMEOUT FAIL`, `ON ERROR FAIL`"; docs/language.md: "Errors at run time
    (in the Spark job) name the operator, its line and the element's key"."""
    service.script("c", Reply(status=500, body="boom"))
    flow.rows_file("in/orders/1.json", ORDERS)
    with pytest.raises(Exception) as failed:
        flow.run(SOURCE + f"""
STREAM enriched = ENRICH orders WITH HTTP GET '{service.url}/kv/{{key}}' RETURNS (value STRING);
SINK enriched TO PARQUET 'out/e';""", "BATCH")
    message = str(failed.value)
    assert "operator 'enriched' (line 4)" in message and "key='c'" in message and "HTTP 500" in message
    assert service.calls["c"] == 1                                     # no retry by default
    assert flow.read("out/e") == []


def test_timeout_bounds_one_element_retries_included(flow, service, mode):
    """"TIMEOUT bounds one element from first call to final answer, retries included.": a key
    that answers 500 after 150 ms with RETRY 20 gets only the attempts that fit in TIMEOUT 500ms,
    then ON TIMEOUT decides."""
    service.script("slow", Reply(status=500, delay_s=0.15))
    flow.rows_file("in/orders/1.json", [{"id": "o1", "key": "slow"}, {"id": "o2", "key": "ok"}])
    flow.run(SOURCE + f"""
STREAM e = ENRICH orders WITH HTTP GET '{service.url}/kv/{{key}}' RETURNS (value STRING)
  TIMEOUT 500ms RETRY 20 BACKOFF 10ms ON TIMEOUT NULL ON ERROR FAIL;
SINK e TO PARQUET 'out/e';""", mode)
    assert by(flow.read("out/e"), "id", "value") == [("o1", None), ("o2", "v-ok")]
    assert 2 <= service.calls["slow"] <= 4


def test_timeout_dead_letter_writes_the_element_instead_of_emitting_it(flow, service, mode):
    """"ON TIMEOUT DEAD LETTER 'target/dlq/enrich' -- FAIL (default) | NULL | DROP | DEAD LETTER 'path'"."""
    service.script("slow", Reply(delay_s=2.0))
    flow.rows_file("in/orders/1.json", [{"id": "o1", "key": "slow"}, {"id": "o2", "key": "ok"}])
    flow.run(SOURCE + f"""
STREAM e = ENRICH orders WITH HTTP GET '{service.url}/kv/{{key}}' RETURNS (value STRING)
  TIMEOUT 300ms ON TIMEOUT DEAD LETTER 'dlq';
SINK e TO PARQUET 'out/e';""", mode)
    assert by(flow.read("out/e"), "id", "value") == [("o2", "v-ok")]
    letters = flow.read("dlq", "json")
    assert len(letters) == 1 and "slow" in json.dumps(letters[0], default=str)
    assert service.calls["slow"] == 1


def test_at_most_capacity_requests_in_flight_per_task(flow, service):
    """"At most CAPACITY requests are in flight per running task; a full queue blocks the input
    (back-pressure), it never drops." One file, one task: the service never sees more than 3."""
    for k in range(30):
        service.script(f"k{k}", Reply(body={"value": str(k)}, delay_s=0.05))
    flow.rows_file("in/orders/1.json", [{"id": str(k), "key": f"k{k}"} for k in range(30)])
    flow.run(SOURCE + f"""
STREAM e = ENRICH orders WITH HTTP GET '{service.url}/kv/{{key}}' RETURNS (value STRING)
  ASYNC UNORDERED CAPACITY 3;
SINK e TO PARQUET 'out/e';""", "BATCH")
    assert len(flow.read("out/e")) == 30 and service.total == 30       # nothing dropped
    assert 2 <= service.max_in_flight <= 3


def test_ordered_emits_in_input_order(flow, mode):
    """"ORDERED emits in input order; UNORDERED emits in completion order": one partition, later
    rows answer first, the sink still holds input order."""
    flow.module("slowfirst", """
import asyncio
async def lookup(row):
    await asyncio.sleep((10 - int(row["id"])) * 0.02)
    return {"value": "v" + row["id"]}
""")
    flow.rows_file("in/orders/1.json", [{"id": str(i), "key": "k"} for i in range(10)])
    flow.run(SOURCE + """
STREAM e = ENRICH orders WITH PYTHON 'slowfirst:lookup' RETURNS (value STRING) ASYNC ORDERED CAPACITY 10;
SINK e TO PARQUET 'out/e';""", mode)
    assert [r["id"] for r in flow.read("out/e")] == [str(i) for i in range(10)]


def test_cache_answers_repeated_keys_without_calls(flow, service):
    """"CACHE 10000 TTL 5m -- optional, per executor process": one task, four keys, 20 rows."""
    flow.rows_file("in/orders/1.json", [{"id": str(i), "key": "abcd"[i % 4]} for i in range(20)])
    flow.run(SOURCE + f"""
STREAM e = ENRICH orders WITH HTTP GET '{service.url}/kv/{{key}}' RETURNS (value STRING) CACHE 100 TTL 5m;
SINK e TO PARQUET 'out/e';""", "BATCH")
    assert len(flow.read("out/e")) == 20
    assert service.calls == {"a": 1, "b": 1, "c": 1, "d": 1}


def test_python_functions_plain_def_async_def_and_a_class_with_timeout(flow, mode):
    """"async def customer(row: dict) -> dict | list[dict] | None -- ENRICH WITH PYTHON; a plain
    def runs in a thread pool"; "An ENRICH class may define `timeout(row)` to answer a timed-out
    element itself."""
    flow.module("fns", """
import asyncio, threading, time
def plain(row):
    return {"value": "plain-" + row["key"], "thread": threading.current_thread().name}
async def coro(row):
    await asyncio.sleep(0)
    return [{"value": "c1"}, {"value": "c2"}] if row["key"] == "a" else None
class Slow:
    async def __call__(self, row):
        if row["key"] == "a":
            await asyncio.sleep(5)
        return {"value": "fast"}
    def timeout(self, row):
        return {"value": "answered by timeout()"}
""")
    flow.rows_file("in/orders/1.json", [{"id": "1", "key": "a"}, {"id": "2", "key": "b"}])
    flow.run(SOURCE + """
STREAM p = ENRICH orders WITH PYTHON 'fns:plain' RETURNS (value STRING, thread STRING);
STREAM c = ENRICH orders WITH PYTHON 'fns:coro' RETURNS (value STRING);
STREAM s = ENRICH orders WITH PYTHON 'fns:Slow' RETURNS (value STRING) TIMEOUT 300ms;
SINK p TO PARQUET 'out/p';
SINK c TO PARQUET 'out/c';
SINK s TO PARQUET 'out/s';""", mode)
    plain = flow.read("out/p")
    assert by(plain, "id", "value") == [("1", "plain-a"), ("2", "plain-b")]
    assert all(r["thread"] != "MainThread" for r in plain)             # not on the caller's thread
    assert by(flow.read("out/c"), "id", "value") == [("1", "c1"), ("1", "c2"), ("2", None)]
    assert by(flow.read("out/s"), "id", "value") == [("1", "answered by timeout()"), ("2", "fast")]


def test_defaults_are_the_contracts(flow, capsys):
    """"Defaults: `ASYNC` mode ORDERED, `CAPACITY 100`, `TIMEOUT 30s`, no retry, no cache, no rate
    limit, `ON MISS NULL`, `ON TIMEOUT FAIL`, `ON ERROR FAIL`." (as `dslc explain --format json` shows)"""
    path = flow.write(SOURCE + "STREAM e = ENRICH orders WITH HTTP GET 'http://h/{key}' RETURNS (v STRING);\n"
                      "SINK e TO CONSOLE;")
    assert main(["explain", str(path), "--format", "json"]) == 0
    nodes = json.loads(capsys.readouterr().out)["nodes"]
    enrich = next(n for n in nodes if n["name"] == "e")
    assert enrich["mode"] == "ORDERED" and enrich["capacity"] == 100 and enrich["timeout_s"] == 30
    assert enrich["retry"] is None and enrich["cache"] is None and enrich["rate"] is None
    assert (enrich["on_miss"], enrich["on_timeout"], enrich["on_error"]) == ("NULL", "FAIL", "FAIL")


def test_dead_letter_record_fields(flow, service, mode):
    """spec: "ON ERROR FAIL; -- same choices as ON TIMEOUT" (DEAD LETTER 'path'); docs/runtime.md: "A
    dead letter is one JSON line" with `operator`, `line`, `kind`, `error`, `attempts`, `key`, `row`."""
    service.script("b", Reply(status=503, body="busy"))
    flow.rows_file("in/orders/1.json", [{"id": "o1", "key": "a"}, {"id": "o2", "key": "b"}])
    flow.run(SOURCE + f"""
STREAM enriched = ENRICH orders WITH HTTP GET '{service.url}/kv/{{key}}' RETURNS (value STRING)
  RETRY 1 BACKOFF 10ms ON ERROR DEAD LETTER 'dlq';
SINK enriched TO PARQUET 'out/e';""", mode)
    assert by(flow.read("out/e"), "id", "value") == [("o1", "v-a")]
    lines = [json.loads(line) for p in sorted((flow.folder / "dlq").rglob("part-*")) for line in p.read_text().splitlines()]
    assert len(lines) == 1
    letter = lines[0]
    assert letter["operator"] == "enriched" and letter["line"] == 4 and letter["kind"] == "error"
    assert letter["attempts"] == 2 and letter["key"] == {"key": "b"} and letter["row"] == {"id": "o2", "key": "b"}
    assert letter["error"].startswith("CallError: HTTP 503") or "HTTP 503" in letter["error"]
    assert service.calls["b"] == 2


def test_modules_beside_the_flow_file_come_first(flow):
    """"Modules are looked up beside the .flow file first, then on `sys.path`.": a module named like
    one of the standard library's (`colorsys`) is the one beside the file."""
    (flow.folder / "colorsys.py").write_text("def lookup(row):\n    return {'value': 'beside'}\n")
    flow.rows_file("in/orders/1.json", [{"id": "o1", "key": "k"}])
    flow.run(SOURCE + """STREAM e = ENRICH orders WITH PYTHON 'colorsys:lookup' RETURNS (value STRING);
SINK e TO PARQUET 'out/e';""", "BATCH")
    assert flow.read("out/e") == [{"id": "o1", "key": "k", "value": "beside"}]


def test_iso_time_text_is_parsed_and_a_string_is_not_an_array(flow, service, mode):
    """docs/language.md (RETURNS types): TIMESTAMP and DATE answer fields may be ISO 8601 text, as
    JSON carries time; text that is not a time, and a string where an ARRAY is declared, are that
    element's error (ON ERROR), never the whole job's (#33 item 4: a ValueError from the Arrow
    conversion failed the job; "vip" became ["v", "i", "p"])."""
    service.script("a", Reply(body={"at": "2026-11-01T12:30:00Z", "day": "2026-11-01", "tags": ["vip"]}))
    service.script("b", Reply(body={"at": "2026-11-01T14:30:00+02:00", "day": "2026-11-02T08:00:00", "tags": []}))
    service.script("c", Reply(body={"at": "2026-11-01 12:30:00", "day": "2026-11-03", "tags": "vip"}))
    service.script("d", Reply(body={"at": "yesterday", "day": "2026-11-04", "tags": ["x"]}))
    service.script("e", Reply(body={"at": None, "day": "1 Nov 2026", "tags": None}))
    flow.rows_file("in/orders/1.json", [{"id": f"o{k}", "key": k} for k in "abcde"])
    flow.run(SOURCE + f"""
STREAM enriched = ENRICH orders WITH HTTP GET '{service.url}/kv/{{key}}'
  RETURNS (at TIMESTAMP, day DATE, tags ARRAY<STRING>) ON ERROR DEAD LETTER 'dlq' UP TO 100%;
SINK enriched TO PARQUET 'out/e';""", mode)
    rows = {r["id"]: r for r in flow.read("out/e")}
    assert sorted(rows) == ["oa", "ob"]
    utc = dt.timezone.utc
    assert rows["oa"]["at"].astimezone(utc) == dt.datetime(2026, 11, 1, 12, 30, tzinfo=utc)
    assert rows["ob"]["at"].astimezone(utc) == dt.datetime(2026, 11, 1, 12, 30, tzinfo=utc)
    assert (rows["oa"]["day"], rows["ob"]["day"]) == (dt.date(2026, 11, 1), dt.date(2026, 11, 2))
    assert (rows["oa"]["tags"], rows["ob"]["tags"]) == (["vip"], [])
    letters = {json.loads(line)["key"]["key"]: json.loads(line)["error"]
               for p in sorted((flow.folder / "dlq").rglob("part-*")) for line in p.read_text().splitlines()}
    assert sorted(letters) == ["c", "d", "e"]
    assert "field 'tags' is declared ARRAY<STRING> but got str 'vip'" in letters["c"]
    assert "field 'at' is declared TIMESTAMP but got str 'yesterday'" in letters["d"]
    assert "field 'day' is declared DATE but got str '1 Nov 2026'" in letters["e"]


def _redirect_loop(serve_app):
    """GET /loop/{key}: a redirect to itself, for ever (aiohttp gives up with TooManyRedirects,
    whose text carries the URL it followed)."""
    from aiohttp import web

    async def loop(request: web.Request) -> web.StreamResponse:
        raise web.HTTPFound(str(request.rel_url))

    app = web.Application()
    app.router.add_get("/loop/{key}", loop)
    return serve_app(app)


@pytest.mark.parametrize("policy", ["DEAD LETTER 'dlq'", "FAIL"])
def test_credentials_in_a_url_never_reach_an_error_a_dead_letter_or_a_recording(flow, serve_app, policy):
    """docs/operations.md: a URL's user:password and credential-like query values are masked in
    every text that leaves a call: its recording (request and error), the dead letter, the task
    failure (#33 item 5: masked in the recording's request line only)."""
    from dslc.runtime.wrappers import recording

    policy += " UP TO 100%" if policy.startswith("DEAD") else ""     # its one row is a dead letter
    server = _redirect_loop(serve_app)
    flow.rows_file("in/orders/1.json", [{"id": "o1", "key": "a"}])
    url = f"http://robot:pa55word@127.0.0.1:{server.port}/loop/{{key}}?api_key=s3cr3tkey&lang=en"
    folder = flow.folder / "rec"
    context = flow.spark.sparkContext
    context.setLocalProperty(recording.RECORD_PROPERTY, recording.setting_json(folder))
    try:
        text = SOURCE + f"""STREAM e = ENRICH orders WITH HTTP GET '{url}' RETURNS (value STRING) ON ERROR {policy};
SINK e TO PARQUET 'out/e';"""
        if policy == "FAIL":
            with pytest.raises(Exception) as failed:
                flow.run(text, "BATCH")
            shown = str(failed.value)
            assert "operator 'e'" in shown and "TooManyRedirects" in shown
        else:
            flow.run(text, "BATCH")
            shown = "".join(p.read_text() for p in (flow.folder / "dlq").rglob("part-*"))
            assert "TooManyRedirects" in shown and "api_key=***" in shown
    finally:
        context.setLocalProperty(recording.RECORD_PROPERTY, None)
    recorded = json.dumps(recording.entries(folder))
    assert "TooManyRedirects" in recorded and "api_key=***" in recorded
    for secret in ("pa55word", "s3cr3tkey", "robot:"):
        assert secret not in shown, shown[-2000:]
        assert secret not in recorded, recorded[-2000:]
