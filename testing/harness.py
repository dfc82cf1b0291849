"""Run one test case on local Spark, in this process, without touching the pipeline's own folders.

The pipeline's checked plan is rewritten (`sandbox`), not the compiler: every SOURCE reads the
case's rows from a Parquet folder written here, every SINK writes Parquet, and dead letters and
the checkpoint go to the case's temporary folder. ENRICH calls are answered by the replay
wrapper of `dslc.runtime.wrappers.recording` (switched on for this job only, through a Spark local
property), from the case's answers and/or a recording. CACHE is left out: answers are fixed
per key, so it could only carry one case's answers into the next one on a reused worker.
STREAMING pipelines run with TRIGGER AVAILABLE NOW.
"""
from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import functools
import json
import os
import re
import runpy
import shutil
import time
from pathlib import Path
from typing import Any, Iterator

from dslc.compiler.diagnostics import CompileError
from dslc.compiler.plan import logical as plan
from dslc.runtime import run_env, secrets
from dslc.runtime.wrappers import recording

from . import expectations, sink_files, values
from .case_file import Case, CaseFileError
from .diff import RowDiff, diff_rows

DEAD_LETTER_COLUMNS = ("operator", "line", "kind", "error", "attempts", "key", "row", "answer")


@dataclasses.dataclass
class CaseResult:
    """The outcome of one case: passed, or the diffs / the error that made it fail."""

    name: str
    passed: bool
    diffs: list[RowDiff] = dataclasses.field(default_factory=list)
    error: str | None = None
    seconds: float = 0.0
    outputs: dict[str, list[dict[str, Any]]] = dataclasses.field(default_factory=dict)

    def report(self) -> str:
        """What went wrong, as `dslc test` prints it (empty when the case passed)."""
        if self.error:
            return self.error
        return "\n".join(line for d in self.diffs if not d.ok for line in d.render())

    def rows(self, output: str) -> list[dict[str, Any]]:
        """The rows a sink (by stream name), a dead-letter output (`dead_letters:<operator>`), an
        EXPECT's quarantine (`quarantine:<stream>`) or its counts (`constraints:<stream>`: one row
        per constraint, with passed and failed) got."""
        return self.outputs[output]


def _lookup(names: dict[str, Any], name: str, what: str) -> Any:
    for known, value in names.items():
        if known.lower() == name.lower():
            return value
    listed = ", ".join(sorted(names)) or "none"
    raise CaseFileError(f"unknown {what} {name!r} (the pipeline has: {listed})")


def _spark_type(type_text: str):
    if type_text in ("?", ""):
        return None
    try:
        return _struct_of(f"`x` {type_text}").fields[0].dataType
    except Exception:   # a type dslc knows and PySpark cannot parse: compare untyped
        return None


def _typed_row(row: dict[str, Any], schema: plan.Schema, where: str, *, all_columns: bool) -> dict[str, Any]:
    fields = {f.name.lower(): f for f in schema}
    for column in row:
        if str(column).lower() not in fields:
            raise CaseFileError(f"{where}: unknown column {column!r} (columns: {', '.join(f.name for f in schema)})")
    out: dict[str, Any] = {}
    given = {str(k).lower(): v for k, v in row.items()}
    for f in schema:
        if f.name.lower() not in given and not all_columns:
            continue
        value = given.get(f.name.lower())
        data_type = _spark_type(f.type)
        try:
            out[f.name] = values.typed(value, data_type) if data_type is not None else value
        except values.DoesNotFit as exc:
            raise CaseFileError(f"{where}, column {f.name}: {exc}") from None
    return out


@dataclasses.dataclass
class _Prepared:
    sources: dict[str, list[dict[str, Any]]]             # source name -> typed rows
    answers: dict[str, list[dict[str, Any]]]             # operator -> recording entries
    expect: dict[str, tuple[plan.Sink, list[dict[str, Any]]]]
    dead_letters: dict[str, list[dict[str, Any]]]
    quarantine: dict[str, list[dict[str, Any]]] = dataclasses.field(default_factory=dict)   # rows per EXPECT
    constraints: dict[str, list[dict[str, Any]]] = dataclasses.field(default_factory=dict)  # counts per EXPECT


