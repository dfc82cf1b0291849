"""Compile a .flow file and run the job in this process, on the test run's SparkSession."""
from __future__ import annotations

import os
import runpy
from pathlib import Path

from dslc.compiler.pipeline import compile_file


def run_flow(flow: Path, **options) -> Path:
    """Compile `flow` beside itself and run the job's main(); return the job file."""
    job = flow.with_name("job.py")
    job.write_text(compile_file(flow, job_folder=str(flow.parent), **options))
    os.environ.pop("DSLC_FLOW_FOLDER", None)
    runpy.run_path(str(job), run_name="__main__")
    return job
