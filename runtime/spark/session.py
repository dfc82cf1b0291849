"""The SparkSession of a generated job, and shipping user modules to executors."""
from __future__ import annotations

import os
import sys
from pathlib import Path

from pyspark.sql import SparkSession

from .runtime_zip import RuntimeZipError, runtime_zip


def flow_folder(job_file: str, relative: str) -> str:
    """The .flow file's folder, given relative to the job file (env DSLC_FLOW_FOLDER wins)."""
    override = os.environ.get("DSLC_FLOW_FOLDER")
    if override:
        return str(Path(override).resolve())
    return str((Path(job_file).resolve().parent / relative).resolve())


def resolve(folder: str, path: str) -> str:
    """A path of the .flow file (relative to its folder) as Spark reads it; URLs pass as they are."""
    if "://" in path or os.path.isabs(path):
        return path
    return str(Path(folder) / path)


def session(app_name: str, conf: dict[str, str], folder: str, modules: tuple[str, ...] = ()) -> SparkSession:
    """Get or create the session; ship user modules; pin the session time zone to UTC."""
    # Executors must run the same Python as the driver when both are on this machine.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    if "spark.master" not in conf and not _submitted():
        builder = builder.master(os.environ.get("DSLC_MASTER", "local[*]"))
    builder = builder.config("spark.sql.session.timeZone", "UTC")
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.conf.set("spark.dslc.flow.folder", folder)   # where the run's metrics file goes by default
    quiet_by_default(spark)
    ship_modules(spark, folder, modules)
    return spark


def quiet_by_default(spark: SparkSession) -> None:
    """Spark logs at WARN unless `spark.log.level` was given (`--conf`, SET): the same under `dslc run`,
    spark-submit and `python job.py`."""
    context = spark.sparkContext
    if context.getConf().get("spark.log.level") is None:
        context.setLogLevel("WARN")


def _submitted() -> bool:
    """True when spark-submit started us (it sets the master itself)."""
    return "pyspark-shell" in os.environ.get("PYSPARK_SUBMIT_ARGS", "") or bool(os.environ.get("SPARK_ENV_LOADED"))


def ship_modules(spark: SparkSession, folder: str, modules: tuple[str, ...]) -> None:
    """addPyFile each user module beside the .flow file; the runtime too when executors lack it."""
    context = spark.sparkContext
    shipped = set(context.getConf().get("spark.dslc.shipped", "").split(","))
    for module in modules:
        path = Path(folder) / (module.replace(".", "/") + ".py")
        if path.is_file() and str(path) not in shipped:
            context.addPyFile(str(path))
            shipped.add(str(path))
    if not _in_process(context.master) and os.environ.get("DSLC_SHIP_RUNTIME", "1") == "1":
        try:
            context.addPyFile(runtime_zip())
        except RuntimeZipError as exc:
            raise SystemExit(str(exc)) from None


def _in_process(master: str) -> bool:
    """`local` and `local[...]` run executors in this JVM; `local-cluster[...]` starts real ones."""
    return master == "local" or master.startswith("local[")


def require_kafka(spark: SparkSession, uses: tuple[str, ...]) -> None:
    """Stop with a clear message, before any work, when Spark's Kafka connector is not on the classpath.

    Spark's own error ("Failed to find data source: kafka") comes late and names neither the
    statement nor the package to add.
    """
    if has_format(spark, "kafka"):
        return
    jvm = spark.sparkContext._jvm
    scala = jvm.scala.util.Properties.versionNumberString().rsplit(".", 1)[0]
    package = f"org.apache.spark:spark-sql-kafka-0-10_{scala}:{spark.version}"
    raise SystemExit(
        f"dslc: error: {', '.join(uses)} needs Spark's Kafka connector, which is not on the classpath.\n"
        f"  hint: dslc run FILE -- --packages {package}\n"
        f"        (or spark-submit --packages {package} job.py)")


def has_format(spark: SparkSession, name: str) -> bool:
    """True when Spark can load data source `name` (built in, or from a package on the classpath)."""
    try:
        spark.sparkContext._jvm.org.apache.spark.sql.execution.datasources.DataSource.lookupDataSource(
            name, spark._jsparkSession.sessionState().conf())
        return True
    except Exception:  # py4j wraps the JVM's ClassNotFound-style failure
        return False
