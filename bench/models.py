"""12. Models: ENRICH WITH MODEL against a service that holds requests and tokens per minute, and
EMBEDDING with BATCH 64.

The local OpenAI-compatible service (dslc.testing.openai_service) runs in its own process and
enforces RPM and TPM as OpenAI does: buckets that refill continuously and hold BURST_S seconds
of the limit, a 429 with Retry-After / retry-after-ms above them. Chat completions answer after
LATENCY_MS; a request costs its prompt and completion tokens (about 90 here, prompts of varied
length). Tokens, not requests, are the binding limit (TPM / 90 < RPM).

- Token budget: dslc (`RATE ... PER MINUTE, m TOKENS PER MINUTE`, CAPACITY 32 ADAPTIVE, 2
  tasks) against a hand-written asyncio loop with the official openai SDK (AsyncOpenAI, its own
  retries honouring Retry-After), a semaphore at fixed concurrency, at each of CONCURRENCIES;
  the baseline is the one with the most throughput among those under 2% of 429s (else overall). Throughput is the share of the token budget answered: tokens
  answered / (the bucket's burst + TPM / 60 x the seconds between the first and the last answer),
  so Spark's start-up does not count against dslc. The 429 share is refused / all requests.
- Embeddings: /embeddings answers after 20 ms + 0.05 ms per input and serves SLOTS = 8 requests
  at once (429 at once above, as a model server's queue limit; RETRY 500 BACKOFF 5ms). BATCH 64
  at CAPACITY 128 over 2 tasks against unbatched at CAPACITY 4 x 2 tasks = the server's slots
  (N / 4 rows; unbatched at CAPACITY 128 is a 429 storm whose elements time out): rows per second
  of the whole run, and of the run minus the job's fixed cost (the same flow on 64 rows, best
  of 2), which a short batched run is mostly made of. As section 6 does for HTTP /model.
"""
from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from .common import Context, run_flow, write_input
from .report import Section, Table, Target, ratio

TPM = 300_000
RPM = 12_000
BURST_S = 2.0
LATENCY_MS = 40.0
CONCURRENCIES = (2, 4, 8, 16)
MODEL = "bench-model"
SLOTS = 8               # the embedding server's slots (requests served at once; 429 above)

MODEL_FLOW = """
PIPELINE bench_models MODE BATCH;
SOURCE tickets FROM PARQUET 'input/' SCHEMA (id STRING, text STRING);
STREAM labelled = ENRICH tickets
  WITH MODEL '{model}' AT '{base}'
    SYSTEM 'You label support tickets.'
    PROMPT 'Ticket: {{text}}'
  RETURNS (label STRING, score INT)
  ASYNC UNORDERED CAPACITY 32 ADAPTIVE TIMEOUT 120s RETRY 20 BACKOFF 50ms
  RATE {rpm} PER MINUTE, {tpm} TOKENS PER MINUTE
  ON ERROR NULL;
SINK labelled TO PARQUET 'out' MODE OVERWRITE;
"""

EMBEDDING_FLOW = """
PIPELINE bench_embeddings MODE BATCH;
SOURCE docs FROM PARQUET 'input/' SCHEMA (id STRING, text STRING);
STREAM vectors = ENRICH docs
  WITH EMBEDDING 'bench-embedding' AT '{base}' INPUT '{{text}}'
  RETURNS (embedding ARRAY<FLOAT>)
  ASYNC UNORDERED CAPACITY {capacity} TIMEOUT 60s RETRY 500 BACKOFF 5ms {batch}
  ON ERROR NULL ON TIMEOUT NULL;
SINK vectors TO PARQUET 'out' MODE OVERWRITE;
"""

SCHEMA = {"type": "object", "additionalProperties": False, "required": ["label", "score"],
          "properties": {"label": {"type": "string"}, "score": {"type": "integer"}}}


def _texts(n: int) -> list[str]:
    words = "printer invoice login outage refund password slow crash export report billing account".split()
    return [" ".join(words[(i * 7 + k) % len(words)] for k in range(20 + (i * 13) % 40)) for i in range(n)]


class _Service:
    """The OpenAI-compatible service in its own process."""

    def __init__(self, *args: str) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.base = f"http://127.0.0.1:{self.port}/v1"
        self.process = subprocess.Popen([sys.executable, "-m", "dslc.testing.openai_service",
                                         "--port", str(self.port), *args])
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.1)
        raise RuntimeError("the OpenAI-compatible bench service did not start")

    def stats(self) -> dict:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/_stats") as answer:
            return json.loads(answer.read())

    def reset(self) -> None:
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}/_reset", data=b"", method="POST")
        urllib.request.urlopen(request).read()

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(10)


