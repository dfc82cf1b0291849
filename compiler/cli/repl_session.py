"""The REPL's session state, without any terminal: accepted statements, the current plan, and
the jobs `:show` runs. `dslc.compiler.repl` puts prompt_toolkit around it."""
from __future__ import annotations

import os
import re
import runpy
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from dslc.compiler.diagnostics import CompileError
from dslc.compiler.frontend.lexical import split_statements
from dslc.compiler.pipeline import check_source, lower_plan
from dslc.compiler.plan.logical import Plan
from dslc.compiler.source import SourceFile

REPL_PATH = "<repl>"


@dataclass(frozen=True)
class ReplSource(SourceFile):
    """Program text shown as `<repl>` in errors, with relative paths and user modules looked up
    in `base` (the folder of `dslc repl FILE`, or the working directory)."""

    base: str = "."

    @property
    def folder(self) -> Path:  # type: ignore[override]
        return Path(self.base).resolve()


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


def _terminated(statement: str) -> str:
    """A statement with its ';' (on a new line when the last line ends in a comment)."""
    text = statement.strip("\n").rstrip()
    last = text.rsplit("\n", 1)[-1]
    return text + ("\n;\n" if "--" in last else ";\n")


@dataclass
class Session:
    """Accepted statements (each without its ';') and the plan they make together."""

    folder: Path = field(default_factory=Path.cwd)
    statements: list[str] = field(default_factory=list)
    plan: Plan | None = None

    # ---- checking
    def program(self, statements: list[str] | None = None) -> str:
        """Program text: one statement per chunk, each ended with ';'."""
        items = self.statements if statements is None else statements
        return "".join(_terminated(s) for s in items)

    def check(self, statements: list[str], *, require_sink: bool = False, mode: str | None = None) -> Plan:
        """Plan of a list of statements; raises CompileError."""
        source = ReplSource(REPL_PATH, self.program(statements), base=str(self.folder))
        return check_source(source, require_sink=require_sink, mode=mode)

    def add(self, statement: str) -> Plan:
        """Accept one statement if the whole program still checks; otherwise raise CompileError
        and leave the session as it was."""
        candidate = [*self.statements, statement]
        plan = self.check(candidate)
        self.statements = candidate
        self.plan = plan
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
        statements = [c.text for c in split_statements(text) if c.terminated or c.text.strip()]
        previous_folder = self.folder
        if not self.statements:
            self.folder = path.resolve().parent
        try:
            plan = self.check([*self.statements, *statements])
        except CompileError:
            self.folder = previous_folder
            raise
        self.statements = [*self.statements, *statements]
        self.plan = plan
        return len(statements)

    def reset(self) -> None:
        self.statements = []
        self.plan = None

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
        width = max((len(f.name) for f in node.schema), default=0)
        lines = [f"{node.name}:"]
        lines += [f"  {f.name.ljust(width)}  {f.type}" for f in node.schema]
        return "\n".join(lines)

    def _unknown(self, name: str) -> str:
        known = ", ".join(self.node_names()) or "none yet"
        return f"unknown stream or source '{name}' (known: {known})"

    def render_code(self, job_folder: str | None = None) -> str:
        plan = self.plan or self.check([])
        return lower_plan(plan, job_folder=job_folder or str(self.folder))

    # ---- :show
    def show_job(self, name: str, rows: int, job_folder: str) -> str:
        """The BATCH job that prints `rows` rows of `name` on the console (the session's own
        SINK statements are left out, so :show never writes anything)."""
        node = self.find_node(name)
        if node is None:
            raise LookupError(self._unknown(name))
        kept = [s for s in self.statements if statement_kind(s) != "SINK"]
        kept.append(f"SINK {quote_name(node.name)} TO CONSOLE OPTIONS (numRows = '{int(rows)}', truncate = 'false')")
        plan = self.check(kept, require_sink=True, mode="BATCH")
        return lower_plan(plan, job_folder=job_folder)

    def show(self, name: str, rows: int = 10) -> None:
        """Run the pipeline up to `name` in this process and print `rows` rows; the Spark session
        is created on first use and reused (the job calls getOrCreate)."""
        with tempfile.TemporaryDirectory(prefix="dslc-repl-") as folder:
            job = Path(folder) / "repl_show_job.py"
            job.write_text(self.show_job(name, rows, folder))
            saved = os.environ.get("DSLC_FLOW_FOLDER")
            os.environ["DSLC_FLOW_FOLDER"] = str(self.folder.resolve())
            try:
                runpy.run_path(str(job), run_name="__main__")
            finally:
                if saved is None:
                    os.environ.pop("DSLC_FLOW_FOLDER", None)
                else:
                    os.environ["DSLC_FLOW_FOLDER"] = saved
