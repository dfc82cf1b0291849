"""Run the benchmark suite and rewrite bench/RESULTS.md.

    python -m bench                  # quick run of everything (a few minutes)
    python -m bench --full           # larger N everywhere
    python -m bench --only chaining,compiler --results /tmp/r.md
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from . import (
    adaptive,
    async_enrich,
    cache_zipf,
    chaining,
    compiler_scaling,
    cpu_per_call,
    databases,
    enrich_modes,
    expect_overhead,
    lsp_latency,
    models,
    pay_half,
    provenance_overhead,
    pushdown,
    report,
    services,
    store,
    streaming_match,
    streaming_sinks,
)
from .common import Context, spark_session
from .service import LatencyService

BENCHES = {
    "async": async_enrich.run,
    "chaining": chaining.run,
    "pushdown": pushdown.run,
    "compiler": compiler_scaling.run,
    "cache": cache_zipf.run,
    "modes": enrich_modes.run,
    "streaming": streaming_sinks.run,
    "cpu": cpu_per_call.run,
    "adaptive": adaptive.run,
    "match": streaming_match.run,
    "lsp": lsp_latency.run,
    "models": models.run,
    "store": store.run,
    "services": services.run,
    "databases": databases.run,
    "expect": expect_overhead.run,
    "pay": pay_half.run,
    "provenance": provenance_overhead.run,
}
RESULTS = Path(__file__).resolve().parent / "RESULTS.md"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", dest="full", action="store_false", help="small N (the default)")
    size.add_argument("--full", dest="full", action="store_true", help="larger N, longer runs")
    parser.set_defaults(full=False)
    parser.add_argument("--only", default=",".join(BENCHES),
                        help=f"comma-separated subset of: {', '.join(BENCHES)}")
    parser.add_argument("--results", type=Path, default=RESULTS, help="the markdown file to rewrite")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = [n for n in names if n not in BENCHES]
    if unknown:
        parser.error(f"unknown benchmark(s): {', '.join(unknown)}")

    started = time.perf_counter()
    root = Path(tempfile.mkdtemp(prefix="dslc-bench-"))
    sections: list[report.Section] = []
    try:
        import pyspark

        spark = spark_session()
        with LatencyService() as service:
            ctx = Context(spark=spark, service=service, full=args.full, root=root)
            for name in names:
                print(f"bench: {name} ...", file=sys.stderr, flush=True)
                section = BENCHES[name](ctx)
                section.load = os.getloadavg()[0]   # sections kept by a later --only run keep theirs
                print(f"bench: {name} done in {section.seconds:.0f} s", file=sys.stderr, flush=True)
                sections.append(section)
        spark.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    command = "python -m bench" + (" --full" if args.full else "")
    if names != list(BENCHES):
        command += f" --only {','.join(names)}"
    text = report.write(args.results, sections, keep_others=names != list(BENCHES),
                        mode="full" if args.full else "quick", command=command,
                        seconds=time.perf_counter() - started, versions={"pyspark": pyspark.__version__})
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
