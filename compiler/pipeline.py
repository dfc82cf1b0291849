"""The compiler's stages as one pure function each: read → parse → plan (→ optimise → lower)."""
from __future__ import annotations

from pathlib import Path

from .diagnostics import CompileError
from .parser import parse
from .plan import Plan
from .planner import to_plan
from .source import SourceFile


def check_file(path: str | Path) -> Plan:
    """Parse and check a .flow file; raise CompileError listing every problem."""
    source = SourceFile.read(path)
    return to_plan(parse(source), source)


def check_text(text: str, path: str = "<input>", *, require_sink: bool = True) -> Plan:
    """Parse and check program text (the REPL, tests)."""
    source = SourceFile(path, text)
    return to_plan(parse(source), source, require_sink=require_sink)


__all__ = ["check_file", "check_text", "CompileError"]


def compile_file(path: str | Path, *, job_folder: str, mode: str | None = None, trigger: str | None = None,
                 chaining: bool = True, pushdown: bool = True) -> str:
    """The PySpark job for a .flow file: check, optimise, lower."""
    from .codegen import Target, lower
    from .optimizer import Options, optimize

    source = SourceFile.read(path)
    plan = to_plan(parse(source), source, mode=mode.upper() if mode else None)
    physical = optimize(plan, Options(chaining=chaining, pushdown=pushdown))
    return lower(physical, Target(job_folder=job_folder, trigger=trigger))
