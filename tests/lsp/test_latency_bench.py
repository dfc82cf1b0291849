"""bench/lsp_latency.py runs through the protocol and writes only its own section of RESULTS.md
(no timing is asserted here: figures live in bench/RESULTS.md)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench import lsp_latency  # noqa: E402


@pytest.mark.slow
def test_the_latency_bench_measures_every_file_through_the_protocol(tmp_path):
    section = lsp_latency.section(tmp_path, edits=3, hover_statements=300)   # the bench's 5,000 take a minute
    rows = section.tables[0].rows
    examples = sorted(p.parent.name for p in (ROOT / "examples").glob("*/pipeline.flow"))
    assert [r[0] for r in rows] == [f"example {name}" for name in examples] + [
        "generated, 300 statements: one statement", "generated, 300 statements: typing"]
    assert [r[1] for r in rows][-2:] == ["300", "300"] and all(r[2] == "3" for r in rows) and len(rows[0]) == 9
    compared = section.tables[1].rows
    assert [r[0] for r in compared] == [r[0] for r in rows] and all(len(r) == 9 for r in compared)
    diagnostics, (hover, sync) = section.targets[:-2], section.targets[-2:]
    assert len(diagnostics) == len(examples) + 2 and all(t.measured.endswith(" ms") for t in diagnostics)
    assert hover.text.startswith("hover between edits of 300 statements") and sync.met


def test_typing_gives_new_text_at_every_edit_and_moves_what_follows():
    text = "SOURCE s0 FROM PARQUET 'in/' SCHEMA (id STRING, amount DOUBLE);\n" \
           "STREAM s1 = SELECT id FROM s0;\nSTREAM s2 = SELECT id, amount FROM s0;\nSINK s2 TO CONSOLE;\n"
    versions = lsp_latency.typing(text, 30)
    assert len(set(versions)) == 30 and all(len(v) == len(text) + n for n, v in enumerate(versions, start=1))
    assert versions[4].count("SELECT id, amount, amo FROM s0") == 1      # the SELECT past the middle
    assert lsp_latency.one_statement(text, 3) == [lsp_latency._typo(text), text, lsp_latency._typo(text)]


def test_writing_the_section_leaves_the_others_as_they_were(tmp_path):
    results = tmp_path / "RESULTS.md"
    results.write_text("# Benchmark results\n\nhead\n\n## 1. One\n\nfirst\n\n## 2. Two\n\nsecond\n")
    lsp_latency.write_section(f"## {lsp_latency.TITLE}\n\nv1\n", results)
    lsp_latency.write_section(f"## {lsp_latency.TITLE}\n\nv2\n", results)
    text = results.read_text()
    assert text == ("# Benchmark results\n\nhead\n\n## 1. One\n\nfirst\n\n## 2. Two\n\nsecond\n\n"
                    f"## {lsp_latency.TITLE}\n\nv2\n")


def test_writing_the_section_counts_the_targets_of_every_section_again(tmp_path):
    results = tmp_path / "RESULTS.md"
    results.write_text("# Benchmark results\n\n| targets met (all sections) | 1 of 3 |\n\n## 1. One\n\n"
                       "| target | measured | met |\n|---|---|---|\n| a | 1 | yes |\n| b | 2 | **no** |\n\n"
                       f"## {lsp_latency.TITLE}\n\n| target | measured | met |\n|---|---|---|\n| c | 3 | **no** |\n")
    lsp_latency.write_section(f"## {lsp_latency.TITLE}\n\n| target | measured | met |\n|---|---|---|\n"
                              "| c | 1 | yes |\n| d | 1 | yes |\n", results)
    assert "| targets met (all sections) | 3 of 4 |" in results.read_text()