def prepare(case: Case, p: plan.Plan) -> _Prepared:
    """Check a case against the plan: names, columns and value types; raise CaseFileError."""
    where_case = f"case {case.name!r}"
    sources = {n.name: n for n in p.nodes if isinstance(n, plan.Source)}
    for state in p.nodes:      # BROADCAST ... FROM DATABASE: its table's rows under the broadcast's name
        if isinstance(state, plan.BroadcastState) and getattr(p.node(state.source), "database", None) is not None \
                and state.name not in sources:
            sources[state.name] = p.node(state.source)
    enriches = {n.name: n for n in p.nodes if isinstance(n, plan.Enrich)}
    sinks: dict[str, plan.Sink] = {}
    for sink in p.sinks:
        sinks.setdefault(sink.input, sink)
    try:
        typed_sources = {}
        for name, rows in case.sources.items():
            node = _lookup(sources, name, "source")
            typed_sources[node.name] = [
                _typed_row(r, node.schema, f"source {node.name}, row {i}", all_columns=True) for i, r in enumerate(rows, 1)]
        answers = {}
        for name, entries in case.enrich.items():
            node = _lookup(enriches, name, "ENRICH operator")
            answers[node.name] = [_answer(node, e, f"enrich {node.name}, answer {i}") for i, e in enumerate(entries, 1)]
        expect = {}
        for name, rows in case.expect.items():
            sink = _lookup(sinks, name, "sink")
            schema = p.node(sink.input).schema
            expect[sink.input] = (sink, [_typed_row(r, schema, f"sink {sink.input}, row {i}", all_columns=False)
                                         for i, r in enumerate(rows, 1)])
        dead = {}
        lettered = {n: e for n, e in enriches.items() if e.dead_letter}
        for name, rows in case.dead_letters.items():
            node = _lookup(lettered, name, "ENRICH with a DEAD LETTER")
            for i, r in enumerate(rows, 1):
                unknown = [c for c in r if c not in DEAD_LETTER_COLUMNS]
                if unknown:
                    raise CaseFileError(f"dead letters of {node.name}, row {i}: unknown column {unknown[0]!r} "
                                        f"(columns: {', '.join(DEAD_LETTER_COLUMNS)})")
            dead[node.name] = [values.stamps_as_text(values.comparable(r)) for r in rows]
        quarantine, constraints = expectations.prepare(case.quarantine, case.constraints, p)
    except CaseFileError as exc:
        raise CaseFileError(f"{where_case}: {exc}") from None
    return _Prepared(typed_sources, answers, expect, dead, quarantine, constraints)


def _answer(node: plan.Enrich, entry: dict[str, Any], where: str) -> dict[str, Any]:
    http_get = isinstance(node.call, plan.HttpCall) and node.call.method == "GET"
    columns = node.call.placeholders if http_get else node.key_columns
    if isinstance(node.call, (plan.ModelCall, plan.EmbeddingCall)):
        columns = node.call.key_names       # the filled prompt (and system) or input
    key = entry["key"]
    if not isinstance(key, dict):
        if len(columns) != 1:
            raise CaseFileError(f"{where}: the call key has columns {', '.join(columns)}; write key: {{column: value, ...}}")
        key = {columns[0]: key}
    unknown = [c for c in key if c not in columns]
    if unknown or len(key) != len(columns):
        raise CaseFileError(f"{where}: the call key of {node.name} is ({', '.join(columns)}), got ({', '.join(map(str, key))})")
    out: dict[str, Any] = {"key": key}
    if "answer" in entry:
        answer = entry["answer"]
        items = answer if isinstance(answer, list) else [answer]
        for item in items:
            if not isinstance(item, dict):
                raise CaseFileError(f"{where}: an answer is a mapping of RETURNS columns (or a list of them)")
            _typed_row(item, node.returns, where + " answer", all_columns=False)
        out["answer"] = answer
    elif entry.get("miss"):
        out["miss"] = True
    elif entry.get("timeout"):
        out["timeout"] = True
    else:
        out["error"] = str(entry["error"])
        out["error_type"] = "CallError"
        if entry.get("error_class") is not None:   # transient (retried, the default), credentials, request, answer
            out["error_class"] = str(entry["error_class"])
        if entry.get("raw") is not None:    # what a model answered, for the dead letter
            out["raw"] = str(entry["raw"])
    if entry.get("latency_ms") is not None:
        out["latency_ms"] = entry["latency_ms"]
    return out


