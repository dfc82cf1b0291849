"""What a job that writes nothing hands back instead of writing (codegen's `Target(writes=False)`).

The REPL's `:show` and `dslc test` run a pipeline without touching its real outputs: each SINK's
DataFrame and each ENRICH's dead letters stay in memory for the caller to look at, count or
compare, and nothing is written to a sink, a dead-letter folder, a quarantine folder or a
checkpoint.
"""
from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame

from dslc.runtime import config as C

from . import expectations
from .chains import dead_letters_of, without_dead_letters
from .metrics import MetricsCollector


class Captured:
    """The outputs of one run: DataFrames by SINK input, dead letters by ENRICH, the metrics."""

    def __init__(self, metrics: MetricsCollector | None = None) -> None:
        self.metrics = metrics
        if metrics is not None:
            metrics.without_live_progress()     # the caller shows what it wants, when it wants
        self.outputs: dict[str, DataFrame] = {}
        self.dead_letters: dict[str, DataFrame] = {}
        self.quarantined: dict[str, DataFrame] = {}     # QUARANTINE 'path' as written -> its JSON lines
        self._persisted: list[DataFrame] = []
        # the estimate's job (codegen's Target(estimate=True)): (ENRICH, the rows reaching it)
        self.chain_inputs: list[tuple[C.Enrich, DataFrame]] = []

    def output(self, name: str, df: DataFrame) -> None:
        """What a SINK of relation `name` would have written."""
        self.outputs[name] = df

    def keep(self, df: DataFrame) -> DataFrame:
        """`chains.keep` without a checkpoint folder: computed now, kept by the executors (a local
        checkpoint), so later readers see these rows without calling the services again."""
        return df.localCheckpoint(eager=True)

    def hold_dead_letters(self, df: DataFrame, operators: tuple[str, ...]) -> DataFrame:
        """Keep each operator's dead letters (a `value` JSON column) instead of writing them; return
        the other rows. Persisted first, so the calls run once for both sides."""
        if C.DEAD_LETTER_COLUMN not in df.columns:
            return df
        df = df.persist()
        self._persisted.append(df)
        for operator in operators:
            self.dead_letters[operator] = dead_letters_of(df, operator)
        return without_dead_letters(df)

    def hold_quarantine(self, df: DataFrame, expect: C.Expect) -> DataFrame:
        """`expectations.check` without writing: each QUARANTINE path's lines kept, the rows that
        pass returned. Persisted first, so the rows are judged (and counted) once for both sides."""
        judged = expectations.judge(df, expect).persist()
        self._persisted.append(judged)
        for path in sorted({c.path for c in expect.constraints if c.path}):
            self.quarantined[path] = expectations.quarantine_of(judged, expect, path)
        return expectations.passing(judged)

    def hold_quarantine_letters(self, df: DataFrame, paths: tuple[str, ...]) -> None:
        """`expectations.write_letters` without writing: the lines a chain's EXPECTs quarantined, kept."""
        if C.DEAD_LETTER_COLUMN not in df.columns:
            return
        for path in paths:
            self.quarantined[path] = expectations.quarantine_letters(df, path)

    def operator_metrics(self) -> dict[str, dict[str, Any]]:
        """Per operator: calls, retries, dead letters... (see dslc.runtime.metrics.summary)."""
        from dslc.runtime.metrics import summary

        merged = self.metrics.value() if self.metrics else {}
        return {name: summary(m) for name, m in merged.items()}

    def release(self) -> None:
        """Drop what this run cached."""
        for df in self._persisted:
            df.unpersist()
        self._persisted.clear()
