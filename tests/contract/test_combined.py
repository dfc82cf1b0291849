"""Statements working together, as a user combines them, in BATCH and STREAMING."""
from __future__ import annotations

import json

import pytest

from contract.support import Reply, by

pytestmark = pytest.mark.spark

PIPE = """
SOURCE orders FROM JSON 'in/orders/' SCHEMA (id STRING, country STRING, amount DOUBLE, ts TIMESTAMP)
  WATERMARK ts DELAY 10s;
SOURCE country_list FROM JSON 'in/countries/' SCHEMA (code STRING, name STRING);
STREAM europe = SELECT code, name FROM country_list WHERE code <> 'US';
BROADCAST countries FROM europe KEY code;
"""
ORDERS = [{"id": f"o{i}", "country": c, "amount": float(i), "ts": f"2024-01-01T10:00:0{i}Z"}
          for i, c in enumerate(["NL", "DE", "US", "NL", "FR"])]
COUNTRIES = [{"code": "NL", "name": "Netherlands"}, {"code": "DE", "name": "Germany"},
             {"code": "NL", "name": "Holland"}, {"code": "US", "name": "United States"}]


def test_a_state_built_from_a_stream_feeds_match_then_enrich_csv_and_python_sinks(flow, service, mode):
    """docs/language.md: "A broadcast state is a keyed map built from a source (or stream)";
    "BROADCAST countries FROM country_list KEY code; -- without OP every row upserts"; then MATCH,
    an ENRICH after it with dead letters, a partitioned CSV sink and a PYTHON sink of one stream."""
    service.script("o3", Reply(status=500))
    sent = flow.folder / "sent.jsonl"
    flow.module("send", f"""
import json
def send(rows):
    with open({str(sent)!r}, "a") as f:
        for r in rows:
            f.write(json.dumps(r) + "\\n")
""")
    flow.rows_file("in/orders/1.json", ORDERS)
    flow.rows_file("in/countries/1.json", COUNTRIES)
    flow.run(PIPE + f"""
STREAM m = MATCH orders AGAINST countries AS c WHERE orders.country = c.code;
STREAM e = ENRICH m WITH HTTP GET '{service.url}/kv/{{id}}' RETURNS (value STRING) ASYNC UNORDERED
  ON ERROR DEAD LETTER 'dlq';
STREAM named = SELECT id, name, value, country FROM e WHERE amount >= 0;
SINK named TO CSV 'out/n' OPTIONS (header = 'true') PARTITION BY (country);
SINK named TO PYTHON 'send:send';
""", mode)
    expected = [("o0", "Holland", "v-o0", "NL"), ("o1", "Germany", "v-o1", "DE")]
    assert by(flow.read("out/n", "csv"), "id", "name", "value", "country") == expected
    written = [json.loads(line) for line in sent.read_text().splitlines()]
    assert by(written, "id", "name", "value", "country") == expected
    # US and FR match nothing: no call. Two sinks share the ENRICH: it runs once in both modes
    # (BATCH keeps its result, STREAMING computes it in one stage query: docs/streaming.md)
    assert service.calls == {"o0": 1, "o1": 1, "o3": 1}
    assert {r["key"]["id"] for r in flow.read("dlq", "json")} == {"o3"}


def test_process_without_broadcast_after_an_enrich_that_drops_errors(flow, service, mode):
    """docs/language.md: "STREAM cleaned = PROCESS raw USING PYTHON 'clean:fix' RETURNS (...)" (no
    state); spec: "ON ERROR FAIL; -- same choices as ON TIMEOUT" (DROP emits nothing)."""
    service.script("o1", Reply(status=500))
    flow.module("fix", "def fix(row):\n    return {'id': row['id'], 'up': row['country'].lower()}\n")
    flow.rows_file("in/orders/1.json", ORDERS)
    flow.rows_file("in/countries/1.json", COUNTRIES)
    flow.run(PIPE + f"""
STREAM e = ENRICH orders WITH HTTP GET '{service.url}/kv/{{id}}' RETURNS (value STRING) ON ERROR DROP;
STREAM f = PROCESS e USING PYTHON 'fix:fix' RETURNS (id STRING, up STRING);
SINK f TO JSON 'out/f';
""", mode)
    assert by(flow.read("out/f", "json"), "id", "up") == [("o0", "nl"), ("o2", "us"), ("o3", "nl"), ("o4", "fr")]
    assert service.total == 5
