"""2. Chaining: three Python operators in a row, fused into one mapInArrow pass or one pass each.

The pipeline (ENRICH WITH PYTHON async -> PROCESS -> PROCESS, then a GROUP BY) is compiled twice
from the same .flow, with the compiler's chaining option on and off (`dslc compile
--no-chaining`), and run on the same input.
"""
from __future__ import annotations

import random
import shutil
import statistics
import time
from pathlib import Path

from .common import Context, run_flow, write_input
from .report import Section, Table, Target, ratio

FLOW = """\
SOURCE readings FROM PARQUET 'input/' SCHEMA (device STRING, value DOUBLE);
STREAM scored = ENRICH readings WITH PYTHON 'chaining_udfs:score' RETURNS (score DOUBLE)
  ASYNC ORDERED CAPACITY 100;
STREAM labelled = PROCESS scored USING PYTHON 'chaining_udfs:label'
  RETURNS (device STRING, value DOUBLE, score DOUBLE, label STRING);
STREAM high = PROCESS labelled USING PYTHON 'chaining_udfs:over' RETURNS (device STRING, over BOOLEAN);
STREAM per_device = SELECT device, count(*) AS n FROM high GROUP BY device;
SINK per_device TO PARQUET 'out/' MODE OVERWRITE;
"""
ROWS = 1_000_000
WARMUP_ROWS = 20_000


def prepare(folder: Path, rows: int) -> Path:
    """The pipeline and its input of `rows` readings in `folder`; returns the .flow file."""
    rng = random.Random(6)
    write_input(folder / "input", {"device": [f"d{i % 100}" for i in range(rows)],
                                   "value": [rng.uniform(0.0, 100.0) for _ in range(rows)]})
    shutil.copy(Path(__file__).with_name("chaining_udfs.py"), folder / "chaining_udfs.py")
    flow = folder / "pipeline.flow"
    flow.write_text(FLOW)
    return flow


def run(ctx: Context) -> Section:
    started = time.perf_counter()
    rows = ROWS * (3 if ctx.full else 1)
    repeats = 5
    warm = prepare(ctx.folder("chaining-warmup"), WARMUP_ROWS)
    for chaining in (True, False):
        run_flow(warm, chaining=chaining)
    flow = prepare(ctx.folder("chaining"), rows)
    runs: dict[bool, list[float]] = {}
    for _ in range(repeats):
        for chaining in (False, True):
            result = run_flow(flow, chaining=chaining)
            passes = result.job.count("chains.run_chain(")
            if passes != (1 if chaining else 3):
                raise RuntimeError(f"chaining={chaining}: {passes} mapInArrow passes in the job")
            if any(m["elements_in"] != rows for name, m in result.metrics.items() if name == "scored"):
                raise RuntimeError(f"chaining={chaining}: not every row reached the ENRICH")
            runs.setdefault(chaining, []).append(result.seconds)
    seconds = {chaining: statistics.median(values) for chaining, values in runs.items()}
    table = Table(["plan", "mapInArrow passes", "rows", "seconds (median)", "the runs", "rows/s", "speedup"])
    for chaining, label, passes in ((False, "unfused (`--no-chaining`)", 3), (True, "fused (default)", 1)):
        table.add(label, passes, rows, f"{seconds[chaining]:.1f}", " / ".join(f"{s:.1f}" for s in runs[chaining]),
                  f"{rows / seconds[chaining]:.0f}", ratio(seconds[False], seconds[chaining]))
    speedup = seconds[False] / seconds[True]
    section = Section(
        "2. Chaining",
        f"""\
`ENRICH readings WITH PYTHON` (async, answers at once) -> `PROCESS` -> `PROCESS` -> `GROUP BY`, on {rows:,}
rows of (device, value) in 2 partitions; the same .flow compiled with chaining on (one `mapInArrow`)
and off (one per operator: Arrow -> Python -> Arrow between every two operators); wall time of the
job, the two plans interleaved, median of {repeats}.""",
        tables=[table],
        targets=[Target(f"fused >= 1.5x faster than unfused on {rows:,} rows", f"{speedup:.2f}x", speedup >= 1.5)],
    )
    section.seconds = time.perf_counter() - started
    return section