#: Event time of the rows that end a STREAMING case's input: they move the watermark past every
#: window, as the end of a bounded input does in Flink, and are filtered out right after the read.
END_OF_INPUT = dt.datetime(2999, 12, 31, tzinfo=dt.timezone.utc)
_INPUT_PREFIX = "__dslc_input_"


def _end_of_input_filter(source: plan.Source) -> tuple[plan.Source, plan.Query]:
    """The source under another name, and a query under its own name that drops the end rows."""
    import sqlglot

    renamed = dataclasses.replace(source, name=_INPUT_PREFIX + source.name)
    column = source.watermark.column
    columns = ", ".join(f"`{f.name}`" for f in source.schema)
    sql = (f"SELECT {columns} FROM `{renamed.name}` "
           f"WHERE `{column}` IS NULL OR `{column}` < TIMESTAMP '{END_OF_INPUT:%Y-%m-%d %H:%M:%S}'")
    query = plan.Query(name=source.name, schema=source.schema, line=source.line, span=source.span, sql=sql,
                       tree=sqlglot.parse_one(sql, read="spark"), reads=(renamed.name,), aggregates=False,
                       origin="dslc test: drop the end-of-input rows")
    return renamed, query


def sandbox(p: plan.Plan, root: Path) -> plan.Plan:
    """The plan with its SOURCEs, SINKs, dead letters, checkpoint and answer store all inside `root`; in
    STREAMING, each source with a WATERMARK also reads an end-of-input row that it drops at once."""
    streaming = p.settings.mode == "STREAMING"
    nodes: list = []
    for node in p.nodes:
        if isinstance(node, plan.Source):
            node = dataclasses.replace(node, connector="PARQUET", path=str(root / "sources" / node.name), options=(),
                                       database=None)    # a database table: a file, read once as the table would be
            if streaming and node.watermark is not None:
                node = dataclasses.replace(node, options=(("maxFilesPerTrigger", "1"),))
                nodes.extend(_end_of_input_filter(node))
                continue
        elif isinstance(node, plan.Enrich):
            dead = str(root / "dead_letters" / node.name) if node.dead_letter else None
            node = dataclasses.replace(node, cache=None, dead_letter=dead)
            if node.store is not None:   # a store of the case's own, empty, as on a first run: the
                # pipeline's (a file, a Redis) may hold a real run's answers, and must not get the case's
                node = dataclasses.replace(node, store=dataclasses.replace(
                    node.store, location=str(root / "store" / "answers.db")))
        nodes.append(node)
    sinks = [dataclasses.replace(s, connector="PARQUET", path=str(root / "sinks" / f"{i}-{s.input}"), options=(),
                                 partition_by=(), mode="APPEND" if streaming else "OVERWRITE", database=None)
             for i, s in enumerate(p.sinks)]
    settings = dataclasses.replace(p.settings, checkpoint=str(root / "checkpoint"),
                                   trigger="available-now" if streaming else p.settings.trigger)
    return dataclasses.replace(p, settings=settings, nodes=tuple(nodes), sinks=tuple(sinks))


def _write_sources(spark, sandboxed: plan.Plan, rows: dict[str, list[dict[str, Any]]]) -> None:
    """One Parquet file of the case's rows per SOURCE; for a source that ends with the final
    watermark, two more files of end rows, newer, so that AVAILABLE NOW (one file per
    micro-batch) runs the data, then a batch that moves the watermark to the end, then one that
    runs with it (Spark closes windows with the watermark of the batch before)."""
    for node in sandboxed.nodes:
        if not isinstance(node, plan.Source):
            continue
        schema = _struct_of(", ".join(f"`{f.name}` {f.type}" for f in node.schema))
        name = node.name.removeprefix(_INPUT_PREFIX)
        data = [tuple(r[f.name] for f in node.schema) for r in rows.get(name, [])]
        folder = Path(node.path)
        shutil.rmtree(folder, ignore_errors=True)
        _write_parquet(spark, schema, data, folder / "part-00000.parquet")
        if name == node.name or not data:
            continue
        # every row again at the end of time: Spark applies filters that do not read the event
        # time before the watermark, so an end row must pass them wherever a real row does
        end = [tuple(END_OF_INPUT if f.name == node.watermark.column else v for f, v in zip(node.schema, row))
               for row in data]
        newest = max(f.stat().st_mtime for f in folder.glob("*.parquet"))
        for n in (1, 2):
            target = folder / f"zz-end-of-input-{n}.parquet"
            _write_parquet(spark, schema, end, target)
            os.utime(target, (newest + n, newest + n))


