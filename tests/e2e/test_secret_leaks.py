"""A secret's value reaches the service and nothing else.

A pipeline with a `${NAME}` secret in a header and another in the URL is checked, explained in
every format, compiled (these ten commands through the CLI's entry point in one Python), run
with `dslc run --secrets FILE --record` in BATCH (Spark's event log on) and in STREAMING (a
checkpoint), tested with `dslc test`, and made to fail (a missing secret): then every file the runs left (job, explain outputs, stdout/stderr, metrics JSON,
recordings, dead letters, checkpoint, sink folders, the temporary folder the runs used, Spark's
event log) is searched for each value, raw and base64-encoded at every alignment, and holds none.
The service checks both secrets, so the rows prove the values did arrive.
"""
from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from aiohttp import web

pytestmark = [pytest.mark.spark, pytest.mark.slow]

TOKEN = "Tk-4f81c0de93a7-never-written"
API_KEY = "ak-27be5190-never-written"

FLOW = """
PIPELINE leaks MODE BATCH CHECKPOINT 'target/checkpoint';
SOURCE orders FROM JSON 'in/' SCHEMA (order_id STRING, customer_id STRING, amount DOUBLE);
STREAM enriched = ENRICH orders
  WITH HTTP GET 'http://127.0.0.1:{port}/k/${{API_KEY}}/customers/{{customer_id}}'
    HEADERS ('Authorization' = 'Bearer ${{CUSTOMER_TOKEN}}')
    ANSWER 'data.customer'
  RETURNS (tier STRING, risk DOUBLE PATH 'scores.risk')
  ASYNC UNORDERED CAPACITY 8 TIMEOUT 5s
  ON ERROR DEAD LETTER 'target/dlq';
SINK enriched TO JSON 'target/out/{sink}';
"""

TEST_YAML = """
cases:
  - name: wrapped answers, no secret needed
    sources:
      orders:
        - {order_id: o1, customer_id: c1, amount: 1.0}
    enrich:
      enriched:
        - {key: c1, answer: {tier: gold, risk: 0.1}}
    expect:
      enriched:
        - {order_id: o1, customer_id: c1, amount: 1.0, tier: gold, risk: 0.1}
"""


