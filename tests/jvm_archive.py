"""A class-data-sharing archive of Spark's classes for the drivers the tests start.

Every `dslc run`, the session's SparkSession and the Spark Connect server start a JVM through
spark-submit, and most of that start is loading and verifying Spark's classes: the same ones,
from the same jars, every time. Java 17 can save them once, parsed and verified, in an archive
(`-XX:ArchiveClassesAtExit`, a dynamic archive on top of the JDK's own) that every later JVM
maps (`-XX:SharedArchiveFile`): a small job's driver then uses about half the CPU (8 s against
16 s on this machine). Only how the JVM loads its classes changes, not what runs. A JVM whose
class path or JDK differs from the archive's ignores it (its warnings are switched off).

The archive is made once per machine by a small job, cached under $DSLC_TEST_CACHE (default
~/.cache/dslc-tests) under a name holding the JDK's and pyspark's versions and the options.
"""
from __future__ import annotations

import fcntl
import hashlib
import importlib.metadata
import os
import subprocess
import sys
import tempfile
from pathlib import Path

JOB = """\
from pyspark.sql import SparkSession, functions as F
spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").getOrCreate()
folder = __import__("sys").argv[1]
df = spark.range(100).withColumn("k", F.col("id") % 7).withColumn("s", F.concat(F.lit("x"), F.col("id")))
df.groupBy("k").agg(F.count("*"), F.max("s")).join(df, "k").write.mode("overwrite").json(folder + "/j")
spark.read.json(folder + "/j").createOrReplaceTempView("t")
spark.sql("SELECT k, count(*) FROM t GROUP BY k ORDER BY k").collect()
spark.stop()
"""

#: keeps the JVM quiet when an archive does not fit it (it then runs without one)
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"


def _java_version() -> str:
    result = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=60)
    return result.stderr.strip().splitlines()[0] if result.returncode == 0 and result.stderr else ""


def archive(options: str) -> Path | None:
    """The archive for spark-submit JVMs started with `options`, made if missing; None when this
    JDK cannot make one (the JVMs then start as before)."""
    java = _java_version()
    if not java:
        return None
    key = "\n".join([java, importlib.metadata.version("pyspark"), sys.executable, options])
    cache = Path(os.environ.get("DSLC_TEST_CACHE") or Path.home() / ".cache" / "dslc-tests")
    cache.mkdir(parents=True, exist_ok=True)
    path = cache / f"spark-classes-{hashlib.sha256(key.encode()).hexdigest()[:12]}.jsa"
    with open(cache / f"{path.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)          # parallel workers and runs make it once
        if not path.is_file():
            _make(path, options)
    return path if path.is_file() else None


def _make(path: Path, options: str) -> None:
    with tempfile.TemporaryDirectory(prefix="dslc-cds-") as folder:
        job = Path(folder) / "job.py"
        job.write_text(JOB)
        partial = path.with_suffix(".partial")
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable,
               "SPARK_SUBMIT_OPTS": f"{options} {QUIET} -XX:ArchiveClassesAtExit={partial}"}
        for name in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED"):
            env.pop(name, None)
        submit = Path(sys.executable).parent / "spark-submit"
        result = subprocess.run([str(submit), str(job), folder], env=env, capture_output=True, timeout=600,
                                cwd=folder)
        if result.returncode == 0 and partial.is_file():
            partial.rename(path)
        else:
            partial.unlink(missing_ok=True)
