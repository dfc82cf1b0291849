"""Spark's analyzer in the language server, when the user asks for it (`dslc lsp --spark`, the
initialization option `{"spark": true}`, or the setting `dslc.spark`).

The fast check stays what the editor waits for: its diagnostics are published as before, from
the checking thread. Then, on a thread of its own, this runs the version's plan through Spark's
analyzer exactly as `dslc check --spark` does (compiler/plan/dry_run.py, on a JVM started once,
in the background, the first time it is wanted) and the server publishes the fast diagnostics
plus Spark's for that version. A version that is no longer the newest is skipped, or abandoned
at its next statement, and its result is dropped: Spark's diagnostics never land on newer text.
A version with syntax errors gets none (as `dslc check --spark` stops at them).
The JVM's own output goes to a log file (interactive/spark_runner.SparkRunner), never to stdout (the protocol).
"""
from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

from dslc.compiler.interactive.spark_runner import SparkRunner
from dslc.compiler.lsp.analysis import Analysis
from dslc.compiler.plan.dry_run import SparkAnalysis, analyze_with_spark

#: Where the editor shows a diagnostic came from (the fast check's say "dslc").
SOURCE = "dslc (Spark's analyzer)"
#: The JVM's settings: one core is plenty to analyze queries over empty tables.
CONF = {"spark.master": "local[1]", "spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "1"}
log = logging.getLogger("dslc.lsp")


class SparkUnavailable(Exception):
    """The JVM did not start (or died); the message says why."""


class SparkChecker:
    """One JVM for the server's lifetime and one thread that talks to it."""

    def __init__(self, enabled: bool = False) -> None:
        self.enabled = enabled
        self.runner = SparkRunner(progress=False)
        self.thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dslc-spark")
        self._starting = False

    def enable(self, on: bool = True) -> None:
        """Turn the check on (starting the JVM in the background now) or off."""
        self.enabled = on
        if on:
            self.runner.forget_failure()
            self.start()

    def start(self) -> None:
        """Start the JVM on the Spark thread, once; the fast check's thread never waits for it."""
        if self.enabled and not self._starting:
            self._starting = True
            self.thread.submit(self._start)

    def _start(self) -> None:
        try:
            self.runner.session(CONF)
        except Exception:   # noqa: BLE001 - kept by the runner; said when a document is analyzed
            log.warning("Spark did not start:\n%s", self.runner.start_error)

    async def analyze(self, analysis: Analysis, current: Callable[[], bool]) -> SparkAnalysis | None:
        """Spark's analysis of a checked version, or None when it was overtaken (`current()` turned
        False) or has nothing to analyze (a syntax error). Raises SparkUnavailable."""
        if analysis.failure or analysis.too_large or analysis._plan is None:
            return None
        return await asyncio.get_running_loop().run_in_executor(self.thread, _analyze, self.runner, analysis, current)


def _analyze(runner: SparkRunner, analysis: Analysis, current: Callable[[], bool]) -> SparkAnalysis | None:
    if not current():
        return None
    try:
        spark = runner.session(CONF)
    except Exception as exc:       # noqa: BLE001 - no JVM: the fast check goes on alone
        lines = str(exc).strip().splitlines()
        raise SparkUnavailable(lines[0] if lines else type(exc).__name__) from exc
    found = analyze_with_spark(analysis._plan, analysis.source, spark, reported=analysis.diagnostics,
                               current=current)
    return found if current() else None
