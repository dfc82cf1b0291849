"""The compiler's stages as one pure function each: read → parse → plan → optimise → lower."""
from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from dslc.compiler.diagnostics import CompileError
from dslc.compiler.frontend.parser import parse
from dslc.compiler.plan.logical import Plan
from dslc.compiler.plan.planner import to_partial_plan, to_plan
from dslc.compiler.source import SourceFile


def check_source(source: SourceFile, *, require_sink: bool = True, mode: str | None = None) -> Plan:
    """Parse and check source text; raise CompileError listing every problem.
    `mode` ('batch'/'streaming', any case) overrides the PIPELINE's MODE."""
    with collector_paused():       # a 1,000-statement file must not cost more than 10x a 100-statement one
        return to_plan(parse(source), source, require_sink=require_sink, mode=mode.upper() if mode else None)


def check_partial(source: SourceFile, mode: str | None = None) -> tuple[Plan, list]:
    """The plan of the statements that check and the problems of the others (syntax errors
    still raise CompileError: without a parse there is no statement to go on with)."""
    with collector_paused():
        return to_partial_plan(parse(source), source, mode=mode.upper() if mode else None)


def check_file(path: str | Path) -> Plan:
    """Parse and check a .flow file."""
    return check_source(SourceFile.read(path))


def check_text(text: str, path: str = "<input>", *, require_sink: bool = True) -> Plan:
    """Parse and check program text (the REPL, tests)."""
    return check_source(SourceFile(path, text), require_sink=require_sink)


def lower_plan(plan: Plan, *, job_folder: str, trigger: str | None = None,
               chaining: bool = True, pushdown: bool = True, writes: bool = True, estimate: bool = False,
               row_limits: tuple[tuple[str, int], ...] = ()) -> str:
    """Optimise a checked plan and generate its PySpark job.

    `writes=False` (BATCH only) gives a job that writes nothing: its main() returns a
    `dslc.runtime.spark.capture.Captured` holding each SINK's DataFrame and each ENRICH's dead
    letters; with `estimate` too, its chains call nothing and record the rows reaching each
    ENRICH (`dslc explain --estimate`). `row_limits` ((operator, n), ...) lets at most n rows
    reach that ENRICH/PROCESS; `dslc.compiler.plan.subset` says which plan and limit show one
    relation."""
    from dslc.compiler.codegen.lower import Target, lower
    from dslc.compiler.optimizer.optimize import Options, optimize

    physical = optimize(plan, Options(chaining=chaining, pushdown=pushdown))
    return lower(physical, Target(job_folder=job_folder, trigger=trigger, writes=writes, estimate=estimate,
                                     row_limits=row_limits))


def compile_file(path: str | Path, *, job_folder: str, mode: str | None = None, trigger: str | None = None,
                 chaining: bool = True, pushdown: bool = True) -> str:
    """The PySpark job for a .flow file: check, optimise, lower."""
    with collector_paused():
        plan = check_source(SourceFile.read(path), mode=mode)
        return lower_plan(plan, job_folder=job_folder, trigger=trigger, chaining=chaining, pushdown=pushdown)


@contextmanager
def collector_paused() -> Iterator[None]:
    """Few cyclic garbage collections during one compile (as mypy and other compilers do): each
    full pass walks every syntax tree still alive, so with the default thresholds a long pipeline
    compiles in superlinear time. Young collections still run (every 10,000 allocations) and free
    each statement's dropped trees (sqlglot's trees are cycles: a node knows its parent), which
    keeps the heap small; turning the collector off instead kept all of them and was slower on a
    1,000-statement file. The thresholds are restored right after."""
    thresholds = gc.get_threshold()
    gc.set_threshold(10_000, 10, 100)
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)


__all__ = ["check_file", "check_source", "check_text", "compile_file", "lower_plan", "CompileError"]
