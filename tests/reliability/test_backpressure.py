"""4. Back-pressure: with a service slower than the input, the input waits instead of piling up.

- HTTP: the real service counts concurrent requests per Spark task (the partition id is part of
  the URL) and never sees more than CAPACITY from one task, yet does see CAPACITY (the window
  is really used), and the runtime's metrics agree.
- 1M rows through a slow async Python ENRICH: every row comes out once, the function itself
  never has more than CAPACITY calls in flight, and the peak RSS of each Python worker (VmHWM
  from /proc/self/status, read by the user class when a task closes) grows by less than
  MEMORY_GROWTH_BOUND_MB over the worker's RSS when its first task opened, and stays under
  PEAK_RSS_BOUND_MB in all. Holding the
  half-million rows a worker handles would take several hundred MB.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from reliability_support import parquet_rows, run_flow, write_jsonl

pytestmark = [pytest.mark.spark]

CAPACITY = 6
HTTP_FLOW = """SOURCE items FROM JSON 'in/' SCHEMA (id STRING);
STREAM tagged = SELECT id, spark_partition_id() AS part FROM items;
STREAM enriched = ENRICH tagged WITH HTTP GET '{base}/svc/{{part}}/{{id}}' RETURNS (value STRING)
  ASYNC UNORDERED CAPACITY {capacity} TIMEOUT 10s;
SINK enriched TO PARQUET 'out' MODE OVERWRITE;
"""


@pytest.mark.slow
def test_http_in_flight_never_exceeds_capacity_per_task(spark, flaky, tmp_path):
    service = flaky(delay_ms=20)
    rows = [{"id": f"k{i:04d}"} for i in range(600)]
    write_jsonl(tmp_path / "in" / "a.json", rows[:300])
    write_jsonl(tmp_path / "in" / "b.json", rows[300:])
    flow = tmp_path / "pipeline.flow"
    flow.write_text(HTTP_FLOW.format(base=service.base, capacity=CAPACITY))
    run_flow(flow, metrics_file=tmp_path / "metrics.json")

    out = parquet_rows(tmp_path / "out")
    assert sorted(r["id"] for r in out) == [r["id"] for r in rows]
    parts = {p: m for p, m in service.part_max.items()}
    assert set(parts) == {"0", "1"}, parts                      # two tasks called
    assert max(parts.values()) <= CAPACITY, parts               # never more than CAPACITY per task
    assert min(parts.values()) >= CAPACITY - 1, parts           # and the window was really used
    assert service.max_in_flight <= 2 * CAPACITY
    metrics = json.loads((tmp_path / "metrics.json").read_text())["operators"]["enriched"]
    assert metrics["max_in_flight"] <= CAPACITY and metrics["elements_in"] == 600
    assert metrics["blocked_seconds"] > 0                       # the input waited: back-pressure


ROWS = 1_000_000
MEMORY_GROWTH_BOUND_MB = 64        # stated in docs/operations.md ("Guarantees")
PEAK_RSS_BOUND_MB = 400
BIG_CAPACITY = 64
MEM_FLOW = f"""SOURCE items FROM PARQUET 'in/' SCHEMA (id STRING, pad STRING);
STREAM enriched = ENRICH items WITH PYTHON 'slow:Slow' RETURNS (inflight INT)
  ASYNC UNORDERED CAPACITY {BIG_CAPACITY} TIMEOUT 30s;
STREAM summary = SELECT count(*) AS n, count(DISTINCT id) AS ids, sum(length(pad)) AS chars,
  max(inflight) AS peak_in_flight FROM enriched;
SINK summary TO JSON 'out' MODE OVERWRITE;
"""
SLOW = '''
import asyncio, json, os, time
from pathlib import Path

OUT = Path(__file__).with_name("mem")


def _status():
    found = {}
    with open("/proc/self/status") as handle:
        for line in handle:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                found[key] = int(value.split()[0])
    return found


class Slow:
    """A service slower than the input: 3 ms per call; counts its own concurrency."""

    def __init__(self):
        self.base_kb = None
        self.in_flight = 0

    def open(self):
        if self.base_kb is None:
            self.base_kb = _status()["VmRSS"]
        self.max_in_flight = 0
        self.calls = 0

    async def __call__(self, row):
        self.in_flight += 1
        self.calls += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(0.003)
        finally:
            self.in_flight -= 1
        return {"inflight": self.max_in_flight}

    def close(self):
        status = _status()
        OUT.mkdir(exist_ok=True)
        record = {"pid": os.getpid(), "base_kb": self.base_kb, "hwm_kb": status["VmHWM"],
                  "rss_kb": status["VmRSS"], "max_in_flight": self.max_in_flight, "calls": self.calls}
        (OUT / f"{os.getpid()}-{time.time_ns()}.json").write_text(json.dumps(record))
'''


def _write_input(folder: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir(parents=True)
    per_file = ROWS // 4
    for f in range(4):
        start = f * per_file
        ids = pa.array([f"row-{i:07d}" for i in range(start, start + per_file)])
        pads = pa.array([f"{i:07d}" + "x" * 193 for i in range(start, start + per_file)])
        pq.write_table(pa.table({"id": ids, "pad": pads}), folder / f"part-{f}.parquet")


@pytest.mark.slow
def test_one_million_rows_through_a_slow_service_in_bounded_memory(spark, tmp_path):
    _write_input(tmp_path / "in")
    (tmp_path / "slow.py").write_text(SLOW)
    flow = tmp_path / "pipeline.flow"
    flow.write_text(MEM_FLOW)
    run_flow(flow, metrics_file=tmp_path / "metrics.json")

    [summary] = [json.loads(line) for p in (tmp_path / "out").glob("part-*") for line in p.read_text().splitlines()]
    assert summary == {"n": ROWS, "ids": ROWS, "chars": ROWS * 200, "peak_in_flight": BIG_CAPACITY}
    records = [json.loads(p.read_text()) for p in (tmp_path / "mem").glob("*.json")]
    assert sum(r["calls"] for r in records) == ROWS and len(records) >= 2     # one close() per task
    assert max(r["max_in_flight"] for r in records) <= BIG_CAPACITY
    growth_mb = {r["pid"]: (r["hwm_kb"] - r["base_kb"]) / 1024 for r in records}
    assert max(growth_mb.values()) < MEMORY_GROWTH_BOUND_MB, (growth_mb, records)
    assert max(r["hwm_kb"] for r in records) / 1024 < PEAK_RSS_BOUND_MB, records
    metrics = json.loads((tmp_path / "metrics.json").read_text())["operators"]["enriched"]
    assert metrics["max_in_flight"] <= BIG_CAPACITY and metrics["blocked_seconds"] > 1
    print("peak RSS growth per worker (MB):", {k: round(v, 1) for k, v in growth_mb.items()},
          "peak RSS (MB):", max(r["hwm_kb"] for r in records) // 1024)
