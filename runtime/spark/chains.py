"""Run an operator chain over a DataFrame with mapInArrow, and split off its dead letters."""
from __future__ import annotations

import atexit
import dataclasses
import shutil
import tempfile
from typing import Mapping

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from dslc.runtime import config as C
from dslc.runtime import run_env
from dslc.runtime.broadcast.state import Snapshot
from dslc.runtime.core import refusals
from dslc.runtime.core.arrow_chain import ChainFunction
from dslc.runtime.schema import provenance
from dslc.runtime.secrets import Secrets

from . import answers, driver_values, estimate, expectations, names, outcome, provider_batches, stored_join
from .metrics import MetricsCollector
from .pinned import PinnedStates
from .session import checkpoint, is_connect, parallelism, worker_function


def _columns(schema: StructType) -> tuple[C.Column, ...]:
    return tuple(C.Column(f.name, f.dataType.simpleString()) for f in schema.fields)


def _output_schema(input_schema: StructType, operators: tuple[C.Enrich | C.Process, ...]) -> StructType:
    """Input columns flow through ENRICH (RETURNS appended); PROCESS emits RETURNS only."""
    fields = list(input_schema.fields)
    for op in operators:
        if isinstance(op, C.Expect):      # judges the rows, changes no column
            continue
        added = provenance.added(op) if isinstance(op, C.Enrich) else op.returns   # RETURNS, PROVENANCE
        returned = StructType.fromDDL(", ".join(f"{names.quoted(c.name)} {c.type}" for c in added))
        fields = (fields + list(returned.fields)) if isinstance(op, C.Enrich) else list(returned.fields)
    return StructType(fields)


def _share_limits(operators: tuple, tasks: int) -> tuple:
    """What holds for the whole job, shared by the tasks that run at once: RATE (each task gets
    its share; with an answer store, the store holds one RATE for all of them instead:
    limits/job_rate.py), and the calls judged before refused credentials stop the run
    (core/refusals.py)."""
    out = []
    for op in operators:
        if isinstance(op, C.Enrich):
            if op.rate and op.store is None:
                op = dataclasses.replace(op, rate=dataclasses.replace(op.rate, share=1.0 / max(1, tasks)))
            op = dataclasses.replace(op, judged_calls=refusals.share_of(tasks))
        out.append(op)
    return tuple(out)


def run_chain(df: DataFrame, *, name: str, operators: tuple[C.Enrich | C.Process, ...],
              columns: tuple[str, ...] | None = None, watermark: C.Watermark | None = None,
              states: Mapping[str, Snapshot] | PinnedStates | None = None, metrics: MetricsCollector | None = None,
              batch_size: int = 1024, secrets: Secrets | None = None) -> DataFrame:
    """One mapInArrow pass of the chain; the result carries the dead-letter column if any.
    `secrets`: the values the job read at start (`driver_values.required_secrets`), carried to
    the executors inside the operators' configuration."""
    df, operators = _prepared(df, name, operators, columns, secrets)
    operators = answers.prepare(operators, df.sparkSession.conf.get(run_env.FLOW_FOLDER_CONF.name, None) or ".",
                                streaming=df.isStreaming)
    if provider_batches.wanted(df, operators):     # TIER BATCH: the provider's batches answer first
        df = provider_batches.before_pass(df, operators[0], metrics, keep)
    return _run_joining(df, name, operators, watermark, states, metrics, batch_size)


def estimate_chain(df: DataFrame, *, name: str, operators: tuple[C.Enrich | C.Process, ...],
                   chain_inputs: list, columns: tuple[str, ...] | None = None,
                   watermark: C.Watermark | None = None, states=None, metrics: MetricsCollector | None = None,
                   secrets: Secrets | None = None) -> DataFrame:
    """`run_chain` in `dslc explain --estimate`'s job (codegen's estimate target): calls nothing,
    appends each ENRICH and the rows reaching it to `chain_inputs` and hands on the rows with the
    RETURNS columns NULL. `watermark`, `states` and `metrics` are run_chain's, unused: nothing runs."""
    df, operators = _prepared(df, name, operators, columns, secrets)
    return estimate.record_chain(df, answers.prepare(
        operators, df.sparkSession.conf.get(run_env.FLOW_FOLDER_CONF.name, None) or ".", streaming=False),
        chain_inputs)


def _prepared(df: DataFrame, name: str, operators: tuple, columns: tuple[str, ...] | None,
              secrets: Secrets | None) -> tuple[DataFrame, tuple]:
    """The chain's input columns, its EXPECTs declared, the secrets attached, limits shared."""
    if columns is not None:
        df = df.select(*[names.col(c) for c in columns])
    for op in operators:
        if isinstance(op, C.Expect):
            expectations.declare(op, name)
    operators = driver_values.attach(operators, secrets)
    return df, _share_limits(operators, parallelism(df.sparkSession))


