"""README.md's samples are what their commands print, its first pipeline runs as written, and its
claims about the examples count them (tests/docs/sample_outputs.py says how samples are run)."""
from __future__ import annotations

import re

import pytest
from sample_outputs import REPO, blocks, commands, fences, run_document

pytestmark = [pytest.mark.spark, pytest.mark.slow]
README = REPO / "README.md"


def _section(title: str) -> str:
    text = README.read_text()
    return text.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_the_readme_samples_are_what_the_commands_print():
    """Also runs the first pipeline in five minutes: every step of it, as written, in order."""
    mismatches = run_document(README)
    assert not mismatches, "\n\n".join(map(str, mismatches))


def test_every_step_of_the_first_pipeline_is_run_by_the_sample_test():
    section = _section("Your first pipeline in five minutes")
    lines = section.split("\n")
    marked = blocks(section)
    assert len(marked) == len(fences(lines)), "a block of the section is neither run nor saved nor compared"
    kinds = [b.kind for b in marked]
    assert kinds.count("run") >= 2 and kinds.count("file") == 2 and "output" in kinds
    ran = [command for b in marked if b.kind == "output" for command, _ in commands(b)]
    assert "dslc check pipeline.flow" in ran and "dslc run pipeline.flow" in ran
    files = {b.arg: b for b in marked if b.kind == "file"}
    assert set(files) == {"data/products.csv", "pipeline.flow"}
    flow = "\n".join(files["pipeline.flow"].body)
    assert all(word in flow for word in ("FROM CSV", "WITH HTTP", "SINK priced TO PARQUET"))


def test_the_examples_table_and_the_test_count_are_the_examples():
    examples = sorted(p.parent.name for p in (REPO / "examples").glob("*/pipeline.flow"))
    table = _section("Examples")
    assert sorted(re.findall(r"examples/run\.py (\w+)`", table)) == examples
    cases = sum(len(re.findall(r"^\s*- name:", (REPO / "examples" / name / "pipeline.test.yaml").read_text(), re.M))
                for name in examples)
    assert f'"{cases} passed, 0 failed"' in table
