"""`dslc check` time: this tree against an earlier revision (default a0d6f02, before the SQL
checker learned Spark's names and types, issue #18), measured in one run on the same machine.

Workloads: each example's pipeline.flow, the conformance corpus of tests/sql/ as pipelines
(TPC-H's 22 queries as 22 streams; the hand-written queries as one stream each), and chains of
100 and 1,000 SELECTs (the ratio of their times should stay under 10: linear growth; the ratio
of the Python calls one check makes is printed too, since it does not move with the load). For each
revision, in a fresh process: the time of one whole `dslc check` process (interpreter start,
imports, check), the same with `--spark` (this tree only: it starts a JVM and runs Spark's
analyzer on every query), and the in-process time of `check_file` (best of 5 after one warm-up), which
is what an editor or the REPL pays per check. The baseline rejects some corpus queries (false
errors); its time is then the time to check and report them.

    .venv/bin/python -m bench.check_time [--baseline REV]
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "sql"

_TIMER = r"""
import json, sys, time
from dslc.compiler.pipeline import check_file
from dslc.compiler.diagnostics import CompileError
out = {}
for path in sys.argv[1:]:
    def once():
        try:
            check_file(path)
            return 0
        except CompileError as exc:
            return len(exc.diagnostics)
    errors = once()
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        once()
        best = min(best, time.perf_counter() - t0)
    out[path] = {"seconds": best, "errors": errors}
