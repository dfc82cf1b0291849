"""`dslc check --spark`: Spark's own analyzer as the last word on every query, before any data.

The fast check (sqlglot, compiler/sparksql/sql.py) knows tables, columns, SQL syntax and Spark's
output names and types; it does not know every function's signature, type rule or aggregation
rule. This pass runs each STREAM's query through Spark's analyzer over empty tables with the
declared schemas (a dry run, as Spark Declarative Pipelines' `dry-run` does), in statement
order, so each query sees exactly the columns the one before it produces, and maps Spark's
error (its condition and the query context's character range) back to the `.flow` file.
It needs a JVM: a second or more the first time (see bench/check_time.py). Callers that hold one
use it: `dslc check --spark`, the REPL (each statement as it is entered), `dslc run` (the job's own
session, before its first action: runtime/spark/preflight.py) and `dslc lsp --spark` (a JVM in the
background, after the fast diagnostics). `analyze_with_spark` also gives Spark's schema of every
relation, which those callers show instead of the fast check's.
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from dslc.compiler.diagnostics import Diagnostic, error
from dslc.compiler.plan import logical as plan
from dslc.compiler.plan.names import sql_name
from dslc.compiler.source import SourceFile, Span

_POSITION = re.compile(r"line (\d+),? pos (\d+)")
_STATE = re.compile(r"\s*SQLSTATE: \w+\s*;?.*", re.S)


@dataclass(frozen=True)
class Mismatch:
    """A query whose schema dslc inferred differently from Spark (a dslc bug to report)."""

    name: str
    dslc: tuple[tuple[str, str], ...]
    spark: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class SparkAnalysis:
    """What Spark's analyzer said about a plan: its errors, the relations whose schema dslc
    inferred differently, and Spark's schema (name, dslc type) of every relation it analyzed,
    by lower-case name."""

    problems: list[Diagnostic]
    mismatches: list[Mismatch]
    schemas: dict[str, tuple[tuple[str, str], ...]]


def dry_run(checked: plan.Plan, source: SourceFile, spark,
            reported: list[Diagnostic] = ()) -> tuple[list[Diagnostic], list[Mismatch]]:
    """Spark's analyzer on every query and MATCH condition of a checked plan: E0212 for each
    one it rejects, and the queries whose output schema differs from dslc's. `reported` are the
    fast check's problems: a statement that has one, or reads one that does, is left out (it is
    reported already, and Spark would only say the same thing again or miss its input)."""
    found = analyze_with_spark(checked, source, spark, reported)
    return found.problems, found.mismatches


def analyze_with_spark(checked: plan.Plan, source: SourceFile, spark,
                       reported: list[Diagnostic] = (), current=lambda: True) -> SparkAnalysis:
    """`dry_run`, keeping Spark's schema of each relation too. `current()` turning False (a newer
    version of an editor's document arrived) stops it at the next statement with what it has."""
    from dslc.compiler.sparksql.sqltypes import canonical

    session = spark.newSession()            # its own temp views; same JVM
    for key, value in dict(checked.settings.conf).items():
        if key.startswith("spark.sql."):     # the pipeline's SETs the query sees (runtime ones only)
            try:
                session.conf.set(key, value)
            except Exception:       # noqa: BLE001 - a static setting: the session was created with it or without
                pass
    logging.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)   # PySpark logs each
    problems: list[Diagnostic] = []
    mismatches: list[Mismatch] = []
    schemas: dict[str, tuple[tuple[str, str], ...]] = {}
    present = {n.name.lower() for n in checked.nodes}
    failed: set[str] = set()
    for node in checked.nodes:
        if not current():
            break
        if any(node.span.start <= d.span.start < node.span.end for d in reported):
            failed.add(node.name.lower())
            continue
        if any(r.lower() in failed or r.lower() not in present for r in node.inputs):
            failed.add(node.name.lower())           # reported where its input failed
            continue
        if isinstance(node, plan.Match):
            problem = _match(node, source, session)
            if problem is not None:
                problems.append(problem)
                failed.add(node.name.lower())
                continue
        if not isinstance(node, plan.Query):
            ddl = ", ".join(f"{sql_name(f.name)} {f.type}" for f in node.schema) if node.schema else None
            if ddl is None or "?" in ddl:
                failed.add(node.name.lower())
                continue
            session.createDataFrame([], ddl).createOrReplaceTempView(sql_name(node.name))
            schemas[node.name.lower()] = tuple((f.name, f.type) for f in node.schema)
            continue
        try:
            frame = session.sql(node.sql)
            fields = frame.schema.fields
        except Exception as exc:    # noqa: BLE001 - Spark's AnalysisException/ParseException, via Py4J
            if not hasattr(exc, "getCondition"):
                raise
            start = source.text.find(node.sql, node.span.start)
            problems.append(_diagnostic(exc, node.sql, node.span.start if start < 0 else start))
            failed.add(node.name.lower())
            continue
        frame.createOrReplaceTempView(sql_name(node.name))
        theirs = tuple((f.name, canonical(f.dataType.simpleString()) or f.dataType.simpleString().upper())
                       for f in fields)
        ours = tuple((f.name, f.type) for f in node.schema)
        schemas[node.name.lower()] = theirs
        if theirs != ours:
            mismatches.append(Mismatch(node.name, ours, theirs))
    return SparkAnalysis(problems, mismatches, schemas)


