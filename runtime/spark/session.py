"""The SparkSession of a generated job, and shipping user modules to executors."""
from __future__ import annotations

import os
import sys
from pathlib import Path

from pyspark.sql import SparkSession

from dslc.runtime import run_env

from .runtime_zip import RuntimeZipError, runtime_zip


def flow_folder(job_file: str, relative: str) -> str:
    """The .flow file's folder, given relative to the job file (env DSLC_FLOW_FOLDER wins)."""
    override = run_env.FLOW_FOLDER.get()
    if override:
        return str(Path(override).resolve())
    return str((Path(job_file).resolve().parent / relative).resolve())


def resolve(folder: str, path: str) -> str:
    """A path of the .flow file (relative to its folder) as Spark reads it; URLs pass as they are."""
    if "://" in path or os.path.isabs(path):
        return path
    return str(Path(folder) / path)


def session(app_name: str, conf: dict[str, str], folder: str, modules: tuple[str, ...] = ()) -> SparkSession:
    """Get or create the session (Spark Connect when a remote is given); ship user modules and the
    runtime; pin the session time zone to UTC."""
    remote = remote_url()
    if remote:
        builder = SparkSession.builder.remote(remote)   # no master: the server has its own
        conf = {k: v for k, v in conf.items() if k != "spark.master"}
    else:
        # Executors must run the same Python as the driver when both are on this machine.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        builder = SparkSession.builder
        if "spark.master" not in conf and not _submitted():
            builder = builder.master(run_env.MASTER.get())
    builder = builder.appName(app_name).config("spark.sql.session.timeZone", "UTC")
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.conf.set(run_env.FLOW_FOLDER_CONF.name, folder)   # where the run's metrics file goes by default
    if not is_connect(spark):
        quiet_by_default(spark)
    ship_modules(spark, folder, modules)
    from .lineage import listen
    listen(spark)       # dslc run --lineage: a RUNNING event after each micro-batch
    from .preflight import check_before_start
    check_before_start(spark)       # under `dslc run`: every query Spark refuses, before any action
    return spark


def remote_url() -> str | None:
    """The Spark Connect server to use: `--remote URL` on the job's command line, else $SPARK_REMOTE."""
    argv = sys.argv[1:]
    for i, arg in enumerate(argv):
        if arg == "--remote" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--remote="):
            return arg.split("=", 1)[1]
    return os.environ.get("SPARK_REMOTE") or None


def is_connect(spark: SparkSession) -> bool:
    """True for a Spark Connect session (no SparkContext, no JVM in this process)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def parallelism(spark: SparkSession) -> int:
    """How many tasks run at once: defaultParallelism, or on Connect (which cannot ask the cluster)
    `spark.default.parallelism`, else `spark.sql.shuffle.partitions`."""
    if not is_connect(spark):
        return spark.sparkContext.defaultParallelism
    value = spark.conf.get("spark.default.parallelism", None) or spark.conf.get("spark.sql.shuffle.partitions")
    return max(1, int(value))


def checkpoint(df):
    """Spark Connect's `keep`: the server's checkpoint folder when `spark.checkpoint.dir` is set,
    else a local checkpoint on its executors."""
    if df.sparkSession.conf.get("spark.checkpoint.dir", None):
        return df.checkpoint(eager=True)
    return df.localCheckpoint(eager=True)


def batch_function(df, function):
    """`function(batch, batch_id)` as foreachBatch runs it: itself on a classic session (it runs in
    this process); on Spark Connect wrapped to carry the shipped runtime and user modules into the
    server's own foreachBatch worker, which does not get the session's artifacts (portable.py)."""
    return _portable(df.sparkSession, function) if is_connect(df.sparkSession) else function


def worker_function(df, function):
    """A Python function Spark runs over `df`'s partitions (mapInArrow, foreachPartition): itself,
    except in a streaming query on Spark Connect, whose Python workers do not get the session's
    artifacts either (portable.py)."""
    return _portable(df.sparkSession, function) if is_connect(df.sparkSession) and df.isStreaming else function


WORKER_STARTS = 3


def start_query(writer, path: str | None = None):
    """`writer.start()`. A Spark Connect server gives a foreachBatch query's Python worker 10 s to
    start (fixed in Spark 4) and refuses the query when it is late, which a busy server machine
    causes now and then: the start is tried again (nothing of the query exists yet), and after
    WORKER_STARTS attempts the job stops with a clear error instead of the server's stack trace."""
    start = (lambda: writer.start(path)) if path else writer.start
    if not type(writer).__module__.startswith("pyspark.sql.connect"):
        return start()
    for attempt in range(1, WORKER_STARTS + 1):
        try:
            return start()
        except Exception as exc:
            if "Python worker failed to connect back" not in str(exc):
                raise
            if attempt == WORKER_STARTS:
                raise SystemExit(
                    f"dslc: error: the Spark Connect server could not start the Python worker of a STREAMING query "
                    f"(foreachBatch) within its 10 s limit, {WORKER_STARTS} times.\n"
                    "  hint: the server machine is overloaded, or its Python lacks pyspark's connect extra "
                    "(pip install 'pyspark[connect]' there)") from None


