"""19. PROVENANCE: what `PROVENANCE AS how` costs a live run and a warm rerun.

Two workloads, each run with and without `PROVENANCE AS how` on its ENRICH (the rest of the
.flow the same), interleaved (the live pair warmed up first, then 9 rounds with --full; the warm
rerun 3), as the ratio of the medians of the job's wall time with the clause and without it:

- live: section 1's workload, `ENRICH WITH HTTP GET` against the bench service's 20 ms endpoint,
  UNORDERED CAPACITY 100, every row a call;
- warm rerun: a STORE'd ENRICH whose every answer is already in the answer store (a key for
  every 4 rows, stored by the job with PROVENANCE, so each carries its note), so the job is the
  pass alone: both variants find the stored answers in the chain's Python pass
  (runtime/spark/stored_join.py); with PROVENANCE the driver also makes each answer's struct from
  its note (runtime/spark/stored_provenance.py);
- the warm rerun's floor: the job without the clause whose sink also writes a struct of the same
  nine fields made by Spark (values shaped like the real ones, or constants): what writing the
  struct costs at all, which no way of making it can save;
- where a live row's time goes: the CPU per row of the operator alone, no Spark (an ENRICH WITH
  PYTHON answering at once, as bench.chain_cpu drives it), with and without the clause.

    .venv/bin/python -m bench --only provenance
"""
from __future__ import annotations

import random
import shutil
import statistics
import time
from pathlib import Path

import pyarrow as pa

from .chain_cpu import cpu_per_row
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
{sink}
"""
SINK = "SINK enriched TO PARQUET 'out/' MODE OVERWRITE;"
#: the floor: the warm rerun without PROVENANCE, writing a struct of the same fields made by Spark
#: after it, with values of the same shapes (a distinct sha256, URL and time per key), or constants
FLOOR = """\
STREAM floored = SELECT *, named_struct('source', 'store', 'operator', 'enriched', 'line', 3,
  'key', {key}, 'attempts', 0, 'latency_ms', CAST(NULL AS DOUBLE),
  'answered_at', timestamp_micros({at}), 'status', 200, 'url', {url}) AS how FROM enriched;
