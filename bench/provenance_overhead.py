"""19. PROVENANCE: what `PROVENANCE AS how` costs a live run and a warm rerun.

Two workloads, each run with and without `PROVENANCE AS how` on its ENRICH (the rest of the
.flow the same), interleaved, median of 3, as the ratio of the job's wall time with the clause to
the time without it:

- live: section 1's workload, `ENRICH WITH HTTP GET` against the bench service's 20 ms endpoint,
  UNORDERED CAPACITY 100, every row a call;
- warm rerun: a STORE'd ENRICH whose every answer is already in the answer store (a key for
  every 4 rows, stored by the job with PROVENANCE, so each carries its note), so the job is the
  pass alone: both variants match the stored answers before the operator
  (runtime/spark/stored_join.py); with PROVENANCE the driver also makes each answer's struct from
  its note (runtime/spark/stored_provenance.py).

    .venv/bin/python -m bench --only provenance
"""
from __future__ import annotations

import shutil
import statistics
import time
from pathlib import Path

from .common import Context, run_flow, write_input
from .report import Section, Table, Target

LIVE = """\
PIPELINE provenance_live MODE BATCH;
SOURCE keys FROM PARQUET 'input/' SCHEMA (id STRING);
STREAM enriched = ENRICH keys WITH HTTP GET '{url}' RETURNS (value STRING)
  ASYNC UNORDERED CAPACITY 100 TIMEOUT 30s{provenance};
SINK enriched TO PARQUET 'out/' MODE OVERWRITE;
"""
WARM = """\
PIPELINE provenance_warm MODE BATCH ANSWERS '{answers}';
SOURCE events FROM PARQUET 'input/' SCHEMA (event_id STRING, customer_id STRING);
STREAM enriched = ENRICH events WITH HTTP GET '{url}'
  RETURNS (value STRING) ASYNC UNORDERED CAPACITY 100 TIMEOUT 30s STORE{provenance};
SINK enriched TO PARQUET 'out/' MODE OVERWRITE;
"""
CLAUSE = " PROVENANCE AS how"
GOAL = 0.03
REPEATS = 3


def _pair(folder: Path, text: str, **values: str) -> dict[str, Path]:
    """The same .flow without and with the clause, each in a folder of its own beside `folder`'s input."""
    flows = {}
    for name, provenance in (("without", ""), ("with PROVENANCE", CLAUSE)):
        flow = folder / name.split()[0] / "pipeline.flow"
        flow.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(folder / "input", flow.parent / "input", dirs_exist_ok=True)
        flow.write_text(text.format(provenance=provenance, **values))
        flows[name] = flow
    return flows


def _timed(flows: dict[str, Path]) -> dict[str, list[float]]:
    """Each flow run REPEATS times, interleaved; the wall times (the written rows checked)."""
    times: dict[str, list[float]] = {name: [] for name in flows}
    for _ in range(REPEATS):
        for name, flow in flows.items():
            result = run_flow(flow)
            if (CLAUSE in flow.read_text()) != ("provenance='how'" in result.job):
                raise RuntimeError(f"{name}: the job is not what the variant says")
            times[name].append(result.seconds)
    return times


def run(ctx: Context) -> Section:
    started = time.perf_counter()
    live_rows = 40_000 if ctx.full else 10_000
    warm_rows = 1_000_000 if ctx.full else 200_000
    live = ctx.folder("provenance-live")
    write_input(live / "input", {"id": [f"k{i}" for i in range(live_rows)]})
    live_flows = _pair(live, LIVE, url=ctx.service.url("fixed"))
    warm = ctx.folder("provenance-warm")
    write_input(warm / "input", {"event_id": [f"e{i}" for i in range(warm_rows)],
                                 "customer_id": [f"c{i % (warm_rows // 4)}" for i in range(warm_rows)]})
    # both variants read one store, filled once (the operator's name and keys are the same)
    warm_flows = _pair(warm, WARM, answers=str(warm / "answers.db"), url=ctx.service.url("instant", "{customer_id}"))
    run_flow(warm_flows["with PROVENANCE"])     # its answers carry their notes, as a real rerun's do
    table = Table(["workload", "rows", "without (s, median)", "with PROVENANCE (s, median)", "the runs",
                   "time against without"])
    overhead: dict[str, float] = {}
    for workload, rows, flows in (("live: HTTP 20 ms, CAPACITY 100", live_rows, live_flows),
                                  ("warm rerun: every answer stored", warm_rows, warm_flows)):
        times = _timed(flows)
        base, with_clause = statistics.median(times["without"]), statistics.median(times["with PROVENANCE"])
        overhead[workload] = with_clause / base - 1
        table.add(workload, f"{rows:,}", f"{base:.2f}", f"{with_clause:.2f}",
                  " / ".join(f"{a:.1f}-{b:.1f}" for a, b in zip(times["without"], times["with PROVENANCE"])),
                  f"{with_clause / base:.3f}x")
    section = Section(
        "19. PROVENANCE: a live run and a warm rerun",
        "The same job with and without `PROVENANCE AS how` on its ENRICH, interleaved, median of "
        f"{REPEATS}: a live run of {live_rows:,} rows against the bench service's 20 ms endpoint at CAPACITY "
        f"100, and a warm rerun of {warm_rows:,} rows whose every answer is stored (the pass alone).",
        tables=[table],
        targets=[Target(f"PROVENANCE costs <= {GOAL:.0%} of the {name.split(':')[0]} run", f"{cost:+.1%}",
                        cost <= GOAL) for name, cost in overhead.items()],
        notes=["On the warm rerun both variants match the stored answers before the operator "
               "(stored_join.py); with PROVENANCE the driver also reads each answer's note and makes its "
               "struct once (stored_provenance.py), which is what its ratio measures."])
    section.seconds = time.perf_counter() - started
    return section