print(json.dumps(out))
"""

_CLI = "import sys; from dslc.compiler.cli.main import main; sys.exit(main(['check', *sys.argv[1:]]))"


def workloads(folder: Path) -> dict[str, Path]:
    """name → .flow file: the examples, and the corpus written out as pipelines."""
    flows = {f"example {p.parent.name}": p for p in sorted((ROOT / "examples").glob("*/pipeline.flow"))}
    tables = (CORPUS / "tables.flow").read_text(encoding="utf-8")
    # The baseline's grammar cannot parse a query that starts with '(' (one whole-file syntax
    # error would leave nothing to check), so those queries stay out of both runs.
    written = [p for p in sorted((CORPUS / "queries").glob("*.sql")) if not p.read_text().lstrip().startswith("(")]
    for name, queries in (("TPC-H, 22 streams", sorted((CORPUS / "tpch").glob("*.sql"))),
                          (f"hand-written, {len(written)} streams", written)):
        body = "".join(f"STREAM {p.stem} =\n{p.read_text(encoding='utf-8').rstrip()};\nSINK {p.stem} TO CONSOLE;\n"
                       for p in queries)
        path = folder / f"{name.split(',')[0].replace(' ', '_').lower()}.flow"
        path.write_text(tables + body, encoding="utf-8")
        flows[name] = path
    for size in SIZES:          # the same statement repeated: time should grow linearly
        path = folder / f"chain_{size}.flow"
        path.write_text(chain(size), encoding="utf-8")
        flows[f"chain of {size} SELECTs"] = path
    return flows


SIZES = (100, 1000)


def chain(size: int) -> str:
    """A pipeline of `size` SELECTs, each reading the one before (filter, projection, calls)."""
    parts = ["SOURCE s0 FROM JSON 'in/' SCHEMA (id STRING, amount DOUBLE, country STRING, ts TIMESTAMP);"]
    parts += [f"STREAM s{i} = SELECT id, amount * 2 AS amount, upper(country) AS country, ts FROM s{i - 1}\n"
              f"  WHERE amount > 0 AND substr(country, 1, 2) = 'NL';" for i in range(1, size + 1)]
    return "\n".join(parts + [f"SINK s{size} TO CONSOLE;", ""])


def baseline_tree(revision: str, folder: Path) -> Path:
    """A copy of `revision` importable as the `dslc` package (a folder to put first on sys.path)."""
    source = folder / "src"
    source.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", revision], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(source)], input=archive, check=True)
    package = folder / "path" / "dslc"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    for part in ("compiler", "grammar", "runtime", "testing"):
        if (source / part).exists():
            (package / part).symlink_to(source / part)
    return folder / "path"


def run_in_revision(code: str, tree: Path | None, *args: str, cwd: Path = ROOT) -> Any:
    """The last line `code` prints, parsed as JSON, run with `args` in a fresh Python whose `dslc`
    is `tree`'s (from baseline_tree; None: this checkout's) and whose `bench` is this checkout's:
    each revision measured in a process of its own, by the same bench code. Lines printed before
    the last are the code's own (warnings, logs); a failed run raises with the end of its stderr."""
    path = ([str(tree)] if tree else []) + [str(ROOT)]
    done = subprocess.run([sys.executable, "-c", f"import sys; sys.path[:0] = {path!r}; {code}", *args],
                          capture_output=True, text=True, cwd=cwd)
    if done.returncode:
        raise RuntimeError(f"the run of {tree or 'this tree'} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def before_after_table(runs: dict[str, list[dict[str, float]]], unit: str, digits: int) -> str:
    """The median of each workload's interleaved runs, before and after, as a markdown table with
    their ratio (the revision benches: chain_cpu, operator_cpu)."""
    median = {side: {name: statistics.median(run[name] for run in side_runs) for name in side_runs[0]}
              for side, side_runs in runs.items()}
    lines = [f"| workload | before {unit} | after {unit} | after/before |", "|---|---:|---:|---:|"]
    for name, before in median["before"].items():
        after = median["after"][name]
        lines.append(f"| {name} | {before:.{digits}f} | {after:.{digits}f} | {after / before:.2f} |")
    return "\n".join(lines)


def measure(path_first: Path | None, flows: dict[str, Path], spark: bool = False) -> dict[str, dict]:
    env_path = [str(path_first)] if path_first else []
    prefix = f"import sys; sys.path[:0] = {env_path!r}; "
    timed = json.loads(subprocess.run([sys.executable, "-c", prefix + _TIMER, *map(str, flows.values())],
                                      check=True, capture_output=True, text=True, cwd=ROOT).stdout)
    result = {}
    for name, path in flows.items():
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", prefix + _CLI, str(path)], capture_output=True, cwd=ROOT)
        result[name] = {**timed[str(path)], "process": time.perf_counter() - start}
        if spark and not name.startswith("chain"):   # the dry run: a JVM per process, Spark's analyzer on every query
            start = time.perf_counter()
            subprocess.run([sys.executable, "-c", prefix + _CLI, "--spark", str(path)], capture_output=True, cwd=ROOT)
            result[name]["spark"] = time.perf_counter() - start
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", default="a0d6f02")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        flows = workloads(Path(tmp))
        before = measure(baseline_tree(args.baseline, Path(tmp) / "base"), flows)
        after = measure(None, flows, spark=True)
    print(f"dslc check, {args.baseline} (before) against this tree (after); in-process best of 5, "
          "and one whole process")
    print("| workload | before ms | after ms | after/before | errors before | errors after "
          "| process before s | process after s | process --spark s | --spark/fast |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name in flows:
        b, a = before[name], after[name]
        print(f"| {name} | {b['seconds'] * 1000:.1f} | {a['seconds'] * 1000:.1f} | "
              f"{a['seconds'] / b['seconds']:.2f} | {b['errors']} | {a['errors']} | "
              f"{b['process']:.2f} | {a['process']:.2f} | "
              + (f"{a['spark']:.2f} | {a['spark'] / a['process']:.1f} |" if "spark" in a else "- | - |"))
    small, large = (f"chain of {n} SELECTs" for n in SIZES)
    print(f"\n{SIZES[1]} statements / {SIZES[0]} statements, in-process (goal < 10): "
          f"before {before[large]['seconds'] / before[small]['seconds']:.1f}, "
          f"after {after[large]['seconds'] / after[small]['seconds']:.1f}")
    print(f"Python calls of one check (cProfile; the same on every run, unlike time): "
          f"{_calls(SIZES[1]) / _calls(SIZES[0]):.3f}x (tests/frontend/test_linear_check.py holds it under 10)")
    return 0


def _calls(size: int) -> int:
    """Python function calls of one in-process check of a chain of `size` SELECTs."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "chain.flow"
        path.write_text(chain(size), encoding="utf-8")
        return calls_of_a_check(path)


def calls_of_a_check(flow: Path) -> int:
    """Python function calls made by one `check_file` of `flow` (after a first check that fills
    the caches imports and grammars keep): the same count on every run, unlike time."""
    import cProfile
    import pstats

    from dslc.compiler.pipeline import check_file

    check_file(flow)
    profiler = cProfile.Profile()
    profiler.runcall(check_file, flow)
    return sum(calls for (calls, _, _, _, _) in pstats.Stats(profiler).stats.values())  # type: ignore[attr-defined]