SINK floored TO PARQUET 'out/' MODE OVERWRITE;"""


def _floors(prefix: str) -> dict[str, str]:
    """The floor's two sinks, the struct's URL under `prefix` (the service's, without the key)."""
    return {"without, writing an equal struct made by Spark": FLOOR.format(
                key="sha2(customer_id, 256)", at="1795867916585763 + abs(hash(customer_id)) % 1000000000",
                url=f"concat('{prefix}', customer_id)"),
            "without, writing a constant struct": FLOOR.format(
                key="sha2('c0', 256)", at="1795867916585763", url=f"'{prefix}c0'")}
CLAUSE = " PROVENANCE AS how"
GOAL = 0.03
REPEATS = 3
LIVE_REPEATS = {True: 9, False: 5}     # --full, quick: the live pairs spread most
CPU_ROWS = 100_000


def _pair(folder: Path, text: str, floors: dict[str, str] | None = None, **values: str) -> dict[str, Path]:
    """The same .flow without and with the clause (and each of `floors`: without it, another
    sink), each in a folder of its own beside `folder`'s input."""
    variants = {"without": ("", SINK), "with PROVENANCE": (CLAUSE, SINK),
                **{name: ("", sink) for name, sink in (floors or {}).items()}}
    flows = {}
    for shown, (provenance, sink) in variants.items():
        flow = folder / f"v{len(flows)}" / "pipeline.flow"
        flow.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(folder / "input", flow.parent / "input", dirs_exist_ok=True)
        flow.write_text(text.format(provenance=provenance, sink=sink, **values))
        flows[shown] = flow
    return flows


def _timed(flows: dict[str, Path], repeats: int = REPEATS, warm_up: bool = False) -> dict[str, list[float]]:
    """Each flow run `repeats` times, interleaved (after one untimed run of each if `warm_up`); the
    wall times (the written rows checked)."""
    for flow in flows.values() if warm_up else ():
        run_flow(flow)
    times: dict[str, list[float]] = {name: [] for name in flows}
    for _ in range(repeats):
        for name, flow in flows.items():
            result = run_flow(flow)
            if (CLAUSE in flow.read_text()) != ("provenance='how'" in result.job):
                raise RuntimeError(f"{name}: the job is not what the variant says")
            times[name].append(result.seconds)
    return times


def _cpu_per_row(provenance: bool) -> float:
    """µs of CPU per row of one ENRICH WITH PYTHON answering at once (bench/chaining_udfs.py's
    `score`), alone in a chain driven as mapInArrow drives it, with or without PROVENANCE: the best
    of 3 passes over CPU_ROWS rows in batches of 10,000 (process time: the worker loop's thread
    counts)."""
    from dslc.runtime import config as C
    from dslc.runtime.schema.provenance import added

    call = C.PythonCall(ref="chaining_udfs:score", search_path=(str(Path(__file__).parent),))
    inputs = (C.Column("device", "STRING"), C.Column("value", "DOUBLE"))
    returns = (C.Column("score", "DOUBLE"),)
    operator = C.Enrich(name="scored", line=2, call=call, returns=returns, key_columns=("device",),
                        provenance="how" if provenance else None)
    chain = C.Chain(name="chain#1", operators=(operator,), input_columns=inputs,
                    output_columns=inputs + added(operator), watermark=None, batch_size=1024)
    rng = random.Random(6)
    batch = pa.RecordBatch.from_pylist([{"device": f"d{i % 100}", "value": rng.uniform(0.0, 100.0)}
                                        for i in range(10_000)],
                                       schema=pa.schema([("device", pa.string()), ("value", pa.float64())]))
    return cpu_per_row(chain, batch, CPU_ROWS, passes=3)


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
    # every variant reads one store, filled once (the operator's name and keys are the same)
    url = ctx.service.url("instant", "{customer_id}")
    warm_flows = _pair(warm, WARM, _floors(url.removesuffix("{customer_id}")), answers=str(warm / "answers.db"),
                       url=url)
    run_flow(warm_flows["with PROVENANCE"])     # its answers carry their notes, as a real rerun's do
    table = Table(["workload", "rows", "without (s, median)", "with PROVENANCE (s, median)", "the runs",
                   "time against without"])
    floors = Table(["warm rerun variant", "s (median)", "the runs", "time against without", "output (MB)"])
    overhead: dict[str, float] = {}
    for workload, rows, flows in (("live: HTTP 20 ms, CAPACITY 100", live_rows, live_flows),
                                  ("warm rerun: every answer stored", warm_rows, warm_flows)):
        times = _timed(flows, LIVE_REPEATS[ctx.full], warm_up=True) if flows is live_flows else _timed(flows)
        base, with_clause = statistics.median(times["without"]), statistics.median(times["with PROVENANCE"])
        overhead[workload] = with_clause / base - 1
        table.add(workload, f"{rows:,}", f"{base:.2f}", f"{with_clause:.2f}",
                  " / ".join(f"{a:.1f}-{b:.1f}" for a, b in zip(times["without"], times["with PROVENANCE"])),
                  f"{with_clause / base:.3f}x")
        if flows is warm_flows:
            for name, runs in times.items():
                written = sum(p.stat().st_size for p in (flows[name].parent / "out").glob("*.parquet"))
                floors.add(name, f"{statistics.median(runs):.2f}", " / ".join(f"{t:.1f}" for t in runs),
                           f"{statistics.median(runs) / base:.3f}x", f"{written / 1e6:.1f}")
    cpu: dict[str, list[float]] = {"without": [], "with PROVENANCE": []}
    for _ in range(3):                           # interleaved; the best of each
        for name in cpu:
            cpu[name].append(_cpu_per_row(name != "without"))
    per_row = Table(["operator alone (ENRICH WITH PYTHON answering at once, no Spark)", "CPU per row (µs, best)",
                     "against without"])
    for name, runs in cpu.items():
        per_row.add(name, f"{min(runs):.1f}", f"{min(runs) / min(cpu['without']):.2f}x")
    section = Section(
        "19. PROVENANCE: a live run and a warm rerun",
        "The same job with and without `PROVENANCE AS how` on its ENRICH, interleaved: a live run of "
        f"{live_rows:,} rows against the bench service's 20 ms endpoint at CAPACITY 100 (each variant run "
        f"once untimed, then {LIVE_REPEATS[ctx.full]} rounds), and a warm rerun (median of {REPEATS}) of "
        f"{warm_rows:,} rows whose every answer is stored (the pass alone). The "
        "warm rerun's floor, interleaved with it: the job without PROVENANCE whose sink also writes a struct "
        "of the same nine fields made by Spark after the chain, of values shaped like the real ones (a "
        "distinct sha256, URL and time per key) or constant.",
        tables=[table, floors, per_row],
        targets=[Target(f"PROVENANCE costs <= {GOAL:.0%} of the {name.split(':')[0]} run", f"{cost:+.1%}",
                        cost <= GOAL) for name, cost in overhead.items()],
        notes=["The warm rerun's physical plan (explain) is the same with and without PROVENANCE on a local "
               "master: the scan feeds one MapInArrow pass, no Spark join; the pass finds each row's answer "
               "in the Arrow file the driver wrote (stored_join.py), its struct a column of that file made "
               "once per answer (a key for every 4 rows) on the driver from its note (stored_provenance.py): "
               "no UDF, no note read per row. With `spark.dslc.store.join = spark` it is one "
               "BroadcastHashJoin on the request column that brings the RETURNS columns and the struct "
               "together (the same plan without the struct).",
               "The floor rows say what writing such a struct costs at all: nine fields a row, the key "
               "hash, URL and time distinct per answer (they hardly compress: the output column). The "
               "<= 3% goal is below that floor on a warm rerun, whose pass does little else.",
               "On a live run the calls do not hide it on this 2-core machine: the job is CPU-bound (the "
               "Python workers' HTTP clients, the service, the JVM share two cores), so the CPU the operator "
               "spends per row on the struct shows in the wall time. The last table is that CPU: the "
               "struct is made per row in the operator's loop when the element resolves (the request "
               "key's text and its SHA-256, the latency and the answer's time, the fields the answer's note "
               "gives) and converted to Arrow with the row. Measured inside the loop (2026-11-28, by "
               "hand, before one JSON encoder served every request key): about 21 µs of a row's struct is "
               "the stamp (the request key's text 12, its hash 3, the two times 4), 2 µs the struct's "
               "conversion."])
    section.seconds = time.perf_counter() - started
    return section
