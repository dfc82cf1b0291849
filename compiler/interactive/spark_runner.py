"""Spark for the REPL (and for `dslc lsp --spark`, without progress): one quiet session, and
jobs that Ctrl-C cancels.

The terminal belongs to the REPL: the JVM's own output (log4j start-up lines, hostname and
native-library warnings, Spark's console progress bar) goes to a log file, decided before the
JVM starts. A job runs in a worker thread under its own Spark job group; the main thread draws
one progress line while it waits and, on Ctrl-C, cancels that group and returns, so the session
(and its JVM) stays usable. Meanwhile Ctrl-C only counts a press (`ctrl_c.CtrlC`): raised inside
one of the main thread's py4j calls, a KeyboardInterrupt would cost the worker its job group.
"""
from __future__ import annotations

import itertools
import os
import sys
import tempfile
import threading
from pathlib import Path
from typing import Callable, Mapping, TextIO, TypeVar

from dslc.compiler.interactive.ctrl_c import CtrlC
from dslc.runtime import run_env

T = TypeVar("T")

_groups = itertools.count(1)


class Interrupted(Exception):
    """The user pressed Ctrl-C; the job group was cancelled."""


class SparkRunner:
    """Creates the REPL's SparkSession on first use and runs cancellable jobs on it."""

    def __init__(self, err: TextIO | None = None, *, progress: bool | None = None,
                 poll_s: float = 0.2, progress_after_s: float = 1.0):
        self.err = err or sys.stderr
        self.progress = self.err.isatty() if progress is None else progress
        self.poll_s = poll_s
        self.progress_after_s = progress_after_s
        self.log_path = Path(tempfile.gettempdir()) / f"dslc-repl-{os.getpid()}" / "spark.log"
        self._spark = None
        self._cancelled = threading.Event()
        self._starting = threading.Lock()      # one JVM, whoever asks first (the background start)
        self.start_error: BaseException | None = None

    def start_in_background(self, conf: Mapping[str, str] = ()) -> threading.Thread:
        """Start the session on a daemon thread now, so that the JVM is up (or its failure known)
        when the first statement is checked; `session()` waits for it. A failure is kept in
        `start_error` and raised again by `session()` (call `forget_failure()` to try again)."""
        def start() -> None:
            try:
                self.session(conf)
            except BaseException:   # kept by session(); the REPL says it when it needs Spark
                pass

        thread = threading.Thread(target=start, name="dslc-spark-start", daemon=True)
        thread.start()
        return thread

    def forget_failure(self) -> None:
        self.start_error = None

    @property
    def ready(self) -> bool:
        return self._spark is not None

    # ---- the session
    def session(self, conf: Mapping[str, str] = ()):
        """The session, created the first time with `conf` (the pipeline's SET statements) and
        the JVM's stdout/stderr in `log_path`. A session that already exists (created by the
        caller, or by tests) is reused as it is. One caller at a time: a second waits for the
        first's JVM; a start that failed fails again at once until `forget_failure()`."""
        with self._starting:
            if self.start_error is not None:
                raise self.start_error
            try:
                return self._session(conf)
            except Exception as exc:
                self.start_error = exc
                raise

    def _session(self, conf: Mapping[str, str]):
        from pyspark.sql import SparkSession

        active = SparkSession.getActiveSession() or SparkSession._instantiatedSession
        if active is not None and active._sc._jsc is not None:
            self._spark = active
            return active
        from pyspark import SparkConf, SparkContext
        from pyspark.java_gateway import launch_gateway

        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        settings = SparkConf(loadDefaults=True)
        settings.setAppName("dslc-repl")
        settings.setIfMissing("spark.master", run_env.MASTER.get())
        settings.set("spark.sql.session.timeZone", "UTC")
        settings.set("spark.ui.showConsoleProgress", "false")   # the REPL draws its own line
        settings.set("spark.log.level", "WARN")
        # a cancelled task's Python worker (and the calls it is making) is killed without delay
        settings.setIfMissing("spark.python.task.killTimeout", "0s")
        for key, value in dict(conf).items():
            settings.set(key, value)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        start = self.log_path.stat().st_size if self.log_path.exists() else 0
        with open(self.log_path, "ab") as log:
            try:
                gateway = launch_gateway(settings, popen_kwargs={"stdout": log, "stderr": log})
            except Exception as exc:   # the reason is in what the JVM (or its launcher) printed
                raise RuntimeError(f"Spark did not start: {self._printed_since(start) or exc}"
                                   f" (all of Spark's output: {self.log_path})") from exc
        context = SparkContext(conf=settings, gateway=gateway)
        self._spark = SparkSession(context)
        return self._spark

    def _printed_since(self, offset: int) -> str:
        """The last line Spark's launcher printed after `offset` of the log."""
        with open(self.log_path, "rb") as log:
            log.seek(offset)
            lines = [line.strip() for line in log.read().decode("utf-8", "replace").splitlines() if line.strip()]
        useful = [line for line in lines if "bad array subscript" not in line]
        return (useful or lines or [""])[-1]

    # ---- jobs
    def run(self, label: str, work: Callable[[object], T], conf: Mapping[str, str] = ()) -> T:
        """`work(spark)` in a worker thread under a fresh job group (the session is created there
        the first time, with `conf`); Ctrl-C cancels the group and raises Interrupted once the
        worker has stopped. Errors of `work` are raised here."""
        group = f"dslc-repl-{os.getpid()}-{next(_groups)}"
        outcome: dict[str, object] = {}
        self._cancelled = threading.Event()

        def worker() -> None:
            try:
                spark = self.session(conf)
                spark.sparkContext.setJobGroup(group, label, interruptOnCancel=True)
                if self._cancelled.is_set():     # Ctrl-C while Spark was starting
                    raise Interrupted(label)
                outcome["value"] = work(spark)
            except BaseException as exc:  # handed to the main thread
                outcome["error"] = exc

        thread = threading.Thread(target=worker, name=group, daemon=True)
        line = _ProgressLine(self.err if self.progress else None, label)
        with CtrlC() as ctrl_c:       # Ctrl-C must not raise inside a py4j call (see ctrl_c.py)
            thread.start()
            try:
                self._wait(thread, group, line, ctrl_c)
                if ctrl_c.presses:
                    self._stop(thread, group, label, line, ctrl_c)
            finally:
                line.clear()
        if "error" in outcome:
            raise outcome["error"]  # type: ignore[misc]
        return outcome["value"]  # type: ignore[return-value]

    def _wait(self, thread: threading.Thread, group: str, line: "_ProgressLine", ctrl_c: CtrlC) -> None:
        """Until the worker ends or Ctrl-C is pressed, with the progress line after a moment."""
        waited = 0.0
        while thread.is_alive() and not ctrl_c.presses:
            thread.join(self.poll_s)
            waited += self.poll_s
            if waited >= self.progress_after_s and not ctrl_c.presses:
                line.draw(self._status(group))

    def _stop(self, thread: threading.Thread, group: str, label: str, line: "_ProgressLine",
              ctrl_c: CtrlC) -> None:
        """Cancel the group and raise Interrupted once the worker has stopped (at once while the
        JVM is still starting: the worker, a daemon, gives up by itself once the session is up).
        A further Ctrl-C while it stops cancels again."""
        line.draw("cancelling...")
        self._cancel(group)
        cancelled = ctrl_c.presses
        while self._spark is not None and thread.is_alive():
            thread.join(self.poll_s)
            if ctrl_c.presses > cancelled:
                cancelled = ctrl_c.presses
                self._cancel(group)
        raise Interrupted(label)

    def _cancel(self, group: str) -> None:
        """Cancel the group's running jobs and the ones it would still start (a :show runs several)."""
        self._cancelled.set()
        if self._spark is not None:
            self._spark.sparkContext._jsc.sc().cancelJobGroupAndFutureJobs(group)

    def _status(self, group: str) -> str:
        """`stage 3: 1/4 tasks` for the group's running stages, or what is happening before."""
        if self._spark is None:
            return "starting Spark..."
        try:
            tracker = self._spark.sparkContext.statusTracker()
            parts = []
            for job_id in tracker.getJobIdsForGroup(group):
                job = tracker.getJobInfo(job_id)
                if job is None or job.status != "RUNNING":
                    continue
                for stage_id in job.stageIds:
                    stage = tracker.getStageInfo(stage_id)
                    if stage is not None and stage.numActiveTasks + stage.numCompletedTasks > 0 \
                            and stage.numCompletedTasks < stage.numTasks:
                        parts.append(f"stage {stage_id}: {stage.numCompletedTasks}/{stage.numTasks} tasks")
            return ", ".join(parts) or "running..."
        except Exception:  # the tracker is best effort; a failing poll must not end the job
            return "running..."


class _ProgressLine:
    """One line on a terminal, redrawn in place and erased before anything else is printed."""

    def __init__(self, stream: TextIO | None, label: str):
        self.stream = stream
        self.label = label
        self.width = 0
        self.shown = ""

    def draw(self, status: str) -> None:
        if self.stream is None:
            return
        text = f"{self.label}: {status} (Ctrl-C cancels)"[:150]
        if text == self.shown:
            return
        self.shown = text
        self.stream.write("\r" + text.ljust(self.width))
        self.stream.flush()
        self.width = max(self.width, len(text))

    def clear(self) -> None:
        if self.stream is None or not self.width:
            return
        self.stream.write("\r" + " " * self.width + "\r")
        self.stream.flush()
        self.width = 0
        self.shown = ""
