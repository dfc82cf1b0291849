"""Editor with Spark's analyzer on: does the fast check keep its latency?

The edits of bench/lsp_latency.py (each example: one statement edited back and forth; the
generated 300-statement file: typing one character per edit), sent to `dslc lsp` and to
`dslc lsp --spark` (its JVM started and warm before the first edit), one edit at a time. For each
edit: the time from didChange to the first publishDiagnostics of that version (the fast check's)
and, with Spark on, to the second (the same version with Spark's analyzer's diagnostics), when it
comes before the next edit is sent (a version overtaken by the next edit gets no Spark result:
it is dropped, by design). The ratio that matters is the fast p95 with Spark on / off (goal:
about 1; the JVM runs on its own thread and process, so only the machine's cores are shared).

    .venv/bin/python -m bench.lsp_spark [--edits 30]
"""
from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from lsprotocol import types
from pygls.lsp.client import LanguageClient

from .lsp_latency import workloads

SPARK_WAIT_S = 300


class _Client(LanguageClient):
    """Every publishDiagnostics's arrival time, per (uri, version), in order."""

    def __init__(self) -> None:
        super().__init__("dslc-bench", "1")
        self.arrivals: dict[tuple[str, int], list[float]] = {}
        self.event = asyncio.Event()

        @self.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def published(params: types.PublishDiagnosticsParams) -> None:
            self.arrivals.setdefault((params.uri, params.version), []).append(time.perf_counter())
            self.event.set()

    async def nth(self, uri: str, version: int, n: int, timeout: float) -> float:
        async def wait() -> float:
            while len(self.arrivals.get((uri, version), ())) < n:
                self.event.clear()
                await self.event.wait()
            return self.arrivals[(uri, version)][n - 1]
        return await asyncio.wait_for(wait(), timeout)


async def measure(work, spark: bool, settle_s: float) -> dict[str, tuple[list[float], list[float]]]:
    client = _Client()
    await client.start_io(sys.executable, "-m", "dslc.compiler.cli", "lsp", *(["--spark"] if spark else []))
    out = {}
    try:
        await client.initialize_async(types.InitializeParams(capabilities=types.ClientCapabilities()))
        client.initialized(types.InitializedParams())
        if spark:   # warm: a document whose version 1 gets Spark's publish too
            warm = work[0].path.as_uri()
            client.text_document_did_open(types.DidOpenTextDocumentParams(
                types.TextDocumentItem(warm, "flow", 1, work[0].path.read_text())))
            await client.nth(warm, 1, 2, SPARK_WAIT_S)
            client.text_document_did_close(types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(warm)))
        for w in work:
            uri = w.path.as_uri()
            for key in [k for k in client.arrivals if k[0] == uri]:    # an earlier workload's file
                del client.arrivals[key]
            client.text_document_did_open(types.DidOpenTextDocumentParams(
                types.TextDocumentItem(uri, "flow", 1, w.path.read_text())))
            await client.nth(uri, 1, 2 if spark else 1, SPARK_WAIT_S)
            fast, slow = [], []
            for version, text in enumerate(w.versions, start=2):
                sent = time.perf_counter()
                client.text_document_did_change(types.DidChangeTextDocumentParams(
                    types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                    [types.TextDocumentContentChangeWholeDocument(text=text)]))
                fast.append(await client.nth(uri, version, 1, 120) - sent)
                if spark:
                    try:
                        slow.append(await client.nth(uri, version, 2, settle_s) - sent)
                    except asyncio.TimeoutError:
                        pass        # overtaken by the next edit: no Spark result, by design
            out[w.name] = (fast, slow)
            client.text_document_did_close(types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri)))
    finally:
        await client.shutdown_async(None)
        client.exit(None)
        await client.stop()
    return out


def _p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20, method="inclusive")[-1] if len(values) > 1 else values[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--edits", type=int, default=30)
    parser.add_argument("--settle", type=float, default=0.5,
                        help="seconds to wait for Spark's publish of a version before the next edit (default 0.5)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="dslc-lsp-spark-") as folder:
        work = workloads(Path(folder), args.edits)
        off = asyncio.run(measure(work, False, args.settle))
        on = asyncio.run(measure(work, True, args.settle))
    print("| file: edits | fast p50 ms off | fast p95 ms off | fast p50 ms on | fast p95 ms on | "
          "p95 on / off | Spark's diagnostics: p50 ms | versions with Spark's result |")
    print("|---|---|---|---|---|---|---|---|")
    for w in work:
        a, _ = off[w.name]
        b, slow = on[w.name]
        spark = f"{statistics.median(slow) * 1000:.0f}" if slow else "-"
        print(f"| {w.name} | {statistics.median(a) * 1000:.0f} | {_p95(a) * 1000:.0f} | "
              f"{statistics.median(b) * 1000:.0f} | {_p95(b) * 1000:.0f} | {_p95(b) / _p95(a):.2f} | "
              f"{spark} | {len(slow)} of {len(b)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
