"""CPU per row of section 2's operator chain in one process, no Spark: this tree against an
earlier revision (default f98b85e, bench.expect_flags' baseline; 48135f5, before the first
attempt of a call was stepped inline, predates runtime/core/ and no longer runs here), measured in
one run on the same machine.

The chain is section 2's (ENRICH WITH PYTHON answering at once -> PROCESS -> PROCESS, user code
bench/chaining_udfs.py), driven as mapInArrow drives it: `ChainFunction` over Arrow batches of
10,000 (device, value) rows, input and output conversions included. Each revision runs in its own
fresh process, the two interleaved, ROUNDS times; a run reports the best of 5 passes over
200,000 rows (process CPU time, so the worker loop's thread counts). Also each operator alone,
on its own input, to show where the time goes.

    .venv/bin/python -m bench.chain_cpu [--baseline REV] [--rounds N]
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .check_time import baseline_tree, before_after_table, run_in_revision

ROUNDS = 3

_RUN = r"""
import json, random, sys
import pyarrow as pa
from dslc.runtime import config as C
from bench.chain_cpu import cpu_per_row

folder = sys.argv[1]
rows, passes = 200_000, 5

def call(name):
    return C.PythonCall(ref=f"chaining_udfs:{name}", search_path=(folder,))

def columns(*pairs):
    return tuple(C.Column(name, kind) for name, kind in pairs)

inputs = columns(("device", "STRING"), ("value", "DOUBLE"))
scored = inputs + columns(("score", "DOUBLE"))
labelled = scored + columns(("label", "STRING"))
high = columns(("device", "STRING"), ("over", "BOOLEAN"))
operators = {
    "scored": (C.Enrich(name="scored", line=2, call=call("score"), returns=columns(("score", "DOUBLE")),
                        key_columns=("device",)), inputs, scored),
    "labelled": (C.Process(name="labelled", line=4, call=call("label"), returns=labelled,
                           key_columns=("device",)), scored, labelled),
    "high": (C.Process(name="high", line=6, call=call("over"), returns=high, key_columns=("device",)),
             labelled, high),
}

rng = random.Random(6)
first = [{"device": f"d{i % 100}", "value": rng.uniform(0.0, 100.0)} for i in range(10_000)]

def batch_for(columns_in, sample):
    return pa.RecordBatch.from_pylist(sample, schema=pa.schema([(c.name, pa.string() if c.type == "STRING"
                                                                 else pa.float64()) for c in columns_in]))

def per_row(chain, batch):
    return cpu_per_row(chain, batch, rows, passes)

samples = {"scored": first}
samples["labelled"] = [{**r, "score": r["value"] * 2.0} for r in first]
samples["high"] = [{**r, "label": "high" if r["score"] > 100.0 else "low"} for r in samples["labelled"]]
out = {}
chain = C.Chain(name="chain#1", operators=tuple(op for op, _, _ in operators.values()), input_columns=inputs,
                output_columns=high, watermark=None, batch_size=1024)
out["whole chain"] = per_row(chain, batch_for(inputs, first))
for name, (op, columns_in, columns_out) in operators.items():
    alone = C.Chain(name=name, operators=(op,), input_columns=columns_in, output_columns=columns_out,
                    watermark=None, batch_size=1024)
    out[f"{name} alone"] = per_row(alone, batch_for(columns_in, samples[name]))
print(json.dumps(out))
"""


def cpu_per_row(chain: Any, batch: Any, rows: int, passes: int) -> float:
    """µs of CPU per row of `chain` driven as mapInArrow drives it: `ChainFunction` over `batch`
    repeated to `rows` rows, the best of `passes` after a warm-up of two batches (imports, the
    loop); process time, so the worker loop's thread counts. Shared with bench.provenance_overhead;
    `dslc` is imported when called, so each revision's process (_RUN) measures its own."""
    from dslc.runtime.core.arrow_chain import ChainFunction

    batches = [batch] * (rows // batch.num_rows)
    for _ in ChainFunction(chain, {}, None)(iter(batches[:2])):
        pass
    best = float("inf")
    for _ in range(passes):
        started = time.process_time()
        for _ in ChainFunction(chain, {}, None)(iter(batches)):
            pass
        best = min(best, time.process_time() - started)
    return best / rows * 1e6


def measure(path_first: Path | None, folder: Path) -> dict[str, float]:
    """µs of CPU per row of each workload, in a fresh process importing dslc from `path_first`
    (None: this tree) and cpu_per_row from this bench."""
    return run_in_revision(_RUN, path_first, str(folder), cwd=folder)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", default="f98b85e")
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    args = parser.parse_args(argv)
    runs: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "udfs"
        folder.mkdir()
        shutil.copy(Path(__file__).with_name("chaining_udfs.py"), folder / "chaining_udfs.py")
        base = baseline_tree(args.baseline, Path(tmp) / "base")
        for _ in range(args.rounds):
            runs["before"].append(measure(base, folder))
            runs["after"].append(measure(None, folder))
    print(f"CPU per row of section 2's chain in one process, {args.baseline} (before) against this tree "
          f"(after); best of 5 passes over 200,000 rows, median of {args.rounds} interleaved rounds")
    print(before_after_table(runs, "µs/row", 2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
