"""Snapshots beside their cases: each folder tests/cases/<name>/ holds a pipeline.flow and what
the compiler makes of it, `plan.txt` (dslc explain), `physical.txt` (dslc explain --physical)
and `job.py` (dslc compile); each example's are in tests/examples/<name>/, the same shape. One
parametrised test discovers the folders, so an optimiser or code-generation change shows up as a
diff of a readable file. `pytest --snapshot-update` rewrites them: review the diff."""
from __future__ import annotations

from pathlib import Path

import pytest

from dslc.compiler.optimizer import explain as physical_explain
from dslc.compiler.pipeline import check_file, compile_file
from dslc.compiler.plan import explain

ROOT = Path(__file__).resolve().parents[2]


def _cases() -> list[tuple[Path, Path]]:
    """(flow, folder of its snapshots) for every example and every case."""
    examples = [(flow, ROOT / "tests/examples" / flow.parent.name) for flow in ROOT.glob("examples/*/pipeline.flow")]
    cases = [(flow, flow.parent) for flow in ROOT.glob("tests/cases/*/pipeline.flow")]
    return sorted(examples + cases)


CASES = _cases()
IDS = [f"{flow.parent.parent.name}/{flow.parent.name}" for flow, _ in CASES]


def _plan(flow: Path) -> str:
    return explain.render_text(check_file(flow)).replace(str(ROOT), "<root>")


def _physical(flow: Path) -> str:
    return physical_explain.render_physical(check_file(flow), "text")


def _job(flow: Path) -> str:
    code = compile_file(flow, job_folder=str(flow.parent))
    assert code == compile_file(flow, job_folder=str(flow.parent)), "code generation is not deterministic"
    compile(code, str(flow.with_name("job.py")), "exec")     # it is valid Python
    return code


OUTPUTS = {"plan.txt": _plan, "physical.txt": _physical, "job.py": _job}


@pytest.mark.parametrize("output", OUTPUTS)
@pytest.mark.parametrize("flow, folder", CASES, ids=IDS)
def test_snapshot(flow, folder, output, request):
    made = OUTPUTS[output](flow)
    snapshot = folder / output
    if request.config.getoption("--snapshot-update", default=False):
        folder.mkdir(parents=True, exist_ok=True)
        if not snapshot.is_file() or snapshot.read_text() != made:
            snapshot.write_text(made)
        return
    assert snapshot.is_file(), f"no {snapshot.relative_to(ROOT)}: run pytest {__file__} --snapshot-update"
    assert made == snapshot.read_text(), f"{snapshot.relative_to(ROOT)} differs (--snapshot-update after review)"


def test_every_snapshot_folder_has_a_flow():
    """A folder of an example that is gone would keep stale snapshots nobody checks."""
    folders = {folder for _, folder in CASES}
    assert sorted(str(p) for p in (ROOT / "tests/examples").iterdir() if p.is_dir() and p not in folders) == []


def test_every_example_folder_has_a_pipeline():
    """An example folder without pipeline.flow would silently escape the snapshots above."""
    folders = [p for p in (ROOT / "examples").iterdir() if p.is_dir() and not p.name.startswith(("_", "."))]
    assert folders, "no examples found"
    assert [f.name for f in folders if not (f / "pipeline.flow").is_file()] == []
