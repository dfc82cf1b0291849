"""The REPL's session state, without any terminal: accepted statements, the current plan, and
the jobs `:show` runs. `dslc.compiler.cli.repl` puts prompt_toolkit around it."""
from __future__ import annotations

import os
import re
import runpy
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from dslc.compiler.diagnostics import CompileError
from dslc.compiler.frontend.lexical import split_statements
from dslc.compiler.pipeline import check_source, lower_plan
from dslc.compiler.plan import subset
from dslc.compiler.plan.logical import Plan
from dslc.compiler.source import SourceFile, Span, TextSource
from dslc.runtime import run_env

if TYPE_CHECKING:
    from dslc.compiler.interactive.spark_runner import SparkRunner
    from dslc.compiler.plan.dry_run import SparkAnalysis

REPL_PATH = "<repl>"


_LEADING = re.compile(r"^(?:\s+|--[^\n]*(?:\n|$))*")
_WORD = re.compile(r"[A-Za-z_]+")


def statement_kind(text: str) -> str:
    """The first keyword of a statement (SOURCE, STREAM, SINK, ...), upper case."""
    rest = text[_LEADING.match(text).end():]
    word = _WORD.match(rest)
    return word.group(0).upper() if word else ""


def quote_name(name: str) -> str:
    """An identifier as the language reads it (back-quoted when needed)."""
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        return name
    return "`" + name.replace("`", "``") + "`"


def _terminated(statement: str, after: str) -> str:
    """A statement as the program holds it: its text as typed or loaded, leading blank lines and
    comments kept (so a loaded file's lines are the program's lines), then its ';' (on a new line
    when the last line ends in a comment). A statement that starts with a word right after the
    previous ';' (one added by code, not typed) begins on a new line."""
    lead = "\n" if after and not after.endswith("\n") and statement[:1] not in ("", " ", "\t", "\n", "\r") else ""
    ends_in_comment = not split_statements(statement + ";")[-1].terminated
    return lead + statement + ("\n;" if ends_in_comment else ";")


class SparkUnavailable(Exception):
    """Spark's analyzer could not be used (the JVM did not start, or died): the session goes on
    with the fast check alone, and the message says why."""


