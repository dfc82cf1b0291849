"""Fixtures of the conformance suite: a pipeline folder to write and run, and a real counting
HTTP service. The suite walks the contract (shared spec/language.md) statement by statement; each
test quotes the sentence it checks."""
from __future__ import annotations

import pytest

from contract.support import PipelineFolder, Service


@pytest.fixture
def flow(spark, tmp_path) -> PipelineFolder:
    """A folder for one pipeline: its data, its user modules, its run and its output."""
    return PipelineFolder(spark, tmp_path)


@pytest.fixture
def service(serve_app) -> Service:
    """A real aiohttp service on 127.0.0.1 that counts every call per key."""
    svc = Service()
    svc.server = serve_app(svc.app())
    return svc


@pytest.fixture(params=["BATCH", "STREAMING"])
def mode(request) -> str:
    """Both modes where the contract promises one meaning in both."""
    return request.param
