"""What each connector needs and gives: one table, read by the planner and the code generator."""
from __future__ import annotations

from dataclasses import dataclass

from dslc.compiler.plan.logical import Column


@dataclass(frozen=True, slots=True)
class SourceKind:
    """A SOURCE connector: does it take a path/ref, must it declare SCHEMA, fixed columns."""

    takes_arg: bool
    needs_schema: bool
    fixed_schema: tuple[Column, ...] = ()
    required_options: tuple[str, ...] = ()


SOURCES: dict[str, SourceKind] = {
    "JSON": SourceKind(True, True),
    "CSV": SourceKind(True, True),
    "PARQUET": SourceKind(True, True),
    "TEXT": SourceKind(True, False, (Column("value", "STRING"),)),
    "RATE": SourceKind(False, False, (Column("timestamp", "TIMESTAMP"), Column("value", "BIGINT"))),
    "KAFKA": SourceKind(False, False, (
        Column("key", "BINARY"), Column("value", "BINARY"), Column("topic", "STRING"),
        Column("partition", "INT"), Column("offset", "BIGINT"), Column("timestamp", "TIMESTAMP"),
        Column("timestampType", "INT")), ("kafka.bootstrap.servers",)),
    "PYTHON": SourceKind(True, True),
    "DATABASE": SourceKind(True, True),     # DATABASE db TABLE 't' | QUERY '...' (compiler/plan/databases.py)
    "TABLE": SourceKind(True, False),       # a table of Spark's catalog (compiler/plan/catalog_tables.py)
}


@dataclass(frozen=True, slots=True)
class SinkKind:
    """A SINK connector: does it take a path/ref, can it partition its output."""

    takes_arg: bool
    partitions: bool
    needs_checkpoint: bool
    required_options: tuple[str, ...] = ()


SINKS: dict[str, SinkKind] = {
    "PARQUET": SinkKind(True, True, True),
    "JSON": SinkKind(True, True, True),
    "CSV": SinkKind(True, True, True),
    "CONSOLE": SinkKind(False, False, False),
    "KAFKA": SinkKind(False, False, True, ("kafka.bootstrap.servers", "topic")),
    "PYTHON": SinkKind(True, False, True),
    "DATABASE": SinkKind(True, False, True),
    "TABLE": SinkKind(True, False, True),
}

SINK_MODES = ("APPEND", "OVERWRITE", "COMPLETE", "UPSERT")
PIPELINE_MODES = ("BATCH", "STREAMING")
