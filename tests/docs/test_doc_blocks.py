"""The user documentation (README.md, docs/*.md) says what dslc does, in words a user reads: every
fenced block without a language is a sample that is run (or knowingly an illustration), no
internal notes, and the facts that were once said two ways are said one way, the code's."""
from __future__ import annotations

import re

import pytest
from sample_outputs import _MARKER, REPO, fences

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_a_block_without_a_language_is_a_sample_that_runs_or_an_illustration(doc):
    lines = doc.read_text().split("\n")
    unmarked = [start + 1 for start, _, lang in fences(lines)
                if not lang and not (start and _MARKER.match(lines[start - 1]))]
    assert unmarked == [], f"{doc.name}: lines {unmarked}: mark each <!-- output -->, or tag its language"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_no_internal_notes_in_user_docs(doc):
    text = doc.read_text()
    notes = [m.group(0) for m in re.finditer(
        r"(?i)\bthe contract\b|\bcontract's\b|\b(?:third|fourth|fifth) round\b|spec is silent|\bthe spec\b|"
        r"spec's|deviation from|\(for now\)|\bissue #?\d+|#\d+ item|shared/spec", text)]
    assert notes == [], f"{doc.name}: {notes}"


def test_the_number_of_examples_is_said_as_it_is():
    count = len(list((REPO / "examples").glob("*/pipeline.flow")))
    words = {2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight"}
    for doc in DOCS:
        for said in re.findall(r"\b(two|three|four|five|six|seven|eight|\d+) examples\b", doc.read_text()):
            assert said in (str(count), words[count]), f"{doc.name} says '{said} examples'; there are {count}"


def _row(doc: str, first_cell: str) -> str:
    return next(line for line in (REPO / doc).read_text().split("\n") if line.startswith(f"| {first_cell} |"))


def test_checkpoint_is_said_as_the_compiler_does_it():
    """Required in STREAMING unless every SINK is CONSOLE, which then gets target/checkpoint/<name>."""
    from dslc.compiler.diagnostics import CompileError
    from dslc.compiler.pipeline import check_text, lower_plan

    source = "PIPELINE p MODE STREAMING;\nSOURCE s FROM RATE;\n"
    with pytest.raises(CompileError) as caught:
        check_text(source + "SINK s TO PARQUET 'out';")
    assert [d.code for d in caught.value.diagnostics] == ["E0308"]
    job = lower_plan(check_text(source + "SINK s TO CONSOLE;"), job_folder=".")
    assert "CHECKPOINT = resolve(FOLDER, 'target/checkpoint/p')" in job
    row = _row("docs/language.md", "`CHECKPOINT 'path'`")
    default = next(sentence for sentence in re.split(r"[.;] ", row) if "target/checkpoint/<name>" in sentence)
    assert "E0308" in row and "CONSOLE" in default         # the default is said with its condition


def test_rate_and_tokens_per_minute_are_said_as_the_runtime_holds_them():
    """Requests: the job's RATE (split per task without STORE). Tokens: per task, split without
    STORE, the whole m per task with STORE (runtime/spark/chains.py, `_share_rates`)."""
    from dslc.runtime import config as C
    from dslc.runtime.spark.chains import _share_rates

    rate = C.Rate(calls=10.0, tokens_per_minute=600.0)
    model = C.ModelCall(model="m", base_url="http://127.0.0.1:9/v1", prompt="{text}")
    base = dict(name="e", line=1, call=model, returns=(C.Column("label", "STRING"),), key_columns=("text",), rate=rate)
    plain, stored = _share_rates((C.Enrich(**base), C.Enrich(**base, store=C.Store("answers.db"))), tasks=4)
    assert (plain.rate.task_rate, plain.rate.task_tokens_per_second) == (2.5, 2.5)
    assert stored.rate.task_tokens_per_second == 10.0                  # the whole m, per task
    language = (REPO / "docs/language.md").read_text()
    assert "with STORE each\ntask holds the whole m" in language
    assert "RATE (requests and tokens) is held per task" not in language
    assert "split per task until the answer store holds one job-wide limiter" not in (REPO / "docs/runtime.md").read_text()
