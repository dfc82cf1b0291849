"""The benchmark suite's plumbing: a tiny compiler-scaling run written to a results file.

Structure only; timings belong in bench/RESULTS.md, not in assertions.
"""
from __future__ import annotations

import datetime as dt
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))   # bench/ is a folder of the repository, not an installed package

from bench import compiler_scaling, report  # noqa: E402
from bench.common import Context  # noqa: E402


def test_generated_pipeline_has_exact_statement_count():
    for n, depth in ((2, None), (7, None), (12, 3), (25, 9)):
        text = compiler_scaling.generate(n, depth)
        assert text.count(";") == n
        assert text.startswith("SOURCE s0 ") and text.rstrip().splitlines()[-1].startswith("SINK ")


def test_compiler_scaling_and_report(tmp_path):
    section = compiler_scaling.run(Context(spark=None, service=None, full=False, root=tmp_path), sizes=(4, 8))
    results = tmp_path / "RESULTS.md"
    text = report.write(results, [section], mode="quick", command="python -m bench", seconds=1.0,
                        versions={"pyspark": "x"}, today=dt.date(2026, 1, 2))
    assert results.read_text() == text
    lines = text.splitlines()
    assert lines[0] == "# Benchmark results"
    assert "| date | 2026-01-02 |" in lines
    assert any(re.fullmatch(r"\| cores \| \d+ \|", line) for line in lines)
    assert any(re.fullmatch(r"\| targets met \| \d of 2 \|", line) for line in lines)
    assert "## 4. Compiler scaling" in lines
    header = next(line for line in lines if line.startswith("| statements |"))
    assert header.count("|") == 6
    rows = [line for line in lines if re.match(r"\| (4|8) \|", line)]
    assert len(rows) == 2 and all(row.count("|") == 6 for row in rows)
    assert sum(line.startswith("| branches of <= 9 operators: 8 statements") or
               line.startswith("| one lineage: 8 statements") for line in lines) == 2
    assert re.search(r"^_Section ran in \d+ s(; load average \(1 min\) at its end: [\d.]+)?\._$", text, re.M)