def _share(stats: dict) -> tuple[float, float]:
    """(share of the token budget answered, share of requests refused with 429)."""
    window = (stats["last_at"] or 0) - (stats["first_at"] or 0)
    budget = TPM / 60 * BURST_S + TPM / 60 * window
    requests = stats["chat_calls"] + stats["rejected"]
    return stats["total_tokens"] / budget, (stats["rejected"] / requests if requests else 0.0)


def _settle(seconds: float = BURST_S + 0.5) -> None:
    """Let the service's buckets fill again between runs."""
    time.sleep(seconds)


def _dslc_model(ctx: Context, service: _Service, n: int) -> tuple[float, float, dict]:
    folder = ctx.folder(f"models-dslc-{n}")
    write_input(folder / "input", {"id": [f"t{i}" for i in range(n)], "text": _texts(n)})
    (folder / "pipeline.flow").write_text(MODEL_FLOW.format(model=MODEL, base=service.base, rpm=RPM, tpm=TPM))
    _settle()
    service.reset()
    result = run_flow(folder / "pipeline.flow")
    stats = service.stats()
    if stats["chat_calls"] != n:
        raise RuntimeError(f"dslc MODEL: {stats['chat_calls']} answers for {n} rows")
    m = result.metrics["labelled"]
    if m["total_tokens"] != stats["total_tokens"]:
        raise RuntimeError(f"dslc counted {m['total_tokens']} tokens, the service {stats['total_tokens']}")
    share, refused = _share(stats)
    return share, refused, stats


async def _sdk_loop(base: str, texts: list[str], concurrency: int) -> None:
    """The hand-written baseline: AsyncOpenAI, a semaphore, the SDK's own retries (Retry-After)."""
    import openai

    client = openai.AsyncOpenAI(base_url=base, api_key="sk-bench", max_retries=20)
    gate = asyncio.Semaphore(concurrency)

    async def one(text: str) -> None:
        async with gate:
            while True:     # the SDK's retries can run out in a 429 storm: then the loop asks again
                try:
                    answer = await client.chat.completions.create(
                        model=MODEL, messages=[{"role": "system", "content": "You label support tickets."},
                                               {"role": "user", "content": f"Ticket: {text}"}],
                        response_format={"type": "json_schema",
                                         "json_schema": {"name": "labelled", "strict": True, "schema": SCHEMA}})
                    break
                except openai.RateLimitError:
                    await asyncio.sleep(0.05)
            json.loads(answer.choices[0].message.content)

    try:
        await asyncio.gather(*(one(t) for t in texts))
    finally:
        await client.close()


def _sdk(service: _Service, n: int, concurrency: int) -> tuple[float, float, dict]:
    _settle()
    service.reset()
    asyncio.run(_sdk_loop(service.base, _texts(n), concurrency))
    stats = service.stats()
    share, refused = _share(stats)
    return share, refused, stats


def _embeddings(ctx: Context, base: str, n: int, batch: str, seconds: bool = False, capacity: int = 128):
    """(rows/s, the operator's metrics, the run's seconds); with `seconds`, (seconds,) only."""
    folder = ctx.folder(f"embeddings-{batch.replace(' ', '') or 'unbatched'}-{n}-{time.monotonic_ns()}")
    write_input(folder / "input", {"id": [f"d{i}" for i in range(n)], "text": [f"document {i}" for i in range(n)]})
    (folder / "pipeline.flow").write_text(EMBEDDING_FLOW.format(base=base, batch=batch, capacity=capacity))
    result = run_flow(folder / "pipeline.flow")
    if seconds:
        return (result.seconds,)
    return n / result.seconds, result.metrics["vectors"], result.seconds


