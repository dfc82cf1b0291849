"""4. Compiler: `dslc compile` time of generated pipelines of 10, 100 and 1,000 statements.

A generated pipeline is one SOURCE, then SELECT (filter and projection), ENRICH WITH HTTP and
PROCESS WITH PYTHON in turn, each reading the one before, and a SINK closing each branch. The
schema stays the same width, so every statement is the same amount of work and the time should
grow linearly. Timed in-process: `compile_file` (parse, check with sqlglot, plan, optimise,
generate), best of a few repeats.
"""
from __future__ import annotations

import cProfile
import pstats
import time
import traceback
from collections import Counter
from pathlib import Path

from dslc.compiler.pipeline import compile_file

from .common import Context
from .report import Section, Table, Target, ratio

SIZES = (10, 100, 1000)
BRANCH_DEPTH = 9
UDFS = "def passthrough(row):\n    return row\n"


def _operator(i: int, name: str, previous: str) -> str:
    kind = i % 3
    if kind == 1:
        return f"STREAM {name} = SELECT id, amount, country FROM {previous} WHERE amount > {i};"
    if kind == 2:
        return (f"STREAM {name} = ENRICH {previous} WITH HTTP GET 'http://127.0.0.1:9/c/{{id}}' "
                f"RETURNS (tier{i} STRING) ASYNC UNORDERED CAPACITY 10 TIMEOUT 1s;")
    return (f"STREAM {name} = PROCESS {previous} USING PYTHON 'udfs:passthrough' "
            "RETURNS (id STRING, amount DOUBLE, country STRING);")


def generate(statements: int, depth: int | None = None) -> str:
    """A valid pipeline of exactly `statements` statements (at least 2): one SOURCE, then branches
    of at most `depth` operators read from it (None: one branch), each ending in a SINK."""
    if statements < 2:
        raise ValueError("a generated pipeline needs at least 2 statements")
    lines = ["SOURCE s0 FROM PARQUET 'in/' SCHEMA (id STRING, amount DOUBLE, country STRING);"]
    budget, i, branch = statements - 1, 0, 0
    while budget:
        operators = budget - 1 if depth is None else min(depth, budget - 1)
        previous = "s0"
        for _ in range(operators):
            i += 1
            lines.append(_operator(i, f"s{i}", previous))
            previous = f"s{i}"
        branch += 1
        lines.append(f"SINK {previous} TO PARQUET 'out/{branch}/' MODE OVERWRITE;")
        budget -= operators + 1
    return "\n".join(lines) + "\n"


def _flow(folder: Path, statements: int, depth: int | None) -> Path:
    flow = folder / f"pipeline_{statements}_{depth}.flow"
    flow.write_text(generate(statements, depth))
    (folder / "udfs.py").write_text(UDFS)
    return flow


def compile_seconds(folder: Path, statements: int, depth: int | None, repeats: int) -> float | str:
    """Best wall time of compiling a generated pipeline, or the error it fails with."""
    flow = _flow(folder, statements, depth)
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        try:
            compile_file(flow, job_folder=str(folder))
        except RecursionError as exc:
            frames = Counter((Path(f.filename).name, f.name) for f in traceback.extract_tb(exc.__traceback__))
            (file, function), _ = frames.most_common(1)[0]   # the function that recurses
            return f"RecursionError, recursing in {file}:{function}"
        best = min(best, time.perf_counter() - started)
    return best


def hot_spots(folder: Path, statements: int, depth: int | None, top: int = 5) -> str:
    """Where a compile spends its time: the compiler functions with the most cumulative time."""
    flow = _flow(folder, statements, depth)
    profiler = cProfile.Profile()
    profiler.runcall(compile_file, flow, job_folder=str(folder))
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    total = max(cumulative for (_, _, _, cumulative, _) in stats.values())
    ours = [(cumulative, f"{Path(file).parent.name}/{Path(file).name}:{line} {name}")
            for (file, line, name), (_, _, _, cumulative, _) in stats.items()
            if "/compiler/" in file and not file.endswith("pipeline.py") and name not in ("to_plan", "build", "_node")]
    return ", ".join(f"`{where}` {cumulative / total:.0%}" for cumulative, where in sorted(ours, reverse=True)[:top])


SHAPES = {"branches of <= 9 operators": BRANCH_DEPTH, "one lineage": None}


def run(ctx: Context, sizes: tuple[int, ...] = SIZES) -> Section:
    started = time.perf_counter()
    folder = ctx.folder("compiler")
    compile_seconds(folder, sizes[0], BRANCH_DEPTH, 1)   # imports, grammar
    results: dict[str, dict[int, float | str]] = {}
    for shape, depth in SHAPES.items():
        results[shape] = {n: compile_seconds(folder, n, depth, 5 if ctx.full or n <= 100 else 3) for n in sizes}
    table = Table(["statements"] + [f"{shape}: {what}" for shape in SHAPES for what in ("ms", "growth")])
    for index, n in enumerate(sizes):
        cells: list[str] = [f"{n:,}"]
        for shape in SHAPES:
            now, before = results[shape][n], results[shape][sizes[index - 1]] if index else None
            cells.append(f"{now * 1000:.0f}" if isinstance(now, float) else f"fails: {now}")
            cells.append(ratio(now, before, 1) + f" for {n // sizes[index - 1]}x"
                         if isinstance(now, float) and isinstance(before, float) else "-")
        table.add(*cells)
    section = Section(
        "4. Compiler scaling",
        """Generated pipelines: one SOURCE, then SELECT / ENRICH WITH HTTP / PROCESS in turn, each reading the
previous one, with a SINK closing each branch. Two shapes: branches of at most 9 operators read from
the SOURCE (a wide pipeline), and one lineage of n - 2 operators (a deep one). Compiled in-process
with `dslc.compiler.pipeline.compile_file` (parse, check, plan, optimise, generate); best of 5
(above 100 statements, best of 3 in a quick run).""",
        tables=[table],
    )
    if len(sizes) > 1:
        big, small = sizes[-1], sizes[-2]
        limit = big / small
        for shape in SHAPES:
            now, before = results[shape][big], results[shape][small]
            growth = now / before if isinstance(now, float) and isinstance(before, float) else None
            section.targets.append(Target(
                f"{shape}: {big:,} statements in under {limit:g}x the time of {small:,}",
                f"{growth:.1f}x" if growth is not None else f"fails ({now})",
                growth is not None and growth < limit))
            if growth is not None and growth >= limit:
                section.notes.append(f"{shape}, {big:,} statements, share of compile time (cProfile, cumulative): "
                                     + hot_spots(folder, big, SHAPES[shape]))
    section.seconds = time.perf_counter() - started
    return section