def _run_joining(df: DataFrame, name: str, operators: tuple, watermark: C.Watermark | None, states, metrics,
                 batch_size: int) -> DataFrame:
    """The chain's passes: one, or, on a warm rerun, an ENRICH whose stored answers Spark joins to
    its rows (stored_join.py) in a pass of its own, with the operators before and after it in
    theirs."""
    joining = watermark is None and stored_join.enabled(df.sparkSession)
    found = stored_join.find(df.schema, operators, _output_schema) if joining else None
    if found is None:
        return _run(df, name, operators, watermark, states, metrics, batch_size)
    position, stored, columns = found
    before, op, after = operators[:position], operators[position], operators[position + 1:]
    if any(_dead_letters(o) for o in before) or (after and _dead_letters(op)):
        # the dead-letter column would reach a later pass as a column of its rows: one pass
        return _run(df, name, operators, watermark, states, metrics, batch_size)
    if before:
        df = _run(df, name, before, None, states, metrics, batch_size)
    returns = StructType.fromDDL(", ".join(f"{names.quoted(c.name)} {c.type}" for c in op.returns))
    joined, spec = stored_join.join(df, op, stored, columns, returns)
    out = _run(joined, name, (op,), None, states, metrics, batch_size, spec, df.schema)
    return _run_joining(out, name, after, None, states, metrics, batch_size) if after else out


def _dead_letters(op) -> bool:
    return isinstance(op, C.Enrich) and op.dead_letters or isinstance(op, C.Expect) and op.quarantines


def _run(df: DataFrame, name: str, operators: tuple, watermark: C.Watermark | None, states, metrics,
         batch_size: int, joined: C.JoinedAnswers | None = None, schema: StructType | None = None) -> DataFrame:
    """One mapInArrow pass of prepared operators (`joined`: over rows joined to stored answers,
    whose operators' input schema is `schema`)."""
    out_schema = _output_schema(schema or df.schema, operators)
    chain = C.Chain(name=name, operators=operators, input_columns=_columns(df.schema),
                    output_columns=_columns(out_schema), watermark=watermark, batch_size=batch_size,
                    joined=joined)
    outcome.operators(operators)
    if chain.dead_letters:
        out_schema = StructType(out_schema.fields + [StructField(C.DEAD_LETTER_COLUMN, StringType(), True)])
    if metrics is not None and (metrics.on_connect or (df.isStreaming and metrics.per_micro_batch)):
        # Spark Connect: no accumulator; STREAMING: each micro-batch's figures are observed
        out = metrics.chain_with_metrics(df, chain, states or {}, out_schema)
        return answers.stop_when_spent(out, chain, metrics, keep)
    sink = metrics.sink() if metrics else None
    address = metrics.progress_address if metrics else None
    function = _PinnedChain(chain, states, sink, address) if isinstance(states, PinnedStates) else \
        ChainFunction(chain, states or {}, sink, progress=address)
    out = df.mapInArrow(worker_function(df, function), out_schema)
    return answers.stop_when_spent(out, chain, metrics, keep)


class _PinnedChain:
    """A chain in a streaming query: its broadcast snapshots are the ones pinned for the task's
    micro-batch (pinned.py), looked up when the task starts."""

    def __init__(self, chain: C.Chain, pinned: PinnedStates, metrics_sink, progress: str | None = None) -> None:
        self.chain, self.pinned, self.metrics_sink, self.progress = chain, pinned, metrics_sink, progress

    def __call__(self, batches):
        return ChainFunction(self.chain, self.pinned.snapshots(), self.metrics_sink, progress=self.progress)(batches)


def keep(df: DataFrame) -> DataFrame:
    """Compute `df` now and read it back from Spark's reliable checkpoint folder, so that every
    later reader (several sinks, dead letters beside rows) sees these rows without calling the
    services again. Unlike persist(), nothing is evicted and recomputed silently.

    The folder is `spark.checkpoint.dir` when set (use a shared file system on a cluster), else a
    temporary folder of this machine removed when the job ends."""
    if getattr(df, "_dslc_kept", False):   # computed once already (a BUDGET's check, Spark Connect's metrics)
        return df
    if is_connect(df.sparkSession):   # no SparkContext
        return checkpoint(df)
    context = df.sparkSession.sparkContext
    if context.getCheckpointDir() is None:
        folder = tempfile.mkdtemp(prefix="dslc-kept-")
        atexit.register(shutil.rmtree, folder, True)
        context.setCheckpointDir(folder)
    return df.checkpoint(eager=True)


def split_dead_letters(df: DataFrame, paths: Mapping[str, str]) -> DataFrame:
    """Write each operator's dead letters as JSON lines to its path; return the other rows.

    The compiler keeps the chain's output first (`keep`) when it is read more than once, so its
    external calls run once for the letters and the rows.
    """
    if C.DEAD_LETTER_COLUMN not in df.columns:
        return df
    for operator, path in sorted(paths.items()):
        outcome.dead_letters(path, (operator,))
        dead_letters_of(df, operator).write.mode("append").text(path)
    return without_dead_letters(df)


def dead_letters_of(df: DataFrame, operator: str) -> DataFrame:
    """One `value` column: the JSON dead letters that `operator` produced in a chain's output."""
    letter = F.col(C.DEAD_LETTER_COLUMN)
    mine = df.where(letter.isNotNull() & (F.get_json_object(letter, "$.operator") == F.lit(operator)))
    return mine.select(letter.alias("value"))


def without_dead_letters(df: DataFrame) -> DataFrame:
    """The rows of a chain's output that are not dead letters, without the dead-letter column."""
    return df.where(F.col(C.DEAD_LETTER_COLUMN).isNull()).drop(C.DEAD_LETTER_COLUMN)