@functools.lru_cache(maxsize=None)
def _struct_of(ddl: str):
    """Spark's reading of a DDL column list (a JVM round trip, so kept per DDL)."""
    from pyspark.sql.types import StructType

    return StructType.fromDDL(ddl)


def _write_parquet(spark, schema, data: list[tuple], target: Path) -> None:
    """`data` as one Parquet file at `target`, written by pyarrow with the Arrow schema PySpark
    itself maps `schema` to (a Spark write job costs about a second per file; a case writes up
    to three per source). A type Arrow has no mapping for is written by Spark instead."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyspark.sql.pandas.types import to_arrow_schema

    try:
        arrow_schema = to_arrow_schema(schema, timezone="UTC")
        table = pa.Table.from_pylist([dict(zip(arrow_schema.names, row)) for row in data], schema=arrow_schema)
    except (TypeError, ValueError, NotImplementedError, pa.ArrowException):
        staging = target.with_name(f"_staging-{target.stem}")
        spark.createDataFrame(data, schema).coalesce(1).write.mode("overwrite").parquet(str(staging))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(next(staging.glob("part-*.parquet"))), target)
        shutil.rmtree(staging)
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, target)


def _replay_folder(case: Case, prepared: _Prepared, root: Path) -> Path:
    folder = root / "answers"
    folder.mkdir(parents=True, exist_ok=True)
    recorded: dict[str, list[dict[str, Any]]] = {}
    if case.replay is not None:
        for call in recording.entries(case.replay):
            recorded.setdefault(call["operator"], []).append({k: v for k, v in call.items() if k != "operator"})
    for operator, entries in prepared.answers.items():
        given = {recording.canonical_key(e["key"]) for e in entries}
        kept = [c for c in recorded.get(operator, []) if recording.canonical_key(c.get("key") or {}) not in given]
        recorded[operator] = entries + kept
    for operator, calls in recorded.items():
        recording.write_answers(folder, operator, calls)
    return folder


def _files(folder: Path) -> list[Path]:
    if not folder.exists():
        return []
    return sorted(f for f in folder.rglob("*") if f.is_file() and not any(
        part.startswith((".", "_")) for part in f.relative_to(folder).parts))


def _read_sink(spark, sink: plan.Sink, schema: plan.Schema) -> list[dict[str, Any]]:
    folder = Path(sink.path)
    if not any(f.suffix == ".parquet" for f in _files(folder)):
        return []
    rows = sink_files.read(folder, _files(folder), [f.name for f in schema])
    if rows is None:
        rows = _read_sink_with_spark(spark, folder, schema)
    return [values.comparable(r.asDict(recursive=False)) for r in rows]


def _read_sink_with_spark(spark, folder: Path, schema: plan.Schema) -> list:
    """The sink's rows as Spark reads them (a job), where `sink_files` cannot be sure of them."""
    df = spark.read.parquet(str(folder))
    wanted = [f.name for f in schema if f.name in df.columns] or df.columns
    return df.select(*[f"`{c}`" for c in wanted]).collect()


def _read_dead_letters(folder: Path) -> list[dict[str, Any]]:
    rows = []
    for file in _files(folder):
        for line in file.read_text(encoding="utf-8").splitlines():
            if line.strip():
                rows.append(values.stamps_as_text(values.comparable(json.loads(line))))
    return rows


