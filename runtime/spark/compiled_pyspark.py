"""Import the installed, compiled PySpark rather than the source zip spark-submit puts first.

spark-submit, and Spark's factory of Python workers, put `$SPARK_HOME/python/lib/pyspark.zip`
and py4j's zip at the head of PYTHONPATH. With PySpark installed by pip, SPARK_HOME is that
installed package, and the zip inside it holds the same sources without bytecode: Python
compiles every PySpark module it imports from the zip, in the driver and again in every Python
worker, at every start (seconds of CPU per process; bench/run_start.py). When the zips lie inside
a pyspark package that is also on sys.path, they are the same code, so they go behind it.

This module imports nothing of PySpark: it runs before the first PySpark import of a job's
driver (runtime/spark/__init__.py) and of the Python worker daemon (daemon.py).
"""
from __future__ import annotations

import os
import re
import sys

_SPARK_ZIPS = re.compile(r"(^|[/\\])(pyspark\.zip|py4j-[\w.]+-src\.zip)$")


def prefer_installed_pyspark(path: list[str] | None = None) -> bool:
    """Move Spark's source zips to the end of `path` (sys.path) when every one of them lies
    inside an installed pyspark package on it; True when they moved. Nothing moves once PySpark
    is imported (its modules come from where it was found), nor for a Spark whose zips are not
    an installed package's (a Spark distribution's SPARK_HOME: the zip is the only copy)."""
    path = sys.path if path is None else path
    if path is sys.path and "pyspark" in sys.modules:
        return False
    zips = [entry for entry in path if _SPARK_ZIPS.search(entry)]
    if not zips:
        return False
    installed = [os.path.realpath(os.path.join(entry, "pyspark")) + os.sep for entry in path
                 if entry not in zips and os.path.isfile(os.path.join(entry, "pyspark", "__init__.py"))]
    if not installed or not all(any(os.path.realpath(z).startswith(p) for p in installed) for z in zips):
        return False
    for entry in zips:
        path.remove(entry)
        path.append(entry)
    return True
