"""Test your own pipelines from pytest: run a case, snapshot a plan or a job.

    from dslc.testing import run_case, plan_text, physical_text, job_code

    def test_big_orders_are_flagged():
        result = run_case("pipeline.flow", sources={...}, enrich={...}, expect={"flagged": [...]})
        assert result.passed, result.report()

    def test_plan(snapshot):
        assert plan_text("pipeline.flow") == snapshot

`run_case` takes the same pieces as a case of a `*.test.yaml` file (see docs/testing.md), or
`test_file=` and `case=` to run a case of such a file. All cases of a process share one Spark
session: the active one if there is one (a pytest fixture's), else a local one.
"""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from .case_file import Case, CaseFileError, load, read_counts
from .harness import CaseResult, check_pipeline, run_prepared

__all__ = ["CaseFileError", "CaseResult", "job_code", "physical_text", "plan_text", "run_case", "run_test_file"]


def _spark(spark):
    if spark is not None:
        return spark
    from .runner import session

    return session()


def run_case(pipeline: str | Path | None = None, *, sources: dict | None = None, enrich: dict | None = None,
             expect: dict | None = None, dead_letters: dict | None = None, quarantine: dict | None = None,
             constraints: dict | None = None, replay: str | Path | None = None,
             unrecorded: str = "error", latency: bool = False, ordered: bool = False, name: str = "case",
             test_file: str | Path | None = None, case: str | None = None, spark=None,
             keep: str | Path | None = None) -> CaseResult:
    """Run one case and return its result (`.passed`, `.report()`, `.rows(sink)`,
    `.rows('quarantine:<stream>')`, `.rows('constraints:<stream>')`).

    Either give the case inline (pipeline, sources, enrich, expect, dead_letters, quarantine,
    constraints, ...) or name a case of a test
    file (`test_file=`, `case=`). A malformed case raises CaseFileError. `keep=` leaves the
    case's folder (job, inputs, outputs) there instead of a removed temporary one.
    """
    if test_file is not None:
        loaded = load(test_file)
        chosen = [c for c in loaded.cases if case is None or c.name == case]
        if not chosen:
            raise CaseFileError(f"{test_file}: no case named {case!r}")
        the_case, flow = chosen[0], loaded.pipeline
    else:
        if pipeline is None:
            raise TypeError("run_case needs a pipeline (or test_file=)")
        from .case_file import _answers, _rows_by_name

        the_case = Case(name=name, sources=_rows_by_name(sources, "source"), enrich=_answers(enrich, "enrich"),
                        replay=Path(replay).resolve() if replay else None, unrecorded=unrecorded, latency=latency,
                        expect=_rows_by_name(expect, "sink"), dead_letters=_rows_by_name(dead_letters, "dead letters of"),
                        quarantine=_rows_by_name(quarantine, "quarantine of"),
                        constraints=read_counts(constraints, "constraints of"), ordered=ordered)
        flow = Path(pipeline)
    if the_case.problem:
        raise CaseFileError(the_case.problem)
    plan = check_pipeline(flow)
    root = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="dslc-case-"))
    try:
        result = run_prepared(_spark(spark), plan, the_case, root)
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)
    return result


def run_test_file(path: str | Path, spark=None) -> list[CaseResult]:
    """Every case of a `*.test.yaml` file."""
    from .runner import run_file

    work = Path(tempfile.mkdtemp(prefix="dslc-test-"))
    try:
        return run_file(load(path), _spark(spark), work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def plan_text(flow: str | Path) -> str:
    """`dslc explain FILE`: the logical plan as text, stable for snapshots."""
    from dslc.compiler.plan.explain import render_text

    return render_text(check_pipeline(Path(flow)))


def physical_text(flow: str | Path) -> str:
    """`dslc explain FILE --physical`: chains and optimiser passes as text."""
    from dslc.compiler.optimizer.explain import render_physical

    return render_physical(check_pipeline(Path(flow)), "text")


def job_code(flow: str | Path, *, mode: str | None = None) -> str:
    """`dslc compile FILE`: the generated PySpark job, as if written beside the .flow file."""
    from dslc.compiler.pipeline import compile_file

    return compile_file(flow, job_folder=str(Path(flow).resolve().parent), mode=mode)