@dataclass
class Session:
    """Accepted statements (each without its ';') and the plan they make together. With
    `spark_check`, a statement is also run through Spark's analyzer (on the runner's session,
    compiler/plan/dry_run.py) before it is kept: its errors are Spark's, at their line, and the
    schemas shown are the ones Spark gives (`spark`)."""

    folder: Path = field(default_factory=Path.cwd)
    statements: list[str] = field(default_factory=list)
    plan: Plan | None = None
    runner: "SparkRunner | None" = field(default=None, repr=False)
    spark_check: bool = False
    spark: "SparkAnalysis | None" = field(default=None, repr=False)   # of the accepted statements
    db_check: bool = False     # `:db on`: queries, sources and sinks checked against the live DATABASEs

    # ---- checking
    def program(self, statements: list[str] | None = None) -> str:
        """Program text: the statements as typed or loaded, each ended with ';'. A file loaded into
        an empty session is its own text again, line for line: errors, the plan and run-time
        messages give the file's line numbers (#48 item 13)."""
        items = self.statements if statements is None else statements
        text = ""
        for statement in items:
            text += _terminated(statement, text)
        return text + "\n" if text else text

    def _source(self, statements: list[str], path: str = REPL_PATH) -> TextSource:
        return TextSource(path, self.program(statements), base=str(self.folder))

    def check(self, statements: list[str], *, require_sink: bool = False, mode: str | None = None,
              path: str = REPL_PATH) -> Plan:
        """Plan of a list of statements (the fast check); raises CompileError. `path`: the name
        errors give the program (a file loaded into an empty session is that file, line for line)."""
        return check_source(self._source(statements, path), require_sink=require_sink, mode=mode)

    @property
    def checked_by(self) -> str:
        """Which check the errors and schemas come from, as the REPL says it."""
        found = "the fast check, then Spark's analyzer" if self.spark_check else "the fast check only"
        return found + (", then the live databases" if self.db_check else "")

    def check_databases(self, statements: list[str], plan: Plan) -> None:
        """With `db_check`, the statements against the live DATABASEs (dslc check --db); raises
        CompileError with what they refuse."""
        if not self.db_check:
            return
        from dslc.compiler.plan.database_check import check

        source = self._source(statements)
        problems = check(source, plan)
        if problems:
            raise CompileError(source, problems)

    def analyze(self, statements: list[str], plan: Plan, path: str = REPL_PATH) -> "SparkAnalysis | None":
        """Spark's analyzer on the statements (None when it is off): raises CompileError with
        every query it refuses, SparkUnavailable (and turns itself off) when Spark cannot be used,
        Interrupted on Ctrl-C while it waits for the JVM."""
        if not self.spark_check:
            return None
        from dslc.compiler.interactive.spark_runner import Interrupted, SparkRunner
        from dslc.compiler.plan.dry_run import analyze_with_spark

        if self.runner is None:
            self.runner = SparkRunner()
        source = self._source(statements, path)
        try:
            found = self.runner.run("Spark's analyzer", lambda spark: analyze_with_spark(plan, source, spark),
                                    dict(plan.settings.conf))
        except Interrupted:
            raise
        except Exception as exc:   # noqa: BLE001 - no JVM (or it died): the fast check goes on alone
            self.spark_check = False
            detail = str(exc).strip().splitlines()
            raise SparkUnavailable(detail[0] if detail else type(exc).__name__) from exc
        if found.problems:
            raise CompileError(source, found.problems)
        return found

    def add(self, statement: str) -> Plan:
        """Accept one statement if the whole program still checks (the fast check, then Spark's
        analyzer when it is on); otherwise raise CompileError and leave the session as it was."""
        candidate = [*self.statements, statement]
        plan = self.check(candidate)
        found = self.analyze(candidate, plan)
        self.check_databases(candidate, plan)
        self.statements = candidate
        self.plan = plan
        self.spark = found
        return plan

    def add_text(self, text: str) -> tuple[list[str], str]:
        """Split text at top-level ';': the terminated statements, and the unterminated rest."""
        chunks = split_statements(text)
        done = [c.text for c in chunks if c.terminated]
        rest = "".join(c.text for c in chunks if not c.terminated)
        return done, rest

    def load(self, path: str | Path) -> int:
        """Add every statement of a file, all or nothing; the number of statements added.
        Relative paths of later statements resolve against the session folder, which becomes
        the file's folder when the session is still empty."""
        path = Path(path)
        text = path.read_text(encoding="utf-8", errors="replace")
        # the last statement may lack its ';': it goes at the end of its text, not on a line of its own
        statements = [c.text if c.terminated else c.text.rstrip() for c in split_statements(text)
                      if c.terminated or c.text.strip()]
        previous_folder = self.folder
        if not self.statements:
            self.folder = path.resolve().parent
        shown_as = str(path) if not self.statements else REPL_PATH
        try:
            plan = self.check([*self.statements, *statements], path=shown_as)
            found = self.analyze([*self.statements, *statements], plan, shown_as)
            self.check_databases([*self.statements, *statements], plan)
        except CompileError as exc:
            self.folder = previous_folder
            raise self._in_file(exc, path, text, statements) from None
        except BaseException:
            self.folder = previous_folder
            raise
        self.statements = [*self.statements, *statements]
        self.plan = plan
        self.spark = found
        return len(statements)

    def _in_file(self, exc: CompileError, path: Path, text: str, statements: list[str]) -> CompileError:
        """`exc` of a file loaded after typed statements, its errors at the file's own lines when
        they all lie in the file's part of the program (#48 item 13); else as it was."""
        if not self.statements or not statements:
            return exc
        before = self.program()[:-1]
        start = len(before) + _terminated(statements[0], before).index(statements[0])
        program = exc.source.text
        end = start + len(text.rstrip())
        if program[start:end] != text.rstrip() or not all(start <= d.span.start <= d.span.end <= end
                                                          for d in exc.diagnostics):
            return exc
        moved = [replace(d, span=Span(d.span.start - start, d.span.end - start)) for d in exc.diagnostics]
        return CompileError(SourceFile(str(path), text), moved)

    def reset(self) -> None:
        self.statements = []
        self.plan = None
        self.spark = None

    def schema_of(self, node) -> list[tuple[str, str]]:
        """(name, type) of a relation's columns: Spark's when its analyzer saw it, else the fast check's."""
        if self.spark is not None and node.name.lower() in self.spark.schemas:
            return list(self.spark.schemas[node.name.lower()])
        return [(f.name, f.type) for f in node.schema]

    def differs(self, node) -> str | None:
        """The fast check's columns of `node` when Spark's analyzer gives other names or types (a dslc
        bug), else None."""
        if self.spark is None:
            return None
        for m in self.spark.mismatches:
            if m.name.lower() == node.name.lower():
                unknown_only = len(m.dslc) == len(m.spark) and all(
                    a == b or (a[0] == b[0] and "?" in a[1]) for a, b in zip(m.dslc, m.spark))
                # a `?` is a type the fast check leaves to Spark, not a wrong one: nothing to report
                return None if unknown_only else ", ".join(f"{n} {t}" for n, t in m.dslc)
        return None

    # ---- names for completion and :schema
    def node_names(self) -> list[str]:
        return [n.name for n in self.plan.nodes] if self.plan else []

    def columns(self, node: str | None = None) -> list[str]:
        if not self.plan:
            return []
        nodes = self.plan.nodes
        if node is not None:
            nodes = tuple(n for n in nodes if n.name.lower() == node.lower())
        seen: dict[str, None] = {}
        for n in nodes:
            for f in n.schema:
                seen.setdefault(f.name, None)
        return list(seen)

    def find_node(self, name: str):
        if not self.plan:
            return None
        try:
            return self.plan.node(name)
        except KeyError:
            return None

    # ---- renderings
    def render_schema(self, name: str) -> str:
        node = self.find_node(name)
        if node is None:
            raise LookupError(self._unknown(name))
        columns = self.schema_of(node)
        width = max((len(name) for name, _ in columns), default=0)
        by = " (Spark's analyzer)" if self.spark is not None and node.name.lower() in self.spark.schemas else ""
        lines = [f"{node.name}:{by}"]
        lines += [f"  {name.ljust(width)}  {type_}" for name, type_ in columns]
        return "\n".join(lines)

    def _unknown(self, name: str) -> str:
        known = ", ".join(self.node_names()) or "none yet"
        return f"unknown stream or source '{name}' (known: {known})"

    def render_code(self, job_folder: str | None = None) -> str:
        plan = self.plan or self.check([])
        return lower_plan(plan, job_folder=job_folder or str(self.folder))

    # ---- :show
    def show_plan(self, name: str) -> Plan:
        """The BATCH plan of `name` alone: the session's SINKs left out, one console SINK of `name`,
        and only the nodes `name` reads (no other ENRICH runs, no other service is called)."""
        node = self.find_node(name)
        if node is None:
            raise LookupError(self._unknown(name))
        kept = [s for s in self.statements if statement_kind(s) != "SINK"]
        kept.append(f"SINK {quote_name(node.name)} TO CONSOLE")
        return subset.lineage(self.check(kept, require_sink=True, mode="BATCH"), [node.name])

    def show_job(self, name: str, rows: int, job_folder: str) -> ShowJob:
        """The job behind `:show name rows`: it writes nothing (its main() returns what it would
        have written, dead letters included) and lets about `rows` rows reach the external calls
        when the operators between the source and `name` are row-by-row."""
        shown = self.show_plan(name)
        node_name = shown.sinks[0].input
        limit = subset.row_limit(shown, node_name)
        limits = ((limit.operator, int(rows)),) if limit.operator else ()
        code = lower_plan(shown, job_folder=job_folder, writes=False, row_limits=limits)
        return ShowJob(node_name, code, limit, dict(shown.settings.conf))

    def show(self, name: str, rows: int = 10, *, dead_letters: bool = False,
             runner: "SparkRunner | None" = None) -> ShowResult:
        """Run `name`'s job in this process and render `rows` of its rows (or of the dead letters
        its ENRICHes held back). Nothing is written: not the SINKs, not the dead letters."""
        from dslc.compiler.interactive.spark_runner import SparkRunner

        runner = runner or self.runner or SparkRunner()
        self.runner = runner
        with tempfile.TemporaryDirectory(prefix="dslc-repl-") as folder:
            job = self.show_job(name, rows, folder)
            path = Path(folder) / "repl_show_job.py"
            path.write_text(job.code)
            flow_folder = str(self.folder.resolve())

            def work(spark) -> ShowResult:
                captured = runpy.run_path(str(path), run_name="dslc_repl_show")["main"]()
                try:
                    return _render(job, captured, rows, dead_letters)
                finally:
                    captured.release()
                    spark.catalog.clearCache()

            with _flow_folder(flow_folder):
                label = f":show {job.name}" + (" --dead-letters" if dead_letters else "")
                return runner.run(label, work, job.conf)


