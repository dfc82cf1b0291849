"""What every benchmark shares: the one SparkSession, input files, and running a compiled .flow."""
from __future__ import annotations

import contextlib
import io
import json
import os
import runpy
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from dslc.compiler.pipeline import compile_file
from dslc.testing.app_thread import AppInThread  # noqa: F401 - the bench's in-process services use it

PARTITIONS = 2   # local[2]: two tasks run at once, one per core


def spark_session():
    """The one SparkSession of a bench run: local[2], small shuffles, UTC, no UI."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    return (SparkSession.builder.master(f"local[{PARTITIONS}]").appName("dslc-bench")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", str(PARTITIONS))
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.log.level", "ERROR")
            .config("spark.driver.memory", "2g")
            .config("spark.jars", _jdbc_jar())
            .getOrCreate())


def _jdbc_jar() -> str:
    """PostgreSQL's JDBC driver (section 16, databases), when installed; else no jar."""
    jar = os.environ.get("DSLC_JDBC_JAR", "/usr/share/java/postgresql.jar")
    return jar if Path(jar).is_file() else ""


def write_input(folder: Path, columns: dict[str, list[Any]], partitions: int = PARTITIONS) -> Path:
    """Write the columns as `partitions` Parquet files of equal size (Spark reads one partition
    per file) and return the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    table = pa.table(columns)
    size = -(-table.num_rows // partitions)
    for part in range(partitions):
        pq.write_table(table.slice(part * size, size), folder / f"part-{part:03d}.parquet")
    return folder


@dataclass
class FlowRun:
    """One compiled pipeline run: wall seconds, the job's text and its operator metrics."""

    seconds: float
    job: str
    metrics: dict[str, dict[str, Any]]


def run_flow(flow: Path, **options: Any) -> FlowRun:
    """Compile `flow` (with compiler options such as chaining=False) beside itself, run the job's
    main() in this process on the bench's SparkSession, and time the run (compilation excluded)."""
    job = flow.with_name("job.py")
    job.write_text(compile_file(flow, job_folder=str(flow.parent), **options))
    metrics_file = flow.with_name("metrics.json")
    metrics_file.unlink(missing_ok=True)
    os.environ.pop("DSLC_FLOW_FOLDER", None)
    os.environ["DSLC_METRICS_FILE"] = str(metrics_file)
    try:
        with contextlib.redirect_stderr(io.StringIO()):   # the job's metrics table
            started = time.perf_counter()
            runpy.run_path(str(job), run_name="__main__")
            seconds = time.perf_counter() - started
    finally:
        os.environ.pop("DSLC_METRICS_FILE", None)
    metrics = json.loads(metrics_file.read_text())["operators"] if metrics_file.exists() else {}
    return FlowRun(seconds, job.read_text(), metrics)


@dataclass
class Context:
    """What a benchmark gets: the session, the latency service, the run's size and a scratch root."""

    spark: Any
    service: Any
    full: bool
    root: Path

    def folder(self, name: str) -> Path:
        """A fresh scratch folder under the run's root."""
        path = self.root / name
        path.mkdir(parents=True, exist_ok=True)
        return path


def dslc_run(flow: Path, *spark_args: str) -> float:
    """Seconds of `dslc run FLOW --master local[PARTITIONS] [-- SPARK_ARGS]` as a user types it:
    spark-submit, a new JVM, new Python workers (run_flow above shares the bench's warm JVM)."""
    env = {k: v for k, v in os.environ.items() if k not in ("DSLC_FLOW_FOLDER", "DSLC_METRICS_FILE", "PYSPARK_PYTHON")}
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "dslc.compiler.cli", "run", str(flow), "--master", f"local[{PARTITIONS}]",
                    *(("--", *spark_args) if spark_args else ())], cwd=flow.parent, env=env, check=True,
                   capture_output=True)
    return time.perf_counter() - started


class CountingOutput:
    """The output of an EnrichOperator driven without Spark: counts its rows; a dead letter is
    a bench that measured the wrong thing."""

    def __init__(self) -> None:
        self.rows = 0

    def emit(self, row: Any) -> None:
        self.rows += 1

    def emit_watermark(self, watermark: Any) -> None:
        pass

    def emit_dead_letter(self, letter: Any) -> None:
        raise AssertionError(f"unexpected dead letter {letter}")
