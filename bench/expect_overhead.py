"""18. EXPECT: what five constraints cost on a chain of 1,000,000 rows.

Section 2's chain (ENRICH WITH PYTHON answering at once -> PROCESS -> PROCESS, then a GROUP BY)
is run four ways from the same input: without EXPECT; with an EXPECT of five constraints on the
chain's output (`labelled`, read by a query: the constraints run as Spark expressions on the
chain's output, in the same stage); and with the same five constraints on `scored`, an ENRICH in
the middle of the chain (they run inside the chain's Python pass, between two operators), judged
per batch with pyarrow.compute, and once more per row with their Python forms alone. The
constraints are WARN, so the four jobs compute the same rows and the difference is the judging
and the counting. The four are interleaved, median of N; the ratio is against the job without.

    .venv/bin/python -m bench --only expect
"""
from __future__ import annotations

import contextlib
import random
import shutil
import statistics
import time
from collections.abc import Iterator
from pathlib import Path

from dslc.compiler.plan import expect_arrow
from dslc.compiler.plan.expect_python import Translation

from .common import Context, run_flow, write_input
from .report import Section, Table, Target

FLOW = """\
SOURCE readings FROM PARQUET 'input/' SCHEMA (device STRING, value DOUBLE);
STREAM scored = ENRICH readings WITH PYTHON 'chaining_udfs:score' RETURNS (score DOUBLE)
  ASYNC ORDERED CAPACITY 100;
STREAM labelled = PROCESS scored USING PYTHON 'chaining_udfs:label'
  RETURNS (device STRING, value DOUBLE, score DOUBLE, label STRING);
STREAM per_device = SELECT device, label, count(*) AS n FROM labelled GROUP BY device, label;
SINK per_device TO PARQUET 'out/' MODE OVERWRITE;
{expect}"""
CONSTRAINTS = """EXPECT ON {on}
  CONSTRAINT has_device CHECK (device IS NOT NULL)
  CONSTRAINT known_device CHECK (device LIKE 'd%')
  CONSTRAINT value_range CHECK (value BETWEEN 0 AND 100)
  CONSTRAINT score_positive CHECK (score >= 0)
  CONSTRAINT score_bound CHECK (score <= 2 * 100.0);
"""
INSIDE, PER_ROW = "5 constraints inside the chain (Python, per batch)", "5 constraints inside the chain (Python, per row)"
VARIANTS = {"without EXPECT": "", "5 constraints on the chain's output (Spark)": CONSTRAINTS.format(on="labelled"),
            INSIDE: CONSTRAINTS.format(on="scored"), PER_ROW: CONSTRAINTS.format(on="scored")}
ROWS = 1_000_000
WARMUP_ROWS = 20_000


def prepare(folder: Path, rows: int) -> dict[str, Path]:
    """The input and one .flow per variant in `folder`."""
    rng = random.Random(17)
    write_input(folder / "input", {"device": [f"d{i % 100}" for i in range(rows)],
                                   "value": [rng.uniform(0.0, 100.0) for _ in range(rows)]})
    shutil.copy(Path(__file__).with_name("chaining_udfs.py"), folder / "chaining_udfs.py")
    flows = {}
    for number, (name, expect) in enumerate(VARIANTS.items()):
        flow = folder / f"pipeline{number}.flow"
        flow.write_text(FLOW.format(expect=expect))
        flows[name] = flow
    return flows


def _check(name: str, job: str) -> None:
    """The job is what the variant says: one mapInArrow pass, the EXPECT where it should run."""
    if job.count("chains.run_chain(") != 1:
        raise RuntimeError(f"{name}: the chain is not one mapInArrow pass")
    if "(Spark)" in name and "expectations.check(labelled" not in job:
        raise RuntimeError(f"{name}: the EXPECT does not run in Spark on the chain's output")
    if "(Python" in name and "C.Expect(" not in job.split("metrics=metrics")[0]:
        raise RuntimeError(f"{name}: the EXPECT does not run inside the chain")
    if "(Python" in name and (name == INSIDE) != ("arrow=" in job):
        raise RuntimeError(f"{name}: the constraints are not judged as the variant says")


@contextlib.contextmanager
def _per_row(name: str) -> Iterator[None]:
    """The per-row variant compiles without Arrow forms (as before they existed): every
    constraint inside the chain is judged row by row by its Python form."""
    if name != PER_ROW:
        yield
        return
    original = expect_arrow.translate
    expect_arrow.translate = lambda condition, columns: Translation(None, "switched off by the benchmark")
    try:
        yield
    finally:
        expect_arrow.translate = original


def _timed(name: str, flow: Path):
    with _per_row(name):
        return run_flow(flow)


def run(ctx: Context) -> Section:
    started = time.perf_counter()
    rows = ROWS * (3 if ctx.full else 1)
    repeats = 5
    for name, flow in prepare(ctx.folder("expect-warmup"), WARMUP_ROWS).items():
        _timed(name, flow)
    flows = prepare(ctx.folder("expect"), rows)
    runs: dict[str, list[float]] = {name: [] for name in flows}
    for _ in range(repeats):
        for name, flow in flows.items():
            result = _timed(name, flow)
            _check(name, result.job)
            runs[name].append(result.seconds)
    seconds = {name: statistics.median(values) for name, values in runs.items()}
    base = seconds["without EXPECT"]
    table = Table(["job", "rows", "seconds (median)", "the runs", "rows/s", "time against without"])
    for name in flows:
        table.add(name, rows, f"{seconds[name]:.2f}", " / ".join(f"{s:.2f}" for s in runs[name]),
                  f"{rows / seconds[name]:.0f}", f"{seconds[name] / base:.3f}x")
    spark_cost = seconds["5 constraints on the chain's output (Spark)"] / base - 1
    python_cost = seconds[INSIDE] / base - 1
    per_row_cost = seconds[PER_ROW] / base - 1
    section = Section(
        "18. EXPECT: five constraints on a 1,000,000-row chain",
        f"""\
Section 2's chain (`ENRICH WITH PYTHON` -> `PROCESS`, then `GROUP BY`) on {rows:,} rows of (device,
value) in 2 partitions, without EXPECT, with five WARN constraints (IS NOT NULL, LIKE, BETWEEN, two
comparisons) on the chain's output (Spark expressions in the chain's stage, counted by one
observation), and with the same five on the ENRICH inside the chain (its Python pass, between the
two operators), judged per batch of rows with pyarrow.compute and, as before that, per row with
their Python forms; the same rows come out of all four. Wall time of the job, the four interleaved,
median of {repeats}.""",
        tables=[table],
        targets=[Target("5 constraints on the chain's output cost <= 5% of the job without them",
                        f"{spark_cost:+.1%}", spark_cost <= 0.05),
                 Target("5 constraints inside the chain's pass cost <= 5% of the job without them",
                        f"{python_cost:+.1%}", python_cost <= 0.05)],
        notes=[f"inside the chain's Python pass judged per row (the Python forms alone): {per_row_cost:+.1%}"],
    )
    section.seconds = time.perf_counter() - started
    return section