@contextlib.contextmanager
def _job_settings(spark, replay: str, metrics_file: Path, verbose: bool = False) -> Iterator[None]:
    """A case's job: answers replayed, metrics into a file, no secret needed; unless `verbose`,
    no live progress and no table or diagnosis on the report (one line per case), and no run's
    stop for dead letters over their ceiling (a case says which dead letters it expects)."""
    from dslc.runtime.spark import outcome

    context = spark.sparkContext
    settings = {run_env.METRICS_FILE.name: str(metrics_file),   # metrics into a file, not onto the report
                secrets.OPTIONAL_ENV: "1"}                     # answers are replayed: no call needs a secret
    if not verbose:
        settings.update({run_env.PROGRESS.name: "0", run_env.METRICS_QUIET.name: "1"})
    previous = {name: os.environ.get(name) for name in settings}
    context.setLocalProperty(recording.REPLAY_PROPERTY, replay)
    os.environ.update(settings)
    outcome.begin(checks_ceiling=False)
    try:
        yield
    finally:
        outcome.discard()
        context.setLocalProperty(recording.REPLAY_PROPERTY, None)
        for name, value in previous.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


_ERROR_LINE = re.compile(r"^(?:\w+\.)*(\w*(?:Error|Exception|Failure|NotRecorded)): (.+)$")


def short_error(exc: BaseException) -> str:
    """The cause of a failed job in one or two lines, not a JVM stack trace."""
    text = str(exc)
    found = [m for m in (_ERROR_LINE.match(line.strip()) for line in text.splitlines()) if m]
    useful = [m for m in found if m.group(1) not in ("Py4JJavaError", "PythonException", "SparkException")]
    if useful:
        best = next((m for m in useful if "NotRecorded" in m.group(0) or "ElementFailure" in m.group(1)), useful[-1])
        return f"{best.group(1)}: {best.group(2)}"
    first = next((line for line in text.splitlines() if line.strip()), type(exc).__name__)
    return f"{type(exc).__name__}: {first.strip()}"


def run_prepared(spark, p: plan.Plan, case: Case, root: Path, verbose: bool = False) -> CaseResult:
    """Run one case of plan `p` inside `root` and compare its outputs; CaseFileError when the
    case does not fit the pipeline (unknown name or column, a value its type cannot hold)."""
    from dslc.compiler.pipeline import lower_plan

    started = time.perf_counter()
    prepared = prepare(case, p)          # a malformed case raises CaseFileError
    root.mkdir(parents=True, exist_ok=True)
    sandboxed = expectations.sandboxed(sandbox(p, root), root)
    _write_sources(spark, sandboxed, prepared.sources)
    answers = _replay_folder(case, prepared, root)
    job = root / "job.py"
    job.write_text(lower_plan(sandboxed, job_folder=str(root), trigger=sandboxed.settings.trigger))
    setting = recording.setting_json(answers, unrecorded=case.unrecorded, latency=case.latency, source="test")
    try:
        with _job_settings(spark, setting, root / "metrics.json", verbose):
            namespace = runpy.run_path(str(job), run_name="dslc_test_job")
            namespace["main"]()
    except Exception as exc:  # noqa: BLE001 - a failing job is a failing case, reported briefly
        return CaseResult(case.name, False, error=f"case {case.name!r}: the pipeline failed: {short_error(exc)}",
                          seconds=time.perf_counter() - started)
    result = CaseResult(case.name, True)
    for sink in sandboxed.sinks:
        result.outputs.setdefault(sink.input, _read_sink(spark, sink, p.node(sink.input).schema))
    for node in sandboxed.nodes:
        if isinstance(node, plan.Enrich) and node.dead_letter:
            result.outputs[f"dead_letters:{node.name}"] = _read_dead_letters(Path(node.dead_letter))
    for name, (sink, rows) in prepared.expect.items():
        result.diffs.append(diff_rows(f"sink {name}", [values.comparable(r) for r in rows],
                                      result.outputs[sink.input], ordered=case.ordered))
    for name, rows in prepared.dead_letters.items():
        result.diffs.append(diff_rows(f"dead letters of {name}", rows, result.outputs[f"dead_letters:{name}"],
                                      ordered=case.ordered))
    result.diffs += expectations.diffs(sandboxed, root / "metrics.json", prepared.quarantine, prepared.constraints,
                                       case.ordered, result.outputs)
    result.passed = all(d.ok for d in result.diffs)
    result.seconds = time.perf_counter() - started
    return result


def check_pipeline(path: Path) -> plan.Plan:
    """The pipeline's plan; a compile error becomes a CaseFileError with the usual diagnostics."""
    from dslc.compiler.pipeline import check_file

    try:
        return check_file(path)
    except CompileError as exc:
        raise CaseFileError(f"{path}: the pipeline does not compile:\n{exc.render()}") from None
