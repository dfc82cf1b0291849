"""Snapshots of the logical plan, the physical plan and the generated job for every example and
every focused case in tests/cases: an optimiser or code-generation change shows up as a diff."""
from __future__ import annotations

from pathlib import Path

import pytest

from dslc.compiler.plan import explain
from dslc.compiler.optimizer import explain as physical_explain
from dslc.compiler.pipeline import check_file, compile_file

ROOT = Path(__file__).resolve().parents[2]
FLOWS = sorted([*ROOT.glob("examples/*/pipeline.flow"), *ROOT.glob("tests/cases/*/pipeline.flow")])


def _id(path: Path) -> str:
    return f"{path.parent.parent.name}/{path.parent.name}"


@pytest.mark.parametrize("flow", FLOWS, ids=_id)
def test_logical_plan(flow, snapshot):
    plan = check_file(flow)
    assert explain.render_text(plan).replace(str(ROOT), "<root>") == snapshot


@pytest.mark.parametrize("flow", FLOWS, ids=_id)
def test_physical_plan(flow, snapshot):
    plan = check_file(flow)
    assert physical_explain.render_physical(plan, "text") == snapshot


@pytest.mark.parametrize("flow", FLOWS, ids=_id)
def test_generated_job(flow, snapshot):
    code = compile_file(flow, job_folder=str(flow.parent))
    assert code == compile_file(flow, job_folder=str(flow.parent)), "code generation is not deterministic"
    compile(code, str(flow.with_name("job.py")), "exec")     # it is valid Python
    assert code == snapshot


def test_every_example_folder_has_a_pipeline():
    """An example folder without pipeline.flow would silently escape the snapshots above."""
    folders = [p for p in (ROOT / "examples").iterdir() if p.is_dir() and not p.name.startswith(("_", "."))]
    assert folders, "no examples found"
    assert [f.name for f in folders if not (f / "pipeline.flow").is_file()] == []
