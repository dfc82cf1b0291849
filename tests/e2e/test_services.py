"""Services as users have them, on real Spark: a customer API that wants a bearer token and wraps
its answers (`{"data": {"customer": {...}}}`), called with HEADERS holding a `${NAME}` secret and
read with ANSWER and PATH, in BATCH and STREAMING (AVAILABLE NOW), with call counts and the
request headers the service saw; bad shapes become element errors that name column and path."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from aiohttp import web
from jobs import run_flow

pytestmark = pytest.mark.spark

TOKEN = "tok-7f3a9c1e-services-test"

FLOW = """
PIPELINE customers {pipeline};
SOURCE orders FROM JSON 'in/' SCHEMA (order_id STRING, customer_id STRING, amount DOUBLE);
STREAM enriched = ENRICH orders
  WITH HTTP GET 'http://127.0.0.1:{port}/v2/customers/{{customer_id}}'
    HEADERS ('Authorization' = 'Bearer ${{CUSTOMER_API_TOKEN}}', 'Accept' = 'application/json')
    ANSWER 'data.customer'
  RETURNS (tier STRING, risk DOUBLE PATH 'scores.risk', since INT PATH 'history[0].year')
  ASYNC UNORDERED CAPACITY 8 TIMEOUT 5s
  ON ERROR DEAD LETTER 'dlq';
SINK enriched TO JSON 'out';
"""

CUSTOMERS = {
    "c1": {"tier": "gold", "scores": {"risk": 0.1}, "history": [{"year": 2019}]},
    "c2": {"tier": "silver", "scores": {"risk": 0.5}, "history": [{"year": 2021}, {"year": 2017}]},
    "c3": {"tier": "bronze", "scores": {"risk": "high"}, "history": []},     # a string for a DOUBLE
    "c4": "suspended",                                                      # a string for an object
}
ROWS = [{"order_id": f"o{i}", "customer_id": f"c{i % 5}", "amount": float(i)} for i in range(40)]


class CustomerService:
    """An API gateway in front of a customer service: 401 without the right bearer token,
    answers wrapped in data.customer, 404 for unknown customers; counts calls, keeps headers."""

    def __init__(self, serve_app, token: str = TOKEN) -> None:
        self.token = token
        self.calls: list[str] = []
        self.headers: list[dict[str, str]] = []
        app = web.Application()
        app.router.add_get("/v2/customers/{customer_id}", self.customer)
        self.server = serve_app(app)
        self.port = self.server.port

    async def customer(self, request: web.Request) -> web.Response:
        self.headers.append(dict(request.headers))
        if request.headers.get("Authorization") != f"Bearer {self.token}":
            return web.json_response({"error": "unauthorized"}, status=401)
        customer_id = request.match_info["customer_id"]
        self.calls.append(customer_id)
        if customer_id not in CUSTOMERS:
            return web.json_response({"error": "not found"}, status=404)
        return web.json_response({"data": {"customer": CUSTOMERS[customer_id]}, "meta": {"v": 2}})


def _write_input(folder: Path) -> None:
    (folder / "in").mkdir(parents=True)
    (folder / "in/o.json").write_text("".join(json.dumps(r) + "\n" for r in ROWS))


def _letters(folder: Path) -> list[dict]:
    return [json.loads(line) for path in sorted((folder / "dlq").glob("part-*")) for line in path.read_text().splitlines()
            if line.strip()]


@pytest.mark.parametrize("pipeline", ["MODE BATCH", "MODE STREAMING CHECKPOINT 'chk' TRIGGER AVAILABLE NOW"])
def test_bearer_token_wrapped_answers_and_paths(spark, serve_app, tmp_path, monkeypatch, pipeline):
    service = CustomerService(serve_app)
    _write_input(tmp_path)
    flow = tmp_path / "pipeline.flow"
    flow.write_text(FLOW.format(pipeline=pipeline, port=service.port))
    monkeypatch.setenv("CUSTOMER_API_TOKEN", TOKEN)
    job = run_flow(flow)

    assert TOKEN not in job.read_text() and "${CUSTOMER_API_TOKEN}" in job.read_text()
    out = {r.order_id: (r.tier, r.risk, r.since) for r in spark.read.json(str(tmp_path / "out")).collect()}
    expected = {}
    for row in ROWS:
        customer = CUSTOMERS.get(row["customer_id"])
        if customer is None:            # c0: 404, a miss (ON MISS NULL)
            expected[row["order_id"]] = (None, None, None)
        elif row["customer_id"] in ("c1", "c2"):
            expected[row["order_id"]] = (customer["tier"], customer["scores"]["risk"], customer["history"][0]["year"])
    assert out == expected
    # every call carried the token and the other header; each row was called once (no CACHE)
    assert len(service.calls) == len(ROWS)
    assert all(h["Authorization"] == f"Bearer {TOKEN}" and h["Accept"] == "application/json" for h in service.headers)

    letters = {letter["key"]["customer_id"]: letter for letter in _letters(tmp_path)}
    assert set(letters) == {"c3", "c4"}
    assert "field 'risk' (PATH 'scores.risk') is declared DOUBLE but got str 'high'" in letters["c3"]["error"]
    assert "ANSWER 'data.customer' found a string where an object or a list of objects is needed" in \
        letters["c4"]["error"]


@pytest.mark.parametrize("pipeline", ["MODE BATCH", "MODE STREAMING CHECKPOINT 'chk' TRIGGER AVAILABLE NOW"])
def test_a_wrong_token_stops_the_run_after_at_most_ten_calls(spark, serve_app, tmp_path, monkeypatch, capfd,
                                                             pipeline):
    """#41 item 2: every call refused with 401 and none answered: the run stops with exit code 2,
    naming the operator, its line and the header that carries the secret (as written), having
    called the service at most 10 times (not once per row, nor with retries), and writes no
    dead letter (nor any row)."""
    service = CustomerService(serve_app, token="the-right-one")
    (tmp_path / "in").mkdir(parents=True)
    for part in range(2):       # two files: two tasks call at once, sharing the 10 calls judged
        (tmp_path / f"in/o{part}.json").write_text("".join(json.dumps(r) + "\n" for r in ROWS[part::2]))
    flow = tmp_path / "pipeline.flow"
    flow.write_text(FLOW.format(pipeline=pipeline, port=service.port).replace("TIMEOUT 5s", "TIMEOUT 5s RETRY 2"))
    monkeypatch.setenv("CUSTOMER_API_TOKEN", "a-wrong-token-value")
    with pytest.raises(SystemExit) as stopped:
        run_flow(flow)
    assert stopped.value.code == 2
    assert 1 <= len(service.headers) <= 10 and not service.calls     # every request the service saw was refused
    err = capfd.readouterr().err
    assert "dslc: error: ENRICH 'enriched' (line 4): the service refused the credentials: " in err
    assert "the request sends header 'Authorization: Bearer ${CUSTOMER_API_TOKEN}'" in err
    assert "a-wrong-token-value" not in err
    assert not _letters(tmp_path) and not list((tmp_path / "out").glob("part-*"))


BATCH_FLOW = """
PIPELINE scored {pipeline};
SOURCE orders FROM JSON 'in/' SCHEMA (order_id STRING, customer_id STRING, amount DOUBLE);
STREAM scored = ENRICH orders
  WITH HTTP POST 'http://127.0.0.1:{port}/v1/score' BODY (order_id, amount)
    HEADERS ('X-Api-Key' = '${{SCORE_KEY}}')
    ANSWER 'result.items'
  RETURNS (score DOUBLE PATH 'value.score', label STRING)
  ASYNC UNORDERED CAPACITY 32 BATCH 8 TIMEOUT 10s
  ON ERROR DEAD LETTER 'dlq';
