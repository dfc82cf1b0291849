"""One table of exit codes for a run, in BATCH and in STREAMING (#41, item 4; runtime/exit_codes.py):
0 done, 1 failed, 2 the pipeline or its configuration is wrong, 3 a BUDGET spent, 5 dead letters
over the ceiling, 130 interrupted (4, an EXPECT that fails, is reserved). Each run also ends with
its outcome saying the code. The job's main() is run in this process as spark-submit runs it
(`failure.run_main`, under `dslc run`'s log setting), so SystemExit's code is the process's exit
status; two runs go through `dslc run` itself."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from aiohttp import web
from cluster_support import free_port
from jobs import run_flow

from dslc.runtime import exit_codes
from dslc.runtime.spark import failure

pytestmark = pytest.mark.spark

MODES = {"BATCH": "MODE BATCH", "STREAMING": "MODE STREAMING CHECKPOINT 'chk' TRIGGER AVAILABLE NOW"}
FLOW = """PIPELINE codes {pipeline};
SOURCE items FROM JSON 'in/' SCHEMA (id STRING, qty INT);
STREAM priced = ENRICH items WITH HTTP GET 'http://127.0.0.1:{port}/{path}/{{id}}' RETURNS (v INT)
  ASYNC UNORDERED CAPACITY 4 TIMEOUT 5s {options}
  ON ERROR DEAD LETTER 'dlq';
