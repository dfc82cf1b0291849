"""Every folder a run writes, checked writable before it starts: a run must not pay for its
service calls and then fail on a path it could never write (#41, item 5), nor write into a
folder of a run of the other mode (item 9: Spark's readers would then miss files).

`dslc run` calls `unwritable` before Spark starts, on the machine that runs the driver: each
file SINK's folder and each ENRICH's dead-letter path, resolved against the .flow file's folder
as the job resolves them. A path that exists must be a folder this user may write into; a path
that does not exist must have a nearest existing parent that is such a folder (Spark creates the
rest). Paths of another file system (`s3a://`, `hdfs://`, ...) are the cluster's to check.
"""
from __future__ import annotations

import os
from pathlib import Path

from dslc.compiler.diagnostics import Diagnostic, error
from dslc.compiler.plan import logical as plan
from dslc.compiler.source import Span

#: connectors whose SINK path is a folder of files
FILE_SINKS = ("PARQUET", "JSON", "CSV", "TEXT", "ORC")


def problem(path: Path) -> str | None:
    """Why nothing can be written at `path` (a folder Spark writes files into), or None."""
    if path.exists():
        if not path.is_dir():
            return f"{path} is a file, not a folder"
        if not os.access(path, os.W_OK | os.X_OK):
            return f"{path} is a folder this user may not write into"
        return None
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        return f"{parent} is a file, so the folder {path} cannot be created"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"the folder {path} cannot be created: {parent} is not writable for this user"
    return None


def local(path: str, folder: Path) -> Path | None:
    """`path` on this machine's file system (against the .flow file's folder), or None for
    another file system's URL."""
    if path.startswith("file:"):
        path = path[len("file:"):].lstrip("/")
        path = "/" + path
    elif "://" in path:
        return None
    return (folder / path).resolve() if not os.path.isabs(path) else Path(path)


def other_mode(path: Path, streaming: bool, mode: str) -> str | None:
    """Why a SINK of this run's mode must not write into `path`, or None: Spark's streaming file
    sink keeps a `_spark_metadata` log in its folder and readers then list only the files it
    committed, so a STREAMING run writing into a BATCH run's folder hides the BATCH files, and
    a BATCH run appending to a STREAMING run's folder writes files no reader lists."""
    if not path.is_dir():
        return None
    logged = (path / "_spark_metadata").is_dir()
    if streaming and not logged and any(p.name.startswith("part-") for p in path.iterdir()):
        return "it holds a BATCH run's files, which a STREAMING run's _spark_metadata log would hide from every reader"
    if not streaming and logged and mode == "APPEND":
        return "it is a STREAMING run's folder (_spark_metadata): Spark's readers would not list the files a BATCH run appends"
    return None


def unwritable(checked: plan.Plan, folder: Path, text: str = "") -> list[Diagnostic]:
    """A diagnostic (E0340) per SINK or dead-letter path that cannot be written, and (E0341) per
    SINK whose folder another mode's run wrote, in file order; with the file's `text`, each
    points at its path's string."""
    problems = []
    streaming = checked.settings.mode == "STREAMING"
    for sink in checked.sinks:
        where = local(sink.path, folder) if sink.path and sink.connector in FILE_SINKS else None
        why = problem(where) if where is not None else None
        if why:
            problems.append(error("E0340", _at(text, sink.span, sink.path),
                                  what=f"SINK {sink.input} TO {sink.connector} '{sink.path}'", why=why,
                                  hint="write to a folder this user may create files in, or fix its permissions; "
                                       "nothing was called or written"))
            continue
        mixed = other_mode(where, streaming, sink.mode) if where is not None else None
        if mixed:
            mode = "STREAMING" if streaming else "BATCH"
            problems.append(error("E0341", _at(text, sink.span, sink.path),
                                  what=f"SINK {sink.input} TO {sink.connector} '{sink.path}'", mode=mode, why=mixed,
                                  hint="give each mode its own folder (e.g. 'target/out/streaming/...'), or delete "
                                       "the folder first; nothing was called or written"))
    for node in checked.nodes:
        path = getattr(node, "dead_letter", None)
        where = local(path, folder) if path else None
        why = problem(where) if where is not None else None
        if why:
            problems.append(error("E0340", _at(text, node.span, path),
                                  what=f"the dead letters of ENRICH {node.name} ('{path}')", why=why,
                                  hint="give DEAD LETTER a path this user may create files in; nothing was "
                                       "called or written"))
    return sorted(problems, key=lambda d: d.span.start)


def _at(text: str, span: Span, path: str) -> Span:
    """Where `path` is written (quoted) in the statement at `span`; the statement when not found."""
    statement = text[span.start:span.end]
    for quote in ("'", '"'):
        found = statement.find(f"{quote}{path}{quote}")
        if found >= 0:
            return Span(span.start + found, span.start + found + len(path) + 2)
    return span
