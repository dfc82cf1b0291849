"""cProfile of a TIER BATCH operator's batch phase alone (issue #44's overhead goal): the
BatchRunner over 10,000 distinct ticket rows against the in-process OpenAI-compatible service
(batch delay 2 s) and a fresh SQLite answer store; no Spark:

    .venv/bin/python -m bench.batch_phase [N] [--profile out.prof]

Before and after the per-line work was removed (2026-11-28): bench/RESULTS.md, section 17's notes."""
from __future__ import annotations

import asyncio
import cProfile
import pstats
import sys
import tempfile
import time
from pathlib import Path

from dslc.runtime import config as C
from dslc.runtime.batches.api import BatchApi
from dslc.runtime.batches.runner import BatchRunner
from dslc.runtime.calls.factory import KINDS
from dslc.runtime.store.open_stores import make_store
from dslc.testing.openai_service import OpenAIService, serve_in_thread

from .pay_half import LABELS, SUBJECTS

DELAY_S = 2.0


def rows(n: int) -> list[dict]:
    return [{"subject": SUBJECTS[i % len(SUBJECTS)],
             "body": f"ticket {i}: " + " ".join(("the", "page", "shows", "an", "error", "after", "login")[: 3 + i % 5])}
            for i in range(n)]


def config(base: str, store: str) -> C.Enrich:
    call = C.ModelCall(model="gpt-4.1-mini", base_url=base, prompt="Subject: {subject}\nBody: {body}",
                       system="You label customer support tickets: a category and an urgency from 1 to 5.")
    return C.Enrich(name="labelled", line=3, call=call, returns=(C.Column("category", "STRING"), C.Column("urgency", "INT")),
                    key_columns=(), store=C.Store(store, run="r1"), tier="BATCH",
                    price=C.Price(input_per_million=0.2, output_per_million=0.8))


async def phase(op: C.Enrich, data: list[dict]) -> float:
    store = make_store(op.store.location)
    await store.open()
    try:
        async with BatchApi(op.call, op.secrets) as api:
            started = time.perf_counter()
            await BatchRunner(op, KINDS[type(op.call)](op), store, api).run(data)
            return time.perf_counter() - started
    finally:
        await store.close()


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 10_000
    out = sys.argv[sys.argv.index("--profile") + 1] if "--profile" in sys.argv else None
    data = rows(n)
    with tempfile.TemporaryDirectory() as tmp, \
            serve_in_thread(OpenAIService(labeller=LABELS, batch_delay_s=DELAY_S)) as running:
        op = config(running.base_url, str(Path(tmp) / "answers.db"))
        profiler = cProfile.Profile() if out else None
        if profiler:
            profiler.enable()
        seconds = asyncio.run(phase(op, data))
        if profiler:
            profiler.disable()
            profiler.dump_stats(out)
        print(f"{n} lines: batch phase {seconds:.2f} s, minus the provider's {DELAY_S:g} s: {seconds - DELAY_S:.2f} s; "
              f"service: {running.stats.get('batch_lines')} lines")
    if out:
        pstats.Stats(out).sort_stats("cumulative").print_stats(35)


if __name__ == "__main__":
    main()