SINK priced TO JSON 'out/priced';
"""


@pytest.fixture
def service(serve_app):
    """/ok answers {"v": 1}, /refuse 401, /float {"v": 2.5} (an INT is declared); counts calls."""
    calls: list[str] = []

    async def answer(request):
        calls.append(request.match_info["id"])
        kind = request.match_info["kind"]
        if kind == "refuse":
            return web.Response(status=401, text="bad token")
        return web.json_response({"v": 2.5 if kind == "float" else 1})

    app = web.Application()
    app.router.add_get("/{kind}/{id}", answer)
    server = serve_app(app)
    server.calls = calls
    return server


def _flow(folder: Path, mode: str, port: int, path: str = "ok", options: str = "", rows: int = 6) -> Path:
    (folder / "in").mkdir(parents=True, exist_ok=True)
    (folder / "in/1.json").write_text("".join(json.dumps({"id": f"i{i}", "qty": i}) + "\n" for i in range(rows)))
    flow = folder / "pipeline.flow"
    flow.write_text(FLOW.format(pipeline=MODES[mode], port=port, path=path, options=options))
    return flow


def _code(flow: Path, monkeypatch, capfd) -> tuple[int, str]:
    """Run the job as `dslc run` does (its log set): its exit status and its stderr."""
    log = flow.parent / "run.log"
    log.touch()
    monkeypatch.setenv(failure.LOG_ENV, str(log))
    capfd.readouterr()
    try:
        run_flow(flow)
        code = 0
    except SystemExit as stop:
        code = stop.code
    err = capfd.readouterr().err
    assert f"ended with exit code {code} ({exit_codes.meaning(code)})" in err, err[-3000:]
    return code, err


@pytest.mark.parametrize("mode", list(MODES))
def test_done_is_0(tmp_path, service, monkeypatch, capfd, mode):
    code, err = _code(_flow(tmp_path, mode, service.port), monkeypatch, capfd)
    assert code == 0 and len(service.calls) == 6


@pytest.mark.parametrize("mode", list(MODES))
def test_a_service_that_never_answers_is_1(tmp_path, monkeypatch, capfd, mode):
    code, err = _code(_flow(tmp_path, mode, free_port()), monkeypatch, capfd)
    assert code == 1 and "the service never answered" in err


@pytest.mark.parametrize("mode", list(MODES))
def test_refused_credentials_are_2(tmp_path, service, monkeypatch, capfd, mode):
    code, err = _code(_flow(tmp_path, mode, service.port, path="refuse"), monkeypatch, capfd)
    assert code == 2 and "the service refused the credentials" in err and len(service.calls) <= 10


@pytest.mark.parametrize("mode", list(MODES))
def test_a_spent_budget_is_3_with_the_metrics(tmp_path, service, monkeypatch, capfd, mode):
    code, err = _code(_flow(tmp_path, mode, service.port, options="STORE BUDGET 2 CALLS", rows=8), monkeypatch, capfd)
    assert code == 3 and "BUDGET 2 CALLS of 'priced' (line 3) is spent" in err
    assert "dslc: per-operator metrics" in err           # what ran before the stop, in STREAMING too


@pytest.mark.parametrize("mode", list(MODES))
def test_dead_letters_over_the_ceiling_are_5_after_writing_everything(tmp_path, service, monkeypatch, capfd, mode):
    code, err = _code(_flow(tmp_path, mode, service.port, path="float"), monkeypatch, capfd)
    assert code == 5 and "6 of 6 elements (100%) were dead-lettered to dlq, above its ceiling (UP TO 50%, the default)" in err
    letters = [line for p in (tmp_path / "dlq").glob("part-*") for line in p.read_text().splitlines()]
    assert len(letters) == 6 and len(service.calls) == 6        # written, and each row paid once


@pytest.mark.parametrize("mode", list(MODES))
def test_up_to_100_percent_allows_every_row_to_be_a_dead_letter(tmp_path, service, monkeypatch, capfd, mode):
    flow = _flow(tmp_path, mode, service.port, path="float")
    flow.write_text(flow.read_text().replace("DEAD LETTER 'dlq'", "DEAD LETTER 'dlq' UP TO 100%"))
    code, _ = _code(flow, monkeypatch, capfd)
    assert code == 0


def test_a_continuous_stream_stops_at_the_micro_batch_over_the_ceiling(tmp_path, service, monkeypatch, capfd):
    """Under TRIGGER EVERY the queries stop once the dead letters are over the ceiling: exit 5."""
    flow = _flow(tmp_path, "STREAMING", service.port, path="float")
    flow.write_text(flow.read_text().replace("TRIGGER AVAILABLE NOW", "TRIGGER EVERY 1s"))
    code, err = _code(flow, monkeypatch, capfd)
    assert code == 5 and "above its ceiling" in err


def _dslc_run(flow: Path, *args: str, **popen) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k not in ("DSLC_FLOW_FOLDER", failure.LOG_ENV)}
    return subprocess.Popen([sys.executable, "-m", "dslc.compiler.cli", "run", "pipeline.flow", "--master", "local[2]",
                             *args], cwd=flow.parent, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, **popen)


def test_dslc_run_exits_5_in_batch_and_2_for_a_pipeline_it_cannot_compile(tmp_path, service):
    flow = _flow(tmp_path, "BATCH", service.port, path="float")
    process = _dslc_run(flow)
    out, _ = process.communicate(timeout=600)
    assert process.returncode == 5, out[-3000:]
    assert "dslc: the run ended with exit status 5 (dead letters over the ceiling)" in out
    flow.write_text(flow.read_text().replace("RETURNS (v INT)", "RETURNS (v NOT_A_TYPE)"))
    process = _dslc_run(flow)
    out, _ = process.communicate(timeout=120)
    assert process.returncode == 2 and "error[E0306]" in out


@pytest.mark.slow
def test_dslc_run_exits_130_when_a_stream_is_interrupted(tmp_path, service):
    flow = _flow(tmp_path, "STREAMING", service.port)
    flow.write_text(flow.read_text().replace("TRIGGER AVAILABLE NOW", "TRIGGER EVERY 1s"))
    process = _dslc_run(flow, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while len(service.calls) < 6:                  # the first micro-batch ran: the stream is on
            assert process.poll() is None and time.monotonic() < deadline, process.stdout.read()
            time.sleep(0.2)
        os.killpg(process.pid, signal.SIGINT)          # what Ctrl-C in a terminal does: the whole group
        process.wait(120)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    assert process.returncode == 130