def run(ctx: Context) -> Section:
    started = time.perf_counter()
    n = 3000 if ctx.full else 1500
    section = Section("12. Models: tokens per minute, and BATCH embeddings", __doc__.split("\n\n", 1)[1])
    service = _Service("--rpm", str(RPM), "--tpm", str(TPM), "--burst-s", str(BURST_S),
                       "--latency-ms", str(LATENCY_MS))
    try:
        _sdk(service, 100, 8)                                                      # warm up
        dslc_share, dslc_refused, dslc_stats = _dslc_model(ctx, service, n)
        print(f"bench models: dslc {dslc_share:.1%} of the token budget, {dslc_refused:.2%} 429s", file=sys.stderr)
        sdk = {}
        for c in CONCURRENCIES:
            sdk[c] = _sdk(service, n, c)
            print(f"bench models: SDK loop c={c}: {sdk[c][0]:.1%} of the budget, {sdk[c][1]:.2%} 429s", file=sys.stderr)
    finally:
        service.close()
    table = Table([f"chat completions, TPM {TPM:,}, RPM {RPM:,}, {LATENCY_MS:.0f} ms", "N",
                   "share of token budget", "429 share", "requests", "tokens"])
    table.add("dslc: RATE ... TOKENS PER MINUTE, CAPACITY 32 ADAPTIVE", n, f"{dslc_share:.0%}", f"{dslc_refused:.1%}",
              dslc_stats["chat_calls"] + dslc_stats["rejected"], dslc_stats["total_tokens"])
    for c, (share, refused, stats) in sdk.items():
        table.add(f"asyncio + openai SDK, semaphore {c}", n, f"{share:.0%}", f"{refused:.1%}",
                  stats["chat_calls"] + stats["rejected"], stats["total_tokens"])
    section.tables.append(table)
    # the best fixed concurrency: the most throughput among those under 2% of 429s, if any
    polite = [c for c in sdk if sdk[c][1] < 0.02] or list(sdk)
    best_c = max(polite, key=lambda c: sdk[c][0])
    best_share, best_refused, _ = sdk[best_c]

    embed_service = _Service("--embedding-latency-ms", "20", "--embedding-per-input-ms", "0.05",
                             "--max-concurrent", str(SLOTS))
    try:
        m = 20_000 if ctx.full else 8_000
        _embeddings(ctx, embed_service.base, 1000, "BATCH 64")                     # warm up
        fixed = min(_embeddings(ctx, embed_service.base, 64, "BATCH 64", seconds=True)[0] for _ in range(2))
        batched, batched_metrics, batched_s = _embeddings(ctx, embed_service.base, m, "BATCH 64")
        at_slots, at_slots_metrics, at_slots_s = _embeddings(ctx, embed_service.base, m // 4, "", capacity=SLOTS // 2)
        print(f"bench models: embeddings BATCH 64 {batched:.0f} rows/s ({batched_s:.1f} s), unbatched at the slots "
              f"{at_slots:.0f} rows/s ({at_slots_s:.1f} s), fixed cost {fixed:.1f} s", file=sys.stderr)
    finally:
        embed_service.close()
    embed = Table(["/embeddings (20 ms + 0.05 ms/input), CAPACITY 128, 2 tasks", "N", "seconds", "rows/s",
                   f"rows/s without the job's fixed cost ({fixed:.1f} s)", "requests"])
    net_batched = m / max(batched_s - fixed, 1e-3)
    embed.add("BATCH 64, CAPACITY 128", m, f"{batched_s:.1f}", f"{batched:.0f}", f"{net_batched:.0f}",
              batched_metrics["calls"])
    net_slots = (m // 4) / max(at_slots_s - fixed, 1e-3)
    embed.add(f"unbatched, CAPACITY {SLOTS // 2} (x 2 tasks = the server's {SLOTS} slots)", m // 4, f"{at_slots_s:.1f}",
              f"{at_slots:.0f}", f"{net_slots:.0f}", at_slots_metrics["calls"])
    section.tables.append(embed)
    section.targets += [
        Target("MODEL: throughput >= 0.9 of the token budget", f"{dslc_share:.2f}", dslc_share >= 0.9),
        Target("MODEL: 429 share < 2%", f"{dslc_refused:.1%}", dslc_refused < 0.02),
        Target(f"MODEL: dslc vs the best hand-written SDK loop (semaphore {best_c}: {best_share:.0%} of the budget, "
               f"{best_refused:.1%} 429s)", ratio(dslc_share, best_share), dslc_share >= best_share * 0.95),
        Target(f"EMBEDDING: BATCH 64 >= 5x unbatched at the server's {SLOTS} slots (whole runs)",
               ratio(batched, at_slots), batched >= 5 * at_slots),
        Target(f"EMBEDDING: BATCH 64 >= 5x unbatched at the server's {SLOTS} slots (runs minus the job's fixed cost)",
               ratio(net_batched, net_slots), net_batched >= 5 * net_slots),
    ]
    section.seconds = time.perf_counter() - started
    return section


if __name__ == "__main__":      # python -m bench.models [--full]: this section alone, printed
    import tempfile

    from .common import spark_session

    spark = spark_session()
    with tempfile.TemporaryDirectory(prefix="dslc-bench-models-") as root:
        result = run(Context(spark=spark, service=None, full="--full" in sys.argv, root=Path(root)))
    print(result.markdown() if hasattr(result, "markdown") else result)