@dataclass(frozen=True)
class ShowJob:
    """A `:show` job: the relation shown, its code, where its input is cut, the pipeline's SETs."""

    name: str
    code: str
    limit: subset.RowLimit
    conf: dict


@dataclass(frozen=True)
class ShowResult:
    """What `:show` prints: the table, then one line per operator (calls, dead letters)."""

    table: str
    notes: tuple[str, ...]


def _render(job: ShowJob, captured, rows: int, dead_letters: bool) -> ShowResult:
    if dead_letters:
        held = list(captured.dead_letters.items())
        if not held:
            raise LookupError(f"{job.name} reads no ENRICH with a DEAD LETTER")
        from pyspark.sql import functions as F

        frames = [df.select(F.lit(op).alias("operator"), "value") for op, df in held]
        df = frames[0]
        for more in frames[1:]:
            df = df.unionByName(more)
    else:
        df = captured.outputs[job.name]
    table = df._show_string(rows, truncate=False).rstrip("\n")
    notes = []
    for operator, m in sorted(captured.operator_metrics().items()):
        parts = [f"{m.get('elements_in', 0)} rows in"]
        if "calls" in m:
            parts.append(_count(m["calls"], "call"))
        if m.get("retries"):
            parts.append(_count(m["retries"], "retry", "retries"))
        if m.get("cache_hits"):
            parts.append(_count(m["cache_hits"], "cache hit"))
        if m.get("total_tokens"):   # MODEL, EMBEDDING: what the answers reported spending
            parts.append(f"{m['total_tokens']} tokens ({m.get('prompt_tokens', 0)} prompt, "
                         f"{m.get('completion_tokens', 0)} completion)")
        if m.get("throttled"):
            parts.append(_count(m["throttled"], "429 answer"))
        if operator in captured.dead_letters:
            parts.append(_count(m.get("dead_letters", 0), "dead letter")
                         + (" (kept in memory, not written)" if m.get("dead_letters") and not dead_letters else ""))
        notes.append(f"{operator}: " + ", ".join(parts))
    if job.limit.operator:
        notes.append(f"only {rows} input rows reach {job.limit.operator} ({job.limit.reason})")
        shown = sum(1 for line in table.splitlines() if line.startswith("|")) - 1
        if shown < rows and not dead_letters:
            notes.append(f"{shown} of {rows} rows came through (the others were filtered, dropped or dead "
                         f"letters): :show {job.name} {rows * 4} reads more input")
    elif notes:
        notes.append(job.limit.reason)
    return ShowResult(table, tuple(notes))


def _count(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else (many or one + 's')}"


class _flow_folder:
    """DSLC_FLOW_FOLDER set for the job (relative paths resolve against the session folder)."""

    def __init__(self, folder: str):
        self.folder = folder

    def __enter__(self) -> None:
        self.saved = run_env.FLOW_FOLDER.get()
        os.environ[run_env.FLOW_FOLDER.name] = self.folder

    def __exit__(self, *exc) -> None:
        if self.saved is None:
            os.environ.pop(run_env.FLOW_FOLDER.name, None)
        else:
            os.environ[run_env.FLOW_FOLDER.name] = self.saved
