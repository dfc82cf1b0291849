"""Fixtures of the database tests: a pipeline compiled and run in this process on the test run's
SparkSession, against the run's private PostgreSQL (tests/conftest.py: `postgres`)."""
from __future__ import annotations

import os
import runpy
from collections.abc import Callable
from pathlib import Path

import pytest

from dslc.compiler.pipeline import compile_file


@pytest.fixture
def run_flow() -> Callable[..., Path]:
    """run_flow(flow) compiles `flow` beside itself and runs the job's main(); returns the job file."""
    def run(flow: Path, **options) -> Path:
        job = flow.with_name("job.py")
        job.write_text(compile_file(flow, job_folder=str(flow.parent), **options))
        os.environ.pop("DSLC_FLOW_FOLDER", None)
        runpy.run_path(str(job), run_name="__main__")
        return job

    return run


@pytest.fixture
def crm(postgres, monkeypatch):
    """The run's PostgreSQL with its password as the secret ${CRM_PASSWORD}; `url` is what a
    DATABASE statement names it by."""
    monkeypatch.setenv("CRM_PASSWORD", postgres.password)
    postgres.flow_url = f"postgresql://{postgres.user}:${{CRM_PASSWORD}}@127.0.0.1:{postgres.port}/{postgres.database}"
    return postgres