SINK scored TO JSON 'out';
"""


@pytest.mark.parametrize("pipeline", ["MODE BATCH", "MODE STREAMING CHECKPOINT 'chk' TRIGGER AVAILABLE NOW"])
def test_batch_answer_path_finds_the_per_element_array(spark, serve_app, tmp_path, monkeypatch, pipeline):
    sizes, keys = [], []

    async def score(request: web.Request) -> web.Response:
        keys.append(request.headers.get("X-Api-Key"))
        items = await request.json()
        sizes.append(len(items))
        answers = [{"value": {"score": item["amount"] * 2}, "label": "big" if item["amount"] > 20 else "small"}
                   if item["amount"] != 13 else {"value": {"score": "n/a"}} for item in items]
        return web.json_response({"result": {"items": answers, "count": len(items)}})

    app = web.Application()
    app.router.add_post("/v1/score", score)
    server = serve_app(app)
    _write_input(tmp_path)
    flow = tmp_path / "pipeline.flow"
    flow.write_text(BATCH_FLOW.format(pipeline=pipeline, port=server.port))
    monkeypatch.setenv("SCORE_KEY", "k-123")
    run_flow(flow)
    out = {r.order_id: (r.score, r.label) for r in spark.read.json(str(tmp_path / "out")).collect()}
    assert out == {r["order_id"]: (r["amount"] * 2, "big" if r["amount"] > 20 else "small")
                   for r in ROWS if r["amount"] != 13}
    assert sum(sizes) == len(ROWS) and max(sizes) <= 8 and set(keys) == {"k-123"}
    (letter,) = _letters(tmp_path)       # only the element whose item did not fit, not its batch
    assert letter["row"]["order_id"] == "o13"
    assert "field 'score' (PATH 'value.score') is declared DOUBLE but got str 'n/a'" in letter["error"]
