"""17. Paying less: dollars per 10,000 tickets with TIER STANDARD, FLEX and BATCH, and dslc's own
time per 10,000 batch lines.

The same pipeline (a MODEL labels each ticket; every ticket distinct) runs three times against
the local OpenAI-compatible service (dslc.testing.openai_service, in this process): online at
the STANDARD tier, online at the FLEX tier (`service_tier: "flex"`; the service refuses FLEX_429
of flex requests with the flex 429, which dslc sends again and nobody pays for), and through the
provider's Batch API (TIER BATCH; the service takes PROVIDER_DELAY_S from a batch's creation to
its completion). The dollars are the service's own usage (the tokens it billed) at
gpt-4.1-mini's published prices: STANDARD $0.40 / $1.60 per million input / output tokens, FLEX
and BATCH half of that; a run's metrics (cost_usd, what dslc counted) are shown beside them.

dslc's overhead per 10,000 batch lines (build the JSONL, upload, poll, download, check each answer
against RETURNS, write the answer store) is the TIER BATCH run's wall time, minus the same job run
again (every answer stored: the pass alone), minus the provider's delay, measured on 10,000 lines,
the median of three rounds, with the service in a process of its own (bench/openai_process.py).
"""
from __future__ import annotations

import statistics
import time
from pathlib import Path

from dslc.testing.openai_service import OpenAIService, keyword_labeller, serve_in_thread

from .common import Context, run_flow, write_input
from .openai_process import served_in_process
from .report import Section, Table, Target, ratio

PRICES = {"STANDARD": (0.40, 1.60), "FLEX": (0.20, 0.80), "BATCH": (0.20, 0.80)}   # USD per million tokens
PROVIDER_DELAY_S = 2.0
FLEX_429 = 0.05
OVERHEAD_TARGET_S = 5.0      # per 10,000 batch lines, on this machine
OVERHEAD_LINES = 10_000
OVERHEAD_ROUNDS = 3          # the figure is their median: one round moves by seconds with the machine's load

FLOW = """
PIPELINE bench_pay_{name} MODE BATCH ANSWERS '{answers}';
SOURCE tickets FROM PARQUET 'input/' SCHEMA (id STRING, subject STRING, body STRING);
STREAM labelled = ENRICH tickets
  WITH MODEL 'gpt-4.1-mini' AT '{base}'
    SYSTEM 'You label customer support tickets: a category and an urgency from 1 to 5.'
    PROMPT 'Subject: {{subject}}\\nBody: {{body}}'
  RETURNS (category STRING, urgency INT)
  ASYNC UNORDERED CAPACITY 32 TIMEOUT 60s RETRY 3 BACKOFF 50ms {tier}
  PRICE {inp} PER MILLION INPUT TOKENS, {out} PER MILLION OUTPUT TOKENS
  STORE ON ERROR NULL;
SINK labelled TO PARQUET 'out' MODE OVERWRITE;
"""

LABELS = keyword_labeller({
    "category": [("invoice", "billing"), ("refund", "billing"), ("down", "outage"), ("password", "account"),
                 ("", "other")],
    "urgency": [("down", 5), ("locked", 4), ("refund", 3), ("", 1)]})
SUBJECTS = ["invoice wrong", "site down", "password reset", "refund please", "login locked", "export slow"]


def _input(folder: Path, n: int) -> None:
    bodies = [f"ticket {i}: " + " ".join(("the", "page", "shows", "an", "error", "after", "login")[: 3 + i % 5])
              for i in range(n)]
    write_input(folder / "input", {"id": [f"t{i}" for i in range(n)],
                                   "subject": [SUBJECTS[i % len(SUBJECTS)] for i in range(n)], "body": bodies})


def _flow(folder: Path, base: str, tier: str) -> Path:
    inp, out = PRICES[tier]
    flow = folder / "pipeline.flow"
    flow.write_text(FLOW.format(name=tier.lower(), answers=folder / "answers.db", base=base, inp=inp, out=out,
                                tier="" if tier == "STANDARD" else f"TIER {tier}"))
    return flow


def _billed(stats: dict, tier: str) -> float:
    """The service's usage at the tier's price (batch lines are billed apart from online calls)."""
    inp, out = PRICES[tier]
    if tier == "BATCH":
        return (stats["batch_prompt_tokens"] * inp + stats["batch_completion_tokens"] * out) / 1e6
    return (stats["prompt_tokens"] * inp + stats["completion_tokens"] * out) / 1e6


