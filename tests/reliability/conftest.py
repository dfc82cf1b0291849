"""Fixtures of the reliability tests: a fault-injecting HTTP service per test."""
from __future__ import annotations

from collections.abc import Iterator

import pytest
from reliability_support import FlakyService


@pytest.fixture
def flaky() -> Iterator:
    """flaky(**faults) starts a FlakyService; every one is stopped after the test."""
    services: list[FlakyService] = []

    def start(**kw) -> FlakyService:
        service = FlakyService(**kw).start()
        services.append(service)
        return service

    yield start
    for service in services:
        service.stop()
