"""Compile a .flow file and run the job in this process, on the test run's SparkSession."""
from __future__ import annotations

import os
import runpy
import shutil
from pathlib import Path

from dslc.compiler.pipeline import compile_file

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def copy_example(example: str, folder: Path, port: int | None = None) -> Path:
    """A copy of examples/<example> in `folder` (no outputs); with `port`, its service URL points
    there. Returns the copy's pipeline.flow."""
    shutil.copytree(EXAMPLES / example, folder, ignore=shutil.ignore_patterns("target", "__pycache__", "spark-warehouse"))
    flow = folder / "pipeline.flow"
    if port is not None:
        flow.write_text(flow.read_text().replace("127.0.0.1:8765", f"127.0.0.1:{port}"))
    return flow


def run_flow(flow: Path, **options) -> Path:
    """Compile `flow` beside itself and run the job's main(); return the job file."""
    job = flow.with_name("job.py")
    job.write_text(compile_file(flow, job_folder=str(flow.parent), **options))
    os.environ.pop("DSLC_FLOW_FOLDER", None)
    runpy.run_path(str(job), run_name="__main__")
    return job