def _portable(spark: SparkSession, function):
    from .portable import portable

    return portable(function, list(_shipped.get(id(spark), ())))


def quiet_by_default(spark: SparkSession) -> None:
    """Spark logs at WARN unless `spark.log.level` was given (`--conf`, SET): the same under `dslc run`,
    spark-submit and `python job.py`. (A Spark Connect server keeps its own log level.)"""
    context = spark.sparkContext
    if context.getConf().get("spark.log.level") is None:
        context.setLogLevel("WARN")


def _submitted() -> bool:
    """True when spark-submit started us (it sets the master itself)."""
    return "pyspark-shell" in os.environ.get("PYSPARK_SUBMIT_ARGS", "") or bool(os.environ.get("SPARK_ENV_LOADED"))


def ship_modules(spark: SparkSession, folder: str, modules: tuple[str, ...]) -> None:
    """Ship each user module beside the .flow file, and the runtime when executors may lack it:
    addPyFile on a classic session, addArtifacts(pyfile=True) on Spark Connect."""
    paths = [str(p) for p in (Path(folder) / (m.replace(".", "/") + ".py") for m in modules) if p.is_file()]
    connect = is_connect(spark)
    if run_env.SHIP_RUNTIME.get() == "1" and (connect or not _in_process(spark.sparkContext.master)):
        try:
            paths.append(runtime_zip())
        except RuntimeZipError as exc:
            raise SystemExit(str(exc)) from None
    if connect:
        shipped = _shipped.setdefault(id(spark), [])
        for path in paths:
            if path not in shipped:
                spark.addArtifacts(path, pyfile=True)
                shipped.append(path)
        return
    context = spark.sparkContext
    by_name = _shipped_files.setdefault(id(context), {})
    for path in paths:
        name, content = Path(path).name, Path(path).read_bytes()
        if by_name.get(name, content) != content:
            # Spark would register the file before finding the clash, and every later task of
            # this session would then fail: refuse before touching the session.
            raise SystemExit(
                f"dslc: error: this Spark session already runs a different module named {name!r}; "
                f"{path} cannot be shipped beside it.\n"
                "  hint: give the module a name of its own, or run the pipeline in its own session")
        if name not in by_name:
            context.addPyFile(path)
            by_name[name] = content


_shipped: dict[int, list[str]] = {}   # Connect sessions: artifacts already added (adding twice fails)
_shipped_files: dict[int, dict[str, bytes]] = {}   # classic sessions: file name -> content shipped


def _in_process(master: str) -> bool:
    """`local` and `local[...]` run executors in this JVM; `local-cluster[...]` starts real ones."""
    return master == "local" or master.startswith("local[")


def require_kafka(spark: SparkSession, uses: tuple[str, ...]) -> None:
    """Stop with a clear message, before any work, when Spark's Kafka connector is not on the classpath.

    Spark's own error ("Failed to find data source: kafka") comes late and names neither the
    statement nor the package to add.
    """
    if is_connect(spark) or has_format(spark, "kafka"):
        return   # a Connect server's classpath cannot be inspected from here: Spark's own error stands
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