def _overhead(ctx: Context) -> tuple[list[float], list[float]]:
    """dslc's own seconds for OVERHEAD_LINES batch lines, OVERHEAD_ROUNDS times: a TIER BATCH run of
    that many distinct tickets, minus the same job again (every answer stored: the pass alone),
    minus the provider's delay, the two runs back to back in each round. Measured at that size,
    not scaled from a smaller run, so that a run's fixed costs (the Spark jobs, the polling's last
    pause) are counted once, as a user's run pays them. The service runs in a process of its own:
    its work is the provider's, not dslc's (bench/openai_process.py). Also the driver's Python CPU
    seconds the batch run took beyond the stored run: what the load of other jobs does not inflate."""
    seconds, cpu = [], []
    with served_in_process(PROVIDER_DELAY_S) as base:
        for round_ in range(OVERHEAD_ROUNDS):
            folder = ctx.folder(f"pay_overhead_{round_}")
            _input(folder, OVERHEAD_LINES)
            flow = _flow(folder, base, "BATCH")
            cpu_started = time.process_time()
            first = run_flow(flow)
            cpu_first, cpu_started = time.process_time() - cpu_started, time.process_time()
            again = run_flow(flow)
            cpu.append(cpu_first - (time.process_time() - cpu_started))
            seconds.append(first.seconds - again.seconds - PROVIDER_DELAY_S)
    return seconds, cpu


def run(ctx: Context) -> Section:
    n = 10_000 if ctx.full else 2_000
    per = 10_000 / n
    started = time.perf_counter()
    table = Table(["tier", "requests", "input tokens", "output tokens", "USD billed", "USD per 10,000 tickets",
                   "dslc's cost_usd", "vs STANDARD", "job seconds"])
    dollars: dict[str, float] = {}
    refused = 0
    with serve_in_thread(OpenAIService(labeller=LABELS, batch_delay_s=PROVIDER_DELAY_S,
                                       flex_unavailable=FLEX_429)) as running:
        for tier in ("STANDARD", "FLEX", "BATCH"):
            folder = ctx.folder(f"pay_{tier.lower()}")
            _input(folder, n)
            flow = _flow(folder, running.base_url, tier)
            running.reset()
            first = run_flow(flow)
            stats = running.stats
            billed = _billed(stats, tier)
            refused += stats["flex_unavailable"] if tier == "FLEX" else 0
            dollars[tier] = billed * per
            requests = stats["batch_lines"] if tier == "BATCH" else stats["chat_calls"]
            tokens = ("batch_prompt_tokens", "batch_completion_tokens") if tier == "BATCH" else \
                ("prompt_tokens", "completion_tokens")
            table.add(tier, f"{requests:,}" + (" lines" if tier == "BATCH" else ""), f"{stats[tokens[0]]:,}",
                      f"{stats[tokens[1]]:,}", f"{billed:.4f}", f"{dollars[tier]:.4f}",
                      f"{first.metrics['labelled'].get('cost_usd', 0):.4f}", ratio(dollars[tier], dollars["STANDARD"]),
                      f"{first.seconds:.1f}")
    rounds, cpu = _overhead(ctx)
    overhead_s = statistics.median(rounds)
    section = Section(
        "17. Paying less: STANDARD, FLEX and BATCH",
        f"{n:,} distinct tickets, one MODEL request each, against the local OpenAI-compatible service "
        f"(flex 429 on {FLEX_429:.0%} of flex requests; a batch completes {PROVIDER_DELAY_S:g} s after it is "
        "created); dollars from the service's billed usage at gpt-4.1-mini's prices (FLEX and BATCH: half), "
        f"scaled to 10,000 tickets. Overhead: a TIER BATCH run of {OVERHEAD_LINES:,} tickets minus the same run "
        "with every answer stored, minus the provider's delay (the service in a process of its own; the median of "
        f"{OVERHEAD_ROUNDS} rounds: " + ", ".join(f"{s:.1f}" for s in rounds) + " s).",
        tables=[table])
    section.targets = [
        Target("FLEX costs half of STANDARD", ratio(dollars["FLEX"], dollars["STANDARD"]),
               abs(dollars["FLEX"] / dollars["STANDARD"] - 0.5) < 0.01),
        Target("BATCH costs half of STANDARD", ratio(dollars["BATCH"], dollars["STANDARD"]),
               abs(dollars["BATCH"] / dollars["STANDARD"] - 0.5) < 0.01),
        Target(f"dslc's own time per 10,000 batch lines < {OVERHEAD_TARGET_S:g} s", f"{overhead_s:.1f} s",
               overhead_s < OVERHEAD_TARGET_S)]
    section.notes.append(f"The batch runs' CPU beyond the stored runs' in the driver's Python (the batch phase: "
                         f"lines built, uploaded, downloaded, checked, stored), median of {OVERHEAD_ROUNDS} rounds: "
                         f"{statistics.median(cpu):.1f} s (" + ", ".join(f"{c:.1f}" for c in cpu) + " s); the wall "
                         "time above is that plus Spark's and the polling's waits, and grows with the machine's load.")
    section.notes.append(f"The FLEX run's service refused {refused:,} flex requests with the flex 429 "
                         "(resource_unavailable): not billed, sent again by dslc; requests counts the answered ones.")
    section.seconds = time.perf_counter() - started
    return section
