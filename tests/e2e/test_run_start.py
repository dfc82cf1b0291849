"""What a job's start costs in Python: spark-submit puts PySpark's source zip first, which Python
compiles again in every process; `dslc run` has the driver and the Python workers of a local
master import the installed, compiled PySpark instead (runtime/spark/compiled_pyspark.py,
runtime/spark/daemon.py), and leaves the daemon of a cluster's executors alone."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyspark
import pytest

from dslc.compiler.cli.commands import _daemon, spark_submit
from dslc.runtime.spark.compiled_pyspark import prefer_installed_pyspark

INSTALLED = Path(pyspark.__file__).parent


def _package(site: Path) -> list[Path]:
    """A pip-installed pyspark under `site`, with its source zips inside it, as pip lays them out."""
    (site / "pyspark" / "python" / "lib").mkdir(parents=True)
    (site / "pyspark" / "__init__.py").write_text("")
    zips = [site / "pyspark" / "python" / "lib" / name for name in ("pyspark.zip", "py4j-0.10.9.9-src.zip")]
    for path in zips:
        path.write_bytes(b"")
    return zips


def test_the_zips_of_the_installed_pyspark_go_behind_it(tmp_path):
    site = tmp_path / "site-packages"
    zips = _package(site)
    path = [str(tmp_path / "job"), *map(str, zips), "/usr/lib/python3.11", str(site)]
    assert prefer_installed_pyspark(path)
    assert path == [str(tmp_path / "job"), "/usr/lib/python3.11", str(site), *map(str, zips)]


def test_the_zips_of_a_spark_distribution_stay_first(tmp_path):
    """SPARK_HOME of a downloaded Spark: its zip is the only PySpark there is, or another version."""
    site = tmp_path / "site-packages"
    _package(site)
    distribution = tmp_path / "spark-4.1.0" / "python" / "lib"
    distribution.mkdir(parents=True)
    path = [str(distribution / "pyspark.zip"), str(distribution / "py4j-0.10.9.7-src.zip"), str(site)]
    before = list(path)
    assert not prefer_installed_pyspark(path)
    assert path == before
    assert not prefer_installed_pyspark([str(site)])      # no zip at all


def test_dslc_daemon_only_where_this_python_runs_the_workers():
    python = sys.executable
    assert _daemon("local[*]", [], python) == ["--conf", "spark.python.daemon.module=dslc.runtime.spark.daemon"]
    assert _daemon("local", [], python)
    assert not _daemon("local-cluster[2,1,1024]", [], python)      # executors of their own, maybe without dslc
    assert not _daemon("spark://master:7077", [], python)
    assert not _daemon("local[2]", ["--conf", "spark.pyspark.python=/opt/other/python"], python)
    assert not _daemon("local[2]", ["--conf", "spark.python.daemon.module=mine"], python)
    assert not _daemon("local[2]", [], "/opt/other/python3")


DRIVER = """
import dslc.runtime.spark
import pyspark, py4j
print("PYSPARK", pyspark.__file__)
"""


@pytest.mark.spark
def test_a_submitted_driver_imports_the_installed_pyspark(tmp_path):
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    result = subprocess.run([*spark_submit(), "--master", "local[1]", str(script)], env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    found = [line.split(" ", 1)[1] for line in result.stdout.splitlines() if line.startswith("PYSPARK ")]
    assert found == [str(INSTALLED / "__init__.py")], result.stdout   # not .../python/lib/pyspark.zip/...


FLOW = """
PIPELINE start MODE BATCH;
SOURCE rows FROM JSON 'in/' SCHEMA (id STRING);
STREAM found = ENRICH rows WITH PYTHON 'where:pyspark_of' RETURNS (pyspark STRING, loaded STRING)
  ASYNC UNORDERED CAPACITY 2 TIMEOUT 30s;
SINK found TO JSON 'out' MODE OVERWRITE;
"""

WHERE = '''
import sys

async def pyspark_of(row):
    return {"pyspark": sys.modules["pyspark"].__file__, "loaded": sys.modules["__main__"].__spec__.name}
'''


@pytest.mark.spark
def test_python_workers_of_dslc_run_fork_from_the_compiled_pyspark(tmp_path):
    (tmp_path / "in").mkdir()
    (tmp_path / "in/1.json").write_text("".join(json.dumps({"id": f"r{i}"}) + "\n" for i in range(4)))
    (tmp_path / "where.py").write_text(WHERE)
    (tmp_path / "pipeline.flow").write_text(FLOW)
    env = {k: v for k, v in os.environ.items() if k not in ("DSLC_FLOW_FOLDER", "PYSPARK_PYTHON")}
    result = subprocess.run([sys.executable, "-m", "dslc.compiler.cli", "run", str(tmp_path / "pipeline.flow"),
                             "--master", "local[1]"], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    rows = [json.loads(line) for p in (tmp_path / "out").glob("*.json") for line in p.read_text().splitlines()]
    assert len(rows) == 4
    assert {r["pyspark"] for r in rows} == {str(INSTALLED / "__init__.py")}
    assert {r["loaded"] for r in rows} == {"dslc.runtime.spark.daemon"}