def _match(node: plan.Match, source: SourceFile, session) -> Diagnostic | None:
    """A MATCH condition through Spark's analyzer, as the job joins with it: the input and the
    state under their aliases, joined ON the condition; an error at the condition's characters."""
    head = (f"SELECT * FROM {sql_name(node.input)} AS {sql_name(node.input)} "
            f"JOIN {sql_name(node.state)} AS {sql_name(node.alias)} ON ")
    try:
        _ = session.sql(head + node.predicate).schema   # analysed when its schema is read
    except Exception as exc:        # noqa: BLE001 - Spark's AnalysisException/ParseException, via Py4J
        if not hasattr(exc, "getCondition"):
            raise
        at = source.text.find(node.predicate, node.span.start)
        return _diagnostic(exc, node.predicate, node.span.start if at < 0 else at, len(head))
    return None


def _diagnostic(exc, sql: str, start: int, prefix: int = 0) -> Diagnostic:
    """E0212 at the characters Spark's query context names (else the line/pos of its message,
    else the start of the text). `sql` is the text the .flow file holds at offset `start`; Spark
    was given it after `prefix` characters of dslc's own (a MATCH condition's join)."""
    where = Span(start, start + min(6, len(sql)))
    contexts = [c for c in (exc.getQueryContext() or []) if c.startIndex() >= 0]
    message = _STATE.sub("", exc.getMessage() if hasattr(exc, "getMessage") else str(exc)).strip()
    message = re.sub(r"^\[[A-Z_.]+\]\s*", "", message).split("\n")[0]
    if contexts and contexts[0].startIndex() >= prefix:
        context = contexts[0]
        where = Span(start + context.startIndex() - prefix, start + context.stopIndex() + 1 - prefix)
    elif (match := _POSITION.search(exc.getMessage() if hasattr(exc, "getMessage") else str(exc))) \
            and not prefix:
        line, pos = int(match[1]), int(match[2])
        offset = sum(len(l) + 1 for l in sql.split("\n")[: line - 1]) + pos
        where = Span(start + offset, start + offset + 1)
    else:
        where = _mentioned(exc, sql, start) or where
    condition = exc.getCondition() or "error"
    return error("E0212", where, condition=condition, detail=message,
                 hint="Spark's analyzer found this over empty tables of the declared schemas")


def _mentioned(exc, sql: str, start: int) -> Span | None:
    """Where the query writes the expression an error names (MISSING_AGGREGATION says which
    expression but gives no position)."""
    for value in (exc.getMessageParameters() or {}).values():
        text = str(value).strip('"').strip("`")
        at = re.search(rf"(?<![\w.`]){re.escape(text)}(?![\w`])", sql) if text else None
        if at is not None:
            return Span(start + at.start(), start + at.end())
    return None
