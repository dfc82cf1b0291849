"""The syntax tree of a .flow file: what was written, where, before any meaning is checked.

Values stay as written (numbers keep their unit text) so that the checker can point at a bad
value precisely; options are generic `Opt` nodes that the planner interprets.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from dslc.compiler.source import Span


@dataclass(frozen=True, slots=True)
class Name:
    """An identifier (back-quotes removed)."""

    value: str
    span: Span


@dataclass(frozen=True, slots=True)
class Str:
    """A string literal, escapes resolved, adjacent literals joined."""

    value: str
    span: Span


@dataclass(frozen=True, slots=True)
class Num:
    """A number as written, possibly with a unit (`100`, `1s`, `50ms`, `1.5`)."""

    text: str
    span: Span


@dataclass(frozen=True, slots=True)
class Word:
    """A bare keyword-like value (`BATCH`, `ORDERED`, `true`)."""

    value: str
    span: Span


Literal = Union[Str, Num, Word]


@dataclass(frozen=True, slots=True)
class Opt:
    """One option clause: its keyword (lower case, `on_miss`, `capacity`, ...) and arguments."""

    key: str
    args: tuple[object, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class TypeRef:
    """A Spark SQL type as written (`DOUBLE`, `DECIMAL(10,2)`, `ARRAY<STRING>`)."""

    text: str
    span: Span


@dataclass(frozen=True, slots=True)
class ColumnDef:
    """`name TYPE` in SCHEMA or RETURNS."""

    name: Name
    type: TypeRef
    span: Span
    path: Str | None = None     # RETURNS (col TYPE PATH 'jmespath'): where it sits in one result


@dataclass(frozen=True, slots=True)
class Connector:
    """`JSON 'path'`, `RATE`, `PYTHON 'module:Class'`, `TABLE 'name'`; `DATABASE db TABLE 't'` or
    `DATABASE db QUERY 'SELECT ...'` (kind DATABASE, `database` its name, `relation` TABLE | QUERY)."""

    kind: Name
    arg: Str | None
    span: Span
    database: Name | None = None
    relation: Name | None = None


@dataclass(frozen=True, slots=True)
class Sql:
    """A piece of Spark SQL, kept as text; `span` locates it in the file."""

    text: str
    span: Span


@dataclass(frozen=True, slots=True)
class Pipeline:
    """PIPELINE name [MODE m] [CHECKPOINT 'dir'] [TRIGGER ...]."""

    name: Name
    options: tuple[Opt, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class SetConf:
    """SET key = value: Spark configuration."""

    key: Name
    value: Literal
    span: Span


@dataclass(frozen=True, slots=True)
class Source:
    """SOURCE name FROM connector [OPTIONS] [SCHEMA] [WATERMARK]."""

    name: Name
    connector: Connector
    options: tuple[Opt, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class Broadcast:
    """BROADCAST name FROM source KEY k [OP o] | USING PYTHON 'm:f'; FROM DATABASE db TABLE 't'
    KEY k [REFRESH EVERY d] (`database`; `source` is then the database's name)."""

    name: Name
    source: Name
    key: Name | None
    op: Name | None
    using: Str | None
    span: Span
    database: Connector | None = None
    refresh: Num | None = None
    schema: Opt | None = None      # FROM DATABASE ... SCHEMA (...): else read from the database


@dataclass(frozen=True, slots=True)
class Select:
    """STREAM name = <Spark SQL query>."""

    name: Name
    sql: Sql
    span: Span


@dataclass(frozen=True, slots=True)
class HttpCall:
    """WITH HTTP GET 'url' / WITH HTTP POST 'url' [BODY (col, ...)] [HEADERS (...)] [ANSWER 'path']
    [OPTIONS (...)]."""

    method: Name
    url: Str
    span: Span
    body: Opt | None = None     # BODY (col, ...): its args are the column Names
    headers: Opt | None = None  # HEADERS (...): its args are (name Str, value Str | None) pairs
    answer: Str | None = None   # ANSWER 'jmespath'
    options: Opt | None = None  # OPTIONS (ca_file = '...', verify = 'false')
    repeated: tuple[Opt, ...] = ()  # a clause given twice (reported by the planner)


@dataclass(frozen=True, slots=True)
class PythonCall:
    """WITH PYTHON 'module:function'."""

    ref: Str
    span: Span


@dataclass(frozen=True, slots=True)
class SqlCall:
    """WITH SQL db 'SELECT ...' [OPTIONS (pool = n)]."""

    database: Name
    query: Str
    span: Span
    options: Opt | None = None


@dataclass(frozen=True, slots=True)
class ModelCall:
    """WITH MODEL 'name' AT 'base-url' [SYSTEM '...'] PROMPT '...' [OPTIONS (...)]."""

    model: Str
    at: Str | None              # None: missing, reported by the planner
    system: Str | None
    prompt: Str
    span: Span
    headers: Opt | None = None  # HEADERS (...), as for HTTP
    options: Opt | None = None  # OPTIONS (ca_file = '...', verify = 'false'), as for HTTP


@dataclass(frozen=True, slots=True)
class EmbeddingCall:
    """WITH EMBEDDING 'name' AT 'base-url' INPUT '...' [OPTIONS (...)]."""

    model: Str
    at: Str | None
    input: Str
    span: Span
    headers: Opt | None = None
    options: Opt | None = None  # OPTIONS (ca_file = '...', verify = 'false'), as for HTTP


@dataclass(frozen=True, slots=True)
class Enrich:
    """STREAM name = ENRICH input WITH call RETURNS (...) options."""

    name: Name
    input: Name
    call: HttpCall | PythonCall | ModelCall | EmbeddingCall | SqlCall
    returns: tuple[ColumnDef, ...]
    options: tuple[Opt, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class Match:
    """STREAM name = MATCH input AGAINST state [AS alias] WHERE predicate."""

    name: Name
    input: Name
    state: Name
    alias: Name | None
    predicate: Sql
    span: Span


@dataclass(frozen=True, slots=True)
class Process:
    """STREAM name = PROCESS input [WITH BROADCAST s, ...] USING PYTHON 'm:f' RETURNS (...)."""

    name: Name
    input: Name
    states: tuple[Name, ...]
    ref: Str
    returns: tuple[ColumnDef, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class Sink:
    """SINK name TO connector [MODE m] [PARTITION BY (...)] [OPTIONS (...)]."""

    input: Name
    connector: Connector
    options: tuple[Opt, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class Database:
    """DATABASE name AT 'postgresql://...': a database the pipeline reads, looks up or writes."""

    name: Name
    url: Str
    span: Span


@dataclass(frozen=True, slots=True)
class Violation:
    """ON VIOLATION WARN | DROP | FAIL | QUARANTINE 'path'."""

    action: Word                # WARN, DROP, FAIL or QUARANTINE
    path: Str | None            # QUARANTINE's folder
    span: Span


@dataclass(frozen=True, slots=True)
class Constraint:
    """CONSTRAINT name CHECK (condition) [ON VIOLATION ...]: `check` keeps the parentheses."""

    name: Name
    check: Sql
    span: Span
    violation: Violation | None = None


@dataclass(frozen=True, slots=True)
class Expect:
    """EXPECT ON name CONSTRAINT ... [ON VIOLATION default]: `repeated` holds a second default
    (reported by the checker)."""

    target: Name
    constraints: tuple[Constraint, ...]
    default: Violation | None
    span: Span
    repeated: tuple[Violation, ...] = ()


Statement = Union[Pipeline, SetConf, Source, Broadcast, Select, Enrich, Match, Process, Sink, Database, Expect]


@dataclass(frozen=True, slots=True)
class Program:
    """Every statement of one file, in order."""

    statements: tuple[Statement, ...]