def _forms(value: str) -> list[bytes]:
    """The value as bytes, and its base64 forms at each of the three alignments it can take inside
    a longer encoded text (standard and URL-safe alphabets)."""
    raw = value.encode()
    forms = [raw]
    for pad in range(3):
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            encoded = encode(b"x" * pad + raw + b"x" * 3)
            skip = (pad * 4 + 2) // 3 + 1         # characters that depend on the padding
            forms.append(encoded[skip:skip + (len(raw) * 4) // 3 - 4])
    return forms


def _service(serve_app):
    calls: list[str] = []

    async def customer(request: web.Request) -> web.Response:
        if request.match_info["key"] != API_KEY or request.headers.get("Authorization") != f"Bearer {TOKEN}":
            return web.json_response({"error": "unauthorized"}, status=401)
        customer_id = request.match_info["customer_id"]
        calls.append(customer_id)
        if customer_id == "c3":
            return web.Response(status=500, text="backend failure")       # dead letters
        return web.json_response({"data": {"customer": {"tier": "gold", "scores": {"risk": 0.25}}}})

    app = web.Application()
    app.router.add_get("/k/{key}/customers/{customer_id}", customer)
    server = serve_app(app)
    server.calls = calls
    return server


def _dslc(work: Path, env: dict, *args: str, expect: int = 0) -> subprocess.CompletedProcess:
    result = subprocess.run([sys.executable, "-m", "dslc.compiler.cli", *args], cwd=work, env=env,
                            capture_output=True, text=True, timeout=400)
    name = "-".join(a.strip("-").replace("/", "_") for a in args[:3])
    (work / "logs").mkdir(exist_ok=True)
    (work / "logs" / f"{name}.out").write_text(result.stdout)
    (work / "logs" / f"{name}.err").write_text(result.stderr)
    assert result.returncode == expect, result.stdout[-3000:] + result.stderr[-3000:]
    return result


#: the commands that start no Spark, run one after the other through the CLI's entry point in one
#: Python (a Python's start costs more than such a command), each with its own stdout and stderr
BATCH = """
import contextlib, json, sys
from dslc.compiler.cli.main import main

codes = []
for argv, out, err in json.loads(sys.argv[1]):
    with open(out, "w") as o, open(err, "w") as e, contextlib.redirect_stdout(o), contextlib.redirect_stderr(e):
        try:
            codes.append(main(argv))
        except SystemExit as exc:
            codes.append(exc.code)
print(json.dumps(codes))
"""


def _dslc_batch(work: Path, env: dict, commands: list[tuple[str, ...]]) -> list[str]:
    """Each command's stdout (its stdout and stderr also kept in logs/, a file per command); every
    command must succeed."""
    (work / "logs").mkdir(exist_ok=True)
    names = ["-".join(a.strip("-").replace("/", "_") for a in args) for args in commands]
    plan = [(list(args), str(work / "logs" / f"{n}.out"), str(work / "logs" / f"{n}.err"))
            for args, n in zip(commands, names)]
    result = subprocess.run([sys.executable, "-c", BATCH, json.dumps(plan)], cwd=work, env=env,
                            capture_output=True, text=True, timeout=400)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    codes = json.loads(result.stdout.splitlines()[-1])
    outputs = [Path(out).read_text() for _, out, _ in plan]
    assert codes == [0] * len(commands), [(n, c, Path(e).read_text()[-2000:]) for n, c, (_, _, e) in
                                          zip(names, codes, plan) if c != 0]
    return outputs


def test_no_artefact_of_a_run_holds_a_secret(tmp_path, serve_app):
    server = _service(serve_app)
    work = tmp_path / "work"
    (work / "in").mkdir(parents=True)
    (work / "in/o.json").write_text("".join(json.dumps({"order_id": f"o{i}", "customer_id": f"c{i % 4}",
                                                        "amount": float(i)}) + "\n" for i in range(24)))
    flow = work / "pipeline.flow"
    flow.write_text(FLOW.format(port=server.port, sink="batch"))
    (work / "pipeline.test.yaml").write_text(TEST_YAML)
    store = tmp_path / "store"          # the secrets file lives outside the searched folder
    store.mkdir()
    secrets_file = store / "secrets.env"
    secrets_file.write_text(f"CUSTOMER_TOKEN={TOKEN}\nexport API_KEY='{API_KEY}'\n")
    (work / "tmp").mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("DSLC_FLOW_FOLDER", "PYSPARK_PYTHON", "SPARK_REMOTE")}
    env.update(TMPDIR=str(work / "tmp"), SPARK_LOCAL_DIRS=str(work / "tmp"))

    # 1. a missing secret stops the run before Spark starts, naming it and where it was looked
    missing = _dslc(work, env, "run", "pipeline.flow", expect=2)
    assert missing.stdout == ""
    assert ("dslc: error: secrets API_KEY, CUSTOMER_TOKEN not set: looked in the environment of this "
            "process (no secrets file: dslc run --secrets FILE)") in missing.stderr
    assert "Traceback" not in missing.stderr and "SparkContext" not in missing.stderr
    half = store / "half.env"
    half.write_text(f"API_KEY={API_KEY}\n")
    missing = _dslc(work, env, "run", "pipeline.flow", "--secrets", str(half), expect=2)
    assert f"secret CUSTOMER_TOKEN not set: looked in the environment of this process and the secrets file {half}" \
        in missing.stderr

    # 2. check, explain in every format, compile
    explained = [(fmt, physical) for fmt in ("text", "json", "dot", "svg") for physical in ((), ("--physical",))]
    outputs = _dslc_batch(work, env, [("check", "pipeline.flow"),
                                      *[("explain", "pipeline.flow", "--format", fmt, *physical)
                                        for fmt, physical in explained],
                                      ("compile", "pipeline.flow", "-o", "job.py")])
    for (fmt, physical), out in zip(explained, outputs[1:]):
        assert out.strip(), (fmt, physical)
        (work / "logs" / f"explain-{fmt}{'-physical' if physical else ''}.{fmt}").write_text(out)
    assert "${CUSTOMER_TOKEN}" in (work / "job.py").read_text()

    # 3. BATCH with a recording and Spark's event log; 4. STREAMING with a checkpoint
    events = work / "events"
    events.mkdir()
    _dslc(work, env, "run", "pipeline.flow", "--secrets", str(secrets_file), "--record", "recorded",
          "--", "--conf", "spark.eventLog.enabled=true", "--conf", f"spark.eventLog.dir={events.as_uri()}")
    flow.write_text(FLOW.format(port=server.port, sink="streaming"))
    _dslc(work, env, "run", "pipeline.flow", "--mode", "streaming", "--trigger", "available-now",
          "--secrets", str(secrets_file))
    flow.write_text(FLOW.format(port=server.port, sink="batch"))
    # 5. dslc test with the secrets in its environment (it needs none: answers are replayed)
    _dslc(work, {**env, "CUSTOMER_TOKEN": TOKEN, "API_KEY": API_KEY}, "test", "pipeline.test.yaml")

    # the values did reach the service: every row was answered or dead-lettered by it
    assert len(server.calls) == 48 and set(server.calls) == {"c0", "c1", "c2", "c3"}
    outputs = [json.loads(line) for sink in ("batch", "streaming")
               for path in (work / "target/out" / sink).glob("part-*") for line in path.read_text().splitlines()]
    assert len(outputs) == 36 and {o["tier"] for o in outputs} == {"gold"}
    letters = [json.loads(line) for path in (work / "target/dlq").glob("part-*") for line in path.read_text().splitlines()]
    assert len(letters) == 12 and all("/k/${API_KEY}/customers/c3" in letter["error"] for letter in letters)
    assert list((work / "recorded").glob("*.yaml")) and list(events.iterdir())
    assert list((work / "target/checkpoint").rglob("*")) and list((work / "target/metrics").glob("*.json"))

    searched, found = 0, []
    for path in sorted(p for p in work.rglob("*") if p.is_file()):
        data = path.read_bytes()
        searched += 1
        for secret in (TOKEN, API_KEY):
            if any(form in data for form in _forms(secret)):
                found.append((str(path.relative_to(work)), secret[:3] + "..."))
    assert searched > 50 and found == []
