"""10. STREAMING MATCH: the pinned snapshot looked up by the condition's equality keys, against
the scan of every entry it replaced (runtime/spark/state.py).

The same job twice on the same input: as compiled (`keys=(('customer', 'customer'),)` passed to
`state.match_stream`), then with that line removed, which is the scan (every row paired with every
entry, then Spark's filter). Both must write the same rows.
"""
from __future__ import annotations

import json
import os
import random
import runpy
import time
from pathlib import Path

from dslc.compiler.pipeline import compile_file

from .common import Context, write_input
from .report import Section, Table, Target, ratio

FLOW = """\
PIPELINE limits MODE STREAMING CHECKPOINT 'chk' TRIGGER AVAILABLE NOW;
SOURCE events FROM PARQUET 'input/' SCHEMA (id STRING, customer STRING, amount DOUBLE);
SOURCE rule_updates FROM JSON 'rules/' SCHEMA (customer STRING, max_amount DOUBLE);
BROADCAST rules FROM rule_updates KEY customer;
STREAM over = MATCH events AGAINST rules AS r WHERE events.customer = r.customer AND events.amount > r.max_amount;
SINK over TO PARQUET 'out';
"""
RULES = 1_000
ROWS = 5_000


def prepare(folder: Path, rows: int) -> Path:
    rng = random.Random(7)
    write_input(folder / "input", {"id": [f"e{i}" for i in range(rows)],
                                   "customer": [f"c{rng.randrange(RULES)}" for _ in range(rows)],
                                   "amount": [rng.uniform(0, 100) for _ in range(rows)]})
    (folder / "rules").mkdir(parents=True, exist_ok=True)
    (folder / "rules" / "1.json").write_text("".join(json.dumps({"customer": f"c{i}", "max_amount": 50.0}) + "\n"
                                                      for i in range(RULES)))
    flow = folder / "pipeline.flow"
    flow.write_text(FLOW)
    return flow


def run_job(flow: Path, scan: bool) -> float:
    code = compile_file(flow, job_folder=str(flow.parent))
    if scan:
        code = "\n".join(line for line in code.splitlines() if not line.strip().startswith("keys=(")) + "\n"
    job = flow.with_name("job.py")
    job.write_text(code)
    os.environ.pop("DSLC_FLOW_FOLDER", None)
    started = time.perf_counter()
    runpy.run_path(str(job), run_name="__main__")
    return time.perf_counter() - started


def run(ctx: Context) -> Section:
    started = time.perf_counter()
    rows = ROWS * (4 if ctx.full else 1)
    results: dict[str, tuple[float, int]] = {}
    for name, scan in (("scan (every entry)", True), ("lookup by equality keys", False)):
        folder = ctx.folder(name.split()[0])
        seconds = run_job(prepare(folder, rows), scan)
        results[name] = (seconds, ctx.spark.read.parquet(str(folder / "out")).count())
    (scan_s, scan_rows), (index_s, index_rows) = results.values()
    if scan_rows != index_rows:
        raise RuntimeError(f"the two jobs wrote different rows: {scan_rows} vs {index_rows}")
    table = Table(["MATCH in STREAMING", "rows", "entries", "pairs made", "rows out", "seconds", "speed-up"])
    table.add("scan (every entry)", rows, RULES, rows * RULES, scan_rows, f"{scan_s:.1f}", "1.00x")
    table.add("lookup by equality keys", rows, RULES, rows, index_rows, f"{index_s:.1f}", ratio(scan_s, index_s))
    section = Section(
        "10. STREAMING MATCH: equality index against scan",
        f"""\
{rows:,} events against {RULES:,} rules (one per customer) in one AVAILABLE NOW run, condition
`events.customer = r.customer AND events.amount > r.max_amount`. The scan pairs every row with
every entry and lets Spark filter; the lookup pairs a row only with its customer's entries (a dict
built per task). Seconds are the whole job (rules query, data query, parquet sink); the scan runs
first, so its time also includes starting the Python workers.""",
        tables=[table],
        targets=[Target("same rows; lookup faster than scan at 1k entries", ratio(scan_s, index_s),
                        scan_rows == index_rows and index_s < scan_s)],
    )
    section.seconds = time.perf_counter() - started
    return section
