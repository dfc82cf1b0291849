"""A warm rerun's answers found before the operator: the rows of an ENRICH ... STORE joined to
its stored answers.

Asking the store row by row costs Python work per row (its request key, a lookup, a decoded
answer), which is most of a warm rerun. So before a chain runs, the driver reads the answers
the store holds for its ENRICH that can be joined (wrappers/joinable.py: their request columns
and RETURNS columns as JSON, for the same request variant, younger than TTL). On a local master
it writes them, typed by Arrow, to one Arrow file that the chain's Python pass looks each row up
in (core/stored_answers.py: cheaper than Spark's join, bench section 13); elsewhere (a cluster,
Spark Connect) the rows are joined to them in the JVM (broadcast when small). In the chain's
Python pass a row that found its answer leaves at once, Arrow to Arrow, counted as a store hit;
the others go through the operator as before, which asks the store for them too (an answer
written since the job started, or one that cannot be joined). A store with nothing to join
changes nothing: a cold run's plan is the plain one.

The rows are those the operator would have made (only answers that round-trip exactly are
joined), in both modes: a streaming query joins each micro-batch to the answers read when the
query started. ORDERED: a joined row leaves at once only in a batch of joined rows with nothing
in flight ahead of it. Not joined: KEY ORDER, a chain with a watermark, a call that does not say
which columns its request reads (PYTHON, POST without BODY), columns of other types.

PROVENANCE: each answer also carries its row's struct, made on the driver from the note it was
stored with (stored_provenance.py), so a joined row says `store` with its original time and model
as the operator would (SQLite and Redis give the notes; a store that cannot joins nothing for it).
"""
from __future__ import annotations

import asyncio
import atexit
import contextlib
import gc
import io
import os
import shutil
import tempfile
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.json as pa_json
import pyarrow.parquet as pq
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import BooleanType, StructField, StructType

from dslc.runtime import config as C
from dslc.runtime import run_env
from dslc.runtime.calls.factory import KINDS
from dslc.runtime.core.stored_answers import KEY_PREFIX
from dslc.runtime.schema.provenance import struct_type
from dslc.runtime.store.open_stores import make_store
from dslc.runtime.wrappers.joinable import sound, variant_of

from . import names
from .session import is_connect
from .stored_provenance import Noted

FLAG = "__dslc_stored"
CONF = run_env.STORE_JOIN_CONF.name
BROADCAST_ROWS = 2_000_000      # answers joined by a broadcast up to this many; a shuffle join above
LOOKUP_ROWS = 1_000_000         # answers looked up in the chain's pass up to this many (each worker holds them)
_KEY_TYPES = {"string", "boolean", "tinyint", "smallint", "int", "bigint"}


def enabled(spark) -> bool:
    """`SET spark.dslc.store.join = false` turns the join off (every row asks the store, as
    before it: for comparing the two, or if the join ever misbehaves)."""
    return _setting(spark) != "false"


def _setting(spark) -> str:
    """true (the default: looked up in the chain's pass on a local master, Spark's join
    elsewhere), spark (Spark's join everywhere) or false (no join)."""
    return str(spark.conf.get(CONF, run_env.STORE_JOIN_CONF.default)).strip().lower()


def _variant(op: C.Enrich, schema: StructType) -> tuple[str, tuple[str, ...]] | None:
    """The op's request variant and request columns when its rows can be joined to its answers."""
    if op.store is None or op.order_by or type(op.call) not in KINDS or isinstance(op.call, C.PythonCall):
        return None
    try:
        call = KINDS[type(op.call)](op)
    except Exception:  # noqa: BLE001 - a call that cannot be built here is built (and fails) on the executors
        return None
    columns = call.request_columns()
    types = {f.name: f.dataType.simpleString() for f in schema.fields}
    if not columns or any(types.get(c) not in _KEY_TYPES for c in columns):
        return None
    variant = variant_of(call)
    return (variant, columns) if variant is not None else None


def _answers(op: C.Enrich, variant: str) -> list[tuple]:
    """(args, output) of the answers to join; with PROVENANCE (args, output, the struct's values)."""
    async def read() -> list[tuple] | None:
        store = make_store(op.store.location)
        try:
            await store.open()
            if op.provenance is None:
                return await store.joinable(op.name, variant, op.store.ttl_s)
            return await store.joinable_noted(op.name, variant, op.store.ttl_s)
        finally:
            await store.close()

    with _no_collection():
        answers = asyncio.run(read())
        if answers is None:      # no notes to stamp the rows with: the operator looks each one up
            return []
        return Noted(op).entries(answers) if op.provenance is not None else answers


