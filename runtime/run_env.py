"""The contract between `dslc run` (or `dslc test`, the REPL, a user's spark-submit) and the job:
every `DSLC_*` environment variable, every `spark.dslc.*` setting and every `dslc.*` Spark local
property, declared once with who sets it, who reads it and what it means (issue #42 item 3).

A module that sets or reads one names it from here (`run_env.FLOW_FOLDER.get()`), never by a
string of its own; tests/tooling/test_run_env.py fails on a `DSLC_*` or `spark.dslc.*` name a
shipped module spells that is not declared here, and on a docs table (docs/operations.md,
"Environment variables and settings") that differs from `markdown_table()`.

A leaf: standard library only, imported by the compiler, the driver and the Python workers
(executors without Spark's Python package included).
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Variable:
    """One name of the contract. `default`: what a reader takes when it is not set (None: not
    set means off, or a default the reader computes, which `meaning` says)."""

    name: str
    set_by: str
    read_by: str
    meaning: str
    default: str | None = None

    kind = "environment variable"

    def get(self, default: str | None = None, environ: Mapping[str, str] | None = None) -> str | None:
        """The value in `environ` (the process's environment), else `default`, else the declared
        default; as `os.environ.get` does, a variable set to "" is "", not the default."""
        env = os.environ if environ is None else environ
        return env.get(self.name, self.default if default is None else default)

    def switched_off(self, environ: Mapping[str, str] | None = None) -> bool:
        """A switch that is on unless set to 0."""
        return self.get(environ=environ) == "0"

    def is_one(self, environ: Mapping[str, str] | None = None) -> bool:
        """A switch that is off unless set to 1."""
        return self.get(environ=environ) == "1"


@dataclass(frozen=True)
class Setting(Variable):
    """A Spark configuration key (`SET key = value;` in the .flow file, or `--conf key=value`)."""

    kind = "Spark setting"


@dataclass(frozen=True)
class LocalProperty(Variable):
    """A Spark local property of the driver's thread, seen by the tasks it starts."""

    kind = "Spark local property"


RUN, TEST = "`dslc run`", "`dslc test`"

# --------------------------------------------------------------------------- where the run is

FLOW_FOLDER = Variable(
    "DSLC_FLOW_FOLDER", f"{RUN}, the REPL, `dslc explain --estimate`; a cluster's driver environment",
    "runtime/spark/session.py (`flow_folder`)",
    "the `.flow` file's folder: relative paths and user modules resolve against it (else the "
    "folder the job was compiled for, relative to the job file)")
FLOW_FILE = Variable(
    "DSLC_FLOW_FILE", RUN, "runtime/spark/analysis_errors.py, runtime/spark/preflight.py",
    "the `.flow` file: Spark's analysis errors are given as its `file:line:col`, and the job "
    "checks its queries with Spark's analyzer before the first action")
MASTER = Variable(
    "DSLC_MASTER", "the user",
    "runtime/spark/session.py, compiler/interactive/spark_runner.py, compiler/cli/estimate_command.py, "
    "testing/runner.py (default `local[2]` there)",
    "Spark's master for a job started without spark-submit (`python job.py`), the REPL, the "
    "estimate and `dslc test`", "local[*]")
SHIP_RUNTIME = Variable(
    "DSLC_SHIP_RUNTIME", "the user", "runtime/spark/session.py, runtime/spark/python_source.py",
    "`0`: do not ship dslc's runtime as a zip to a cluster's executors or a Spark Connect server "
    "(dslc is installed there)", "1")
SPARK_PREFLIGHT = Variable(
    "DSLC_SPARK_PREFLIGHT", "the user", "runtime/spark/preflight.py",
    "`0`: skip the check of every query with Spark's analyzer before the job's first action", "1")
FLOW_FOLDER_CONF = Setting(
    "spark.dslc.flow.folder", "the job (runtime/spark/session.py), from `DSLC_FLOW_FOLDER`",
    "runtime/spark/metrics.py, runtime/spark/outcome.py, runtime/spark/chains.py",
    "the `.flow` file's folder as the session knows it: the metrics file's default folder, the "
    "run's outcome, where a relative STORE folder is")

# --------------------------------------------------------------------------- secrets

SECRETS_FILE = Variable(
    "DSLC_SECRETS_FILE", f"{RUN} `--secrets FILE`, `dslc explain --estimate`; the user",
    "runtime/secrets.py (driver only: never passed to executors)",
    "a file of `NAME=value` lines read before the environment for `${NAME}` secrets")
SECRETS_OPTIONAL = Variable(
    "DSLC_SECRETS_OPTIONAL", f"{RUN} `--replay`, {TEST}", "runtime/secrets.py",
    "`1`: a missing secret is no error (the calls are answered from a recording)")

# --------------------------------------------------------------------------- recording

RECORD = Variable(
    "DSLC_RECORD", f"{RUN} `--record DIR`", "runtime/wrappers/recording.py",
    "record every call's answer into DIR (a folder, or JSON `{\"dir\": ...}`); also passed as "
    "`spark.executorEnv.DSLC_RECORD`")
REPLAY = Variable(
    "DSLC_REPLAY", f"{RUN} `--replay DIR`", "runtime/wrappers/recording.py, runtime/spark/outcome.py",
    "answer every call from the recording in DIR, calling nothing; also passed as "
    "`spark.executorEnv.DSLC_REPLAY`")
RECORD_PROPERTY = LocalProperty(
    "dslc.record", "tests (a job run in-process)", "runtime/wrappers/recording.py",
    "as `DSLC_RECORD`, for the tasks one thread starts (wins over the variable)")
REPLAY_PROPERTY = LocalProperty(
    "dslc.replay", f"{TEST} (testing/harness.py)", "runtime/wrappers/recording.py",
    "as `DSLC_REPLAY`, for the tasks one thread starts (wins over the variable)")

# --------------------------------------------------------------------------- progress and metrics

PROGRESS = Variable(
    "DSLC_PROGRESS", f"the user; {TEST} (`0`)", "runtime/spark/progress.py, compiler/cli/commands.py",
    "`0`: no live progress and no per-micro-batch figures", "1")
PROGRESS_CONF = Setting(
    "spark.dslc.progress", "the user", "runtime/spark/progress.py",
    "`false`: as `DSLC_PROGRESS=0`", "true")
PROGRESS_FILE = Variable(
    "DSLC_PROGRESS_FILE", f"{RUN} on a terminal", "runtime/spark/metrics.py",
    "where the driver writes its live figures for `dslc run` to draw as a table (else a line "
    "every 10 s on stderr)")
PROGRESS_HOST = Variable(
    "DSLC_PROGRESS_HOST", "the user", "runtime/spark/progress.py",
    "the address executors send their figures to (else the driver's host as Spark knows it)")
PROGRESS_HOST_CONF = Setting(
    "spark.dslc.progress.host", "the user", "runtime/spark/progress.py", "as `DSLC_PROGRESS_HOST`")
PROGRESS_PORT_CONF = Setting(
    "spark.dslc.progress.port", "the user", "runtime/spark/metrics.py",
    "the port the driver receives executors' figures on (`0`: an ephemeral one)", "0")
METRICS_FILE = Variable(
    "DSLC_METRICS_FILE", f"the user; {TEST}", "runtime/spark/metrics.py",
    "the run's JSON metrics file, exactly")
METRICS_DIR = Variable(
    "DSLC_METRICS_DIR", "the user", "runtime/spark/metrics.py",
    "the folder of the run's metrics file (else `spark.dslc.metrics.dir`, else `target/metrics/` "
    "beside the `.flow` file)")
METRICS_DIR_CONF = Setting(
    "spark.dslc.metrics.dir", "the user", "runtime/spark/metrics.py", "as `DSLC_METRICS_DIR`")
METRICS_SUMMARY = Variable(
    "DSLC_METRICS_SUMMARY", "the user", "runtime/spark/metrics.py",
    "a file the metrics table is written to instead of stderr")
METRICS_SUMMARY_CONF = Setting(
    "spark.dslc.metrics.summary", "the user", "runtime/spark/metrics.py", "as `DSLC_METRICS_SUMMARY`")
METRICS_QUIET = Variable(
    "DSLC_METRICS_QUIET", TEST, "runtime/spark/metrics.py",
    "`1`: the figures go to the metrics file only, nothing is printed")
METRICS_WRITTEN = Variable(
    "DSLC_METRICS_WRITTEN", f"{RUN} `--report`", "runtime/spark/metrics.py",
    "a file the job writes the metrics file's path into, for the report")
PLAN_DOT = Variable(
    "DSLC_PLAN_DOT", f"{RUN} `--report`", "runtime/spark/metrics.py",
    "the plan's picture (Graphviz dot), for the report")
LINEAGE_RUNNING = Variable(
    "DSLC_LINEAGE_RUNNING", f"{RUN} `--lineage DEST`", "runtime/spark/lineage.py",
    "a JSON file with the run's OpenLineage job, run id and transport, for the RUNNING event of each "
    "STREAMING micro-batch")
SUMMARY_JSON = Variable(
    "DSLC_SUMMARY_JSON", f"{RUN} `--summary-json FILE`", "runtime/spark/outcome.py",
    "where the run's outcome is written as JSON")
BATCH_LINES_CONF = Setting(
    "spark.dslc.batch.lines", "the user", "runtime/spark/provider_batches.py",
    "lines per provider batch of a TIER BATCH ENRICH (the provider's limit)", "50000")
COUNT_ROWS_CONF = Setting(
    "spark.dslc.count_rows", "the user", "runtime/spark/counting.py",
    "`false`: no row counts (sources, sinks, chains)", "true")

# --------------------------------------------------------------------------- how the job runs

RUN_LOG = Variable(
    "DSLC_RUN_LOG", RUN, "runtime/spark/failure.py (driver only)",
    "the run's log file: a failure's traceback goes there, one line to stderr")
EVENT_LOOP = Variable(
    "DSLC_EVENT_LOOP", "the user (the workers' environment: `spark.executorEnv.DSLC_EVENT_LOOP`)",
    "runtime/core/worker_loop.py", "`asyncio`: the workers' calls run on asyncio's loop, not uvloop's")
STORE_JOIN_CONF = Setting(
    "spark.dslc.store.join", "the user", "runtime/spark/stored_join.py",
    "how a warm rerun joins STORE's answers to the rows: `true`, looked up in the chain's pass on a "
    "local master and Spark's join elsewhere; `spark`, Spark's join everywhere; `false`, every row "
    "asks the store", "true")

# --------------------------------------------------------------------------- the tools around the run

JDBC_JAR = Variable(
    "DSLC_JDBC_JAR", "the user", "compiler/cli/jdbc_jar.py",
    "PostgreSQL's JDBC driver jar for DATABASE sources and sinks (else `--jars`, else Debian's)")
LSP_LOG = Variable(
    "DSLC_LSP_LOG", "the user (the editor's settings)", "compiler/lsp/server.py",
    "the language server's log level on stderr", "WARNING")
DEBUG = Variable(
    "DSLC_DEBUG", "the user", "compiler/cli/repl.py", "set: the REPL prints a failure's traceback")
HISTORY = Variable(
    "DSLC_HISTORY", "the user", "compiler/cli/repl.py",
    "the REPL's history file (else `~/.dslc_history`)")
PG_BIN = Variable(
    "DSLC_PG_BIN", "the user", "testing/postgres.py",
    "the folder of PostgreSQL's `initdb` and `pg_ctl` for the tests' private cluster (else Debian's)")
TEST_CACHE = Variable(
    "DSLC_TEST_CACHE", "the user", "tests/e2e/cluster_support.py",
    "where the end-to-end tests keep the executors' Python environment (else "
    "`~/.cache/dslc-tests`)")

ALL: tuple[Variable, ...] = tuple(v for v in globals().values() if isinstance(v, Variable))
BY_NAME: dict[str, Variable] = {v.name: v for v in ALL}


def markdown_table() -> str:
    """The docs' table of the contract (docs/operations.md), one row per name, in declaration order."""
    rows = ["| Name | Kind | Set by | Read by | Default | Meaning |", "|---|---|---|---|---|---|"]
    for v in ALL:
        default = f"`{v.default}`" if v.default is not None else ""
        cells = (f"`{v.name}`", v.kind, v.set_by, v.read_by, default, v.meaning)
        rows.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(rows) + "\n"
