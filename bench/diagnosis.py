"""Induce each of the five diagnoses of an ENRICH (runtime/diagnosis.py) and report what the run's
diagnosis line says: `python -m bench.diagnosis` (tests/runtime/test_diagnosis.py runs the same
cases on the test session).

Each case is a real pipeline against a real local aiohttp service, set up so one thing limits it:

- capacity: a service answering in 100 ms without trouble, CAPACITY 2;
- service:  a service answering every third request with HTTP 503, RETRY 3;
- rate:     a service answering at once, RATE 20 PER SECOND;
- cpu:      a Python function that computes for 20 ms of the process's CPU per row (its 8 calls at
            once share one interpreter, so 500 rows take over a second);
- input:    a PROCESS before the ENRICH handing over a row every 20 ms, a fast service, CAPACITY 50.
"""
from __future__ import annotations

import asyncio
import json
import os
import runpy
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.common import AppInThread

CASES = ("capacity", "service", "rate", "cpu", "input")

_HEAD = """PIPELINE induce_{cause} MODE BATCH;
SOURCE rows FROM JSON 'in/' SCHEMA (id STRING, k STRING);
"""
FLOWS = {
    "capacity": """STREAM enriched = ENRICH rows WITH HTTP GET 'http://127.0.0.1:{port}/slow/{{k}}' RETURNS (v STRING)
  ASYNC UNORDERED CAPACITY 2 TIMEOUT 10s;""",
    "service": """STREAM enriched = ENRICH rows WITH HTTP GET 'http://127.0.0.1:{port}/overloaded/{{k}}' RETURNS (v STRING)
  ASYNC UNORDERED CAPACITY 8 TIMEOUT 10s RETRY 3 BACKOFF 1ms ON ERROR DEAD LETTER 'dlq';""",
    "rate": """STREAM enriched = ENRICH rows WITH HTTP GET 'http://127.0.0.1:{port}/fast/{{k}}' RETURNS (v STRING)
  ASYNC UNORDERED CAPACITY 10 TIMEOUT 30s RATE 20 PER SECOND;""",
    "cpu": """STREAM enriched = ENRICH rows WITH PYTHON 'induce:burn' RETURNS (v STRING)
  ASYNC UNORDERED CAPACITY 8 TIMEOUT 30s;""",
    "input": """STREAM paced = PROCESS rows USING PYTHON 'induce:pace' RETURNS (id STRING, k STRING);
STREAM enriched = ENRICH paced WITH HTTP GET 'http://127.0.0.1:{port}/fast/{{k}}' RETURNS (v STRING)
  ASYNC UNORDERED CAPACITY 50 TIMEOUT 10s;""",
}
# each case runs long enough to be judged by its timing (a second or more of the task's time,
# runtime/diagnosis.MIN_TASK_SECONDS); the service's is judged by its 503s
ROWS = {"capacity": 40, "service": 60, "rate": 40, "cpu": 500, "input": 80}

USER_MODULE = '''"""Python code of the induced cases (bench/diagnosis.py)."""
import time


def burn(row):
    """20 ms of computing per row: the worker's CPU is the limit."""
    end = time.process_time() + 0.02
    n = 0
    while time.process_time() < end:
        n += 1
    return {"v": str(n)}


def pace(row):
    """A row every 20 ms, without using a CPU: the input is the limit."""
    time.sleep(0.02)
    return row
'''


def service_app():
    """The local service: /slow (100 ms), /fast (at once), /overloaded (503 for every third request)."""
    from aiohttp import web

    seen = {"overloaded": 0}

    async def slow(request):
        await asyncio.sleep(0.1)
        return web.json_response({"v": request.match_info["k"]})

    async def fast(request):
        return web.json_response({"v": request.match_info["k"]})

    async def overloaded(request):
        seen["overloaded"] += 1
        if seen["overloaded"] % 3 == 0:
            return web.Response(status=503, text="busy")
        await asyncio.sleep(0.02)
        return web.json_response({"v": request.match_info["k"]})

    app = web.Application()
    app.router.add_get("/slow/{k}", slow)
    app.router.add_get("/fast/{k}", fast)
    app.router.add_get("/overloaded/{k}", overloaded)
    return app


class Service(AppInThread):
    """The service on its own loop in a daemon thread."""

    def __init__(self) -> None:
        super().__init__(service_app())


def write_case(cause: str, folder: Path, port: int, rows: int | None = None) -> Path:
    """The case's input (one file: one task; ROWS[cause] rows unless given), user module and
    pipeline.flow in `folder`."""
    (folder / "in").mkdir(parents=True, exist_ok=True)
    (folder / "in/1.json").write_text("".join(json.dumps({"id": f"r{i}", "k": f"k{i}"}) + "\n"
                                              for i in range(rows or ROWS[cause])))
    (folder / "induce.py").write_text(USER_MODULE)
    flow = folder / "pipeline.flow"
    flow.write_text(_HEAD.format(cause=cause) + FLOWS[cause].format(port=port)
                    + "\nSINK enriched TO JSON 'out' MODE OVERWRITE;\n")
    return flow


def induce(cause: str, folder: Path, port: int) -> dict[str, Any]:
    """Run the case in this process (on the active SparkSession) and return its metrics document."""
    from dslc.compiler.pipeline import compile_file

    flow = write_case(cause, folder, port)
    job = folder / "job.py"
    job.write_text(compile_file(flow, job_folder=str(folder)))
    metrics = folder / "metrics.json"
    saved = {k: os.environ.get(k) for k in ("DSLC_METRICS_FILE", "DSLC_FLOW_FOLDER")}
    os.environ["DSLC_METRICS_FILE"] = str(metrics)
    os.environ.pop("DSLC_FLOW_FOLDER", None)
    try:
        runpy.run_path(str(job), run_name="__main__")
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return json.loads(metrics.read_text())


def main() -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from bench.common import spark_session

    spark_session()
    service = Service()
    wrong = 0
    try:
        with tempfile.TemporaryDirectory(prefix="dslc-induce-") as root:
            for cause in CASES:
                document = induce(cause, Path(root) / cause, service.port)
                line = next(d for d in document["diagnosis"] if d["operator"] == "enriched")
                verdict = "ok" if line["cause"] == cause else "WRONG"
                wrong += verdict != "ok"
                print(f"induced {cause:8s} -> {line['cause']:8s} {verdict}  {line['why']}", flush=True)
    finally:
        service.stop()
    print(f"{len(CASES) - wrong} of {len(CASES)} causes named")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