@contextlib.contextmanager
def _no_collection():
    """The driver's bulk work on the answers (a tuple or two per answer, none in a cycle) without
    the garbage collector: every few thousand of them started a collection that walked all the
    answers already read, half the time of reading 250,000 answers with PROVENANCE (1.46 s -> 0.60 s)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def find(schema: StructType, operators: Sequence[C.Enrich | C.Process],
         output_schema) -> tuple[int, list[tuple], tuple[str, ...]] | None:
    """The first ENRICH of the chain with answers to join: (its position, the answers, its request columns)."""
    for position, op in enumerate(operators):
        if isinstance(op, C.Enrich) and op.store is not None:
            here = output_schema(schema, tuple(operators[:position]))
            found = _variant(op, here)
            if found is not None:
                answers = _answers(op, found[0])
                if answers:
                    return position, answers, found[1]
    return None


def _dataframe(spark, table: pa.Table) -> DataFrame:
    """The answers as a DataFrame: on a local master through a Parquet file the driver writes and
    Spark reads (about twice as fast as sending the rows to the JVM), else `createDataFrame`
    (executors on other machines could not read the driver's file)."""
    if not _local(spark):
        return spark.createDataFrame(table)
    folder = _answers_folder()
    pq.write_table(table, os.path.join(folder, "answers.parquet"))
    return spark.read.parquet(folder)


def _local(spark) -> bool:
    """True on a local master: every Python worker and executor runs on the driver's machine and
    can read a file the driver writes."""
    return not is_connect(spark) and spark.sparkContext.master.startswith("local")


def _answers_folder() -> str:
    """A folder of this machine for the answers the driver writes, removed when the job ends."""
    folder = tempfile.mkdtemp(prefix="dslc-answers-")
    atexit.register(shutil.rmtree, folder, True)
    return folder


def _parsed(texts: Sequence[str], schema: StructType) -> pa.Table:
    """JSON objects as a table of `schema`'s typed columns, parsed by Arrow on the driver (a
    fraction of what Spark's from_json costs over the same answers on the executors)."""
    data = "\n".join(texts).encode("utf-8")
    options = pa_json.ParseOptions(explicit_schema=to_arrow_schema(schema), unexpected_field_behavior="ignore")
    return pa_json.read_json(io.BytesIO(data), parse_options=options).select(schema.fieldNames())


def _both(answers: list[tuple], args: StructType, returns: StructType) -> tuple[list[tuple], pa.Table, pa.Table]:
    """The answers Arrow parses (args and outputs as tables). When Arrow cannot, the entries that
    are not what joinable.py writes for today's RETURNS (cut, edited) are left out (their rows
    go through the operator) and the rest parsed again; raises what Arrow raises if it still
    cannot (a value it cannot read exactly as its type: Spark's from_json reads those)."""
    try:
        return answers, _parsed([a[0] for a in answers], args), _parsed([a[1] for a in answers], returns)
    except _ARROW_REFUSALS:
        kept = sound(answers, tuple((f.name, f.dataType.simpleString().upper()) for f in returns.fields))
        if len(kept) == len(answers):
            raise
    return kept, _parsed([a[0] for a in kept], args), _parsed([a[1] for a in kept], returns)


_ARROW_REFUSALS = (pa.ArrowInvalid, pa.ArrowNotImplementedError, TypeError)


def _stored(spark, answers: list[tuple], args: StructType, returns: StructType, keys: list[str],
            op: C.Enrich | None = None) -> DataFrame:
    """The answers as rows of typed columns: the request columns as `keys`, the RETURNS columns,
    the PROVENANCE struct if any, and FLAG. Arrow parses them on the driver; a value it cannot read exactly as its column's
    type (which joinable.py does not write) leaves the parsing to Spark's from_json, of the
    entries that are sound (`joinable.sound`): never a damaged one."""
    try:
        answers, arguments, outputs = _both(answers, args, returns)
    except _ARROW_REFUSALS:
        answers = sound(answers, tuple((f.name, f.dataType.simpleString().upper()) for f in returns.fields))
        table = pa.table({"args": pa.array([a[0] for a in answers], pa.string()),
                          "output": pa.array([a[1] for a in answers], pa.string()), **_noted(op, answers)})
        stored = _dataframe(spark, table)
        kept = [F.col(_NOTED)] if op is not None and op.provenance is not None else []
        return stored.select(F.from_json("args", args).alias("a"), F.from_json("output", returns).alias("o"),
                             *kept).select(
            *[F.col("a").getField(c).alias(k) for c, k in zip(args.fieldNames(), keys)],
            *[F.col("o").getField(f.name).alias(f.name) for f in returns.fields],
            *_typed_noted(op), F.lit(True).alias(FLAG))
    # plain column names in the file (a RETURNS name may hold any character), Spark's afterwards
    values = [f"__dslc_v{i}" for i in range(len(returns.fields))]
    columns = {k: arguments.column(c) for c, k in zip(args.fieldNames(), keys)}
    columns.update({v: outputs.column(f.name) for v, f in zip(values, returns.fields)})
    stored = _dataframe(spark, pa.table({**columns, **_noted(op, answers)}))
    # Parquet may bring a narrow integer back wider: each column as the join and the rows expect it
    typed = [*[F.col(k).cast(f.dataType).alias(k) for k, f in zip(keys, args.fields)],
             *[F.col(v).cast(f.dataType).alias(f.name) for v, f in zip(values, returns.fields)]]
    return stored.select(*typed, *_typed_noted(op), F.lit(True).cast(BooleanType()).alias(FLAG))


_NOTED = "__dslc_provenance"     # the PROVENANCE struct's column in the answers' file


def _noted(op: C.Enrich | None, answers: list[tuple]) -> dict[str, pa.Array]:
    """The PROVENANCE struct of `answers` (args, output, its values) as a column, if the op has one."""
    return {} if op is None or op.provenance is None else {_NOTED: Noted(op).array(answers)}


def _typed_noted(op: C.Enrich | None) -> list:
    """The PROVENANCE column of the answers' file as the chain's output types it, named as the op names it."""
    if op is None or op.provenance is None:
        return []
    typed = StructType.fromDDL(f"{names.quoted(op.provenance)} {struct_type(op.call)}").fields[0].dataType
    return [F.col(_NOTED).cast(typed).alias(op.provenance)]


def join(df: DataFrame, op: C.Enrich, answers: list[tuple], columns: tuple[str, ...],
         returns: StructType) -> tuple[DataFrame, C.JoinedAnswers]:
    """The rows to run the ENRICH's pass over and how that pass finds their stored answers: on a
    local master, in an Arrow file the driver writes (`df` as it is; core/stored_answers.py),
    else `df` with the RETURNS columns and FLAG of the rows that have a stored answer (NULL for
    the others), joined by Spark on the request `columns`."""
    args = StructType([StructField(c, df.schema[c].dataType, True) for c in columns])
    ordered = op.mode is C.Mode.ORDERED
    if _workers_here(df.sparkSession) and len(answers) <= LOOKUP_ROWS:
        with _no_collection():
            table = _lookup_table(answers, args, returns, op)
        if table is not None:
            return df, C.JoinedAnswers(None, tuple(df.columns), ordered, table=table, keys=columns)
    keys = [f"{KEY_PREFIX}{i}" for i in range(len(columns))]
    with _no_collection():
        stored = _stored(df.sparkSession, answers, args, returns, keys, op)
    if len(answers) <= BROADCAST_ROWS:
        stored = F.broadcast(stored)
    condition = None
    for column, key in zip(columns, keys):
        equal = names.col(column) == F.col(key)
        condition = equal if condition is None else condition & equal
    joined = df.join(stored, condition, "left").drop(*keys)
    return joined, C.JoinedAnswers(FLAG, tuple(df.columns), ordered)


def _workers_here(spark) -> bool:
    """True on a local master (`_local`) unless `SET spark.dslc.store.join = spark` asks for Spark's join."""
    return _local(spark) and _setting(spark) != "spark"


def _lookup_table(answers: list[tuple], args: StructType, returns: StructType, op: C.Enrich) -> str | None:
    """The answers as an Arrow file of the request columns (KEY_PREFIX0, ...), the RETURNS
    columns and the PROVENANCE struct if any, typed as the rows and the chain's output have them; None when Arrow cannot read a
    value as its type (Spark's join and from_json take those)."""
    try:
        kept, arguments, outputs = _both(answers, args, returns)
    except _ARROW_REFUSALS:
        return None
    columns = {f"{KEY_PREFIX}{i}": arguments.column(c) for i, c in enumerate(args.fieldNames())}
    noted = {op.provenance: Noted(op).array(kept)} if op.provenance is not None else {}
    table = pa.table([*columns.values(), *outputs.columns, *noted.values()],
                     names=[*columns, *outputs.column_names, *noted])
    path = os.path.join(_answers_folder(), "answers.arrow")
    with pa.OSFile(path, "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    return path
