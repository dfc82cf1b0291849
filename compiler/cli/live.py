"""`dslc run`'s live table on a terminal: the figures the job's driver writes to a file each
second (runtime/spark/progress.py), drawn as one refreshing table (rich). When the output is not
a terminal the driver itself prints a line every 10 s instead, and this module is not used.

The job's own output (Spark's warnings, CONSOLE sinks, the table at the end) passes through this
process, printed above the live table so the two never overwrite each other; the live table
goes away when the job ends, leaving the job's final table and diagnosis. Until the driver's
first figures it says that Spark is starting and for how long (a small job's JVM takes most of
its time to start); then until the first task reports, how long Spark took.
"""
from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

from dslc.runtime.expect_figures import worst_first
from dslc.runtime.live_view import COLUMNS, cell, extra_columns, format_elapsed

REFRESH_S = 0.5


def read_view(path: Path) -> dict[str, Any] | None:
    """The latest figures the driver wrote, or None before its first second."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def starting(where: str, seconds: float) -> str:
    """What the live view says while Spark starts, before the driver's first figures."""
    return f"dslc: starting Spark ({where})… {seconds:.0f} s"


def table(view: dict[str, Any] | None, started_in: float | None = None):
    """The rich Table of one view; `started_in`: the seconds Spark took to start, said until the
    first task reports."""
    from rich.table import Table

    rows = (view or {}).get("rows") or []
    extras = extra_columns(rows)
    waiting = f" (Spark started in {started_in:.0f} s; waiting for the first task)" if started_in is not None \
        else " (waiting for tasks)"
    title = f"dslc: {format_elapsed((view or {}).get('elapsed', 0))}" + ("" if rows else waiting)
    grid = Table(title=title, title_justify="left", expand=False)
    grid.add_column("operator", no_wrap=True)
    for _key, heading in list(COLUMNS) + [(k, k.replace("_", " ")) for k in extras]:
        grid.add_column(heading, justify="right", no_wrap=True)
    for row in rows:
        grid.add_row(str(row["operator"]), *(cell(row, k) for k in [k for k, _ in COLUMNS] + extras))
    checked = (view or {}).get("expectations")
    if not checked:
        return grid
    from rich.console import Group

    judged = Table(title="expectations", title_justify="left", expand=False)
    for heading in ("EXPECT ON", "judged", "constraint", "action", "passed", "failed"):
        judged.add_column(heading, justify="left" if heading in ("EXPECT ON", "constraint", "action") else "right",
                          no_wrap=True)
    for name, figures in checked.items():
        for i, constraint in enumerate(worst_first(figures["constraints"])):
            judged.add_row(name if i == 0 else "", str(figures["rows"]) if i == 0 else "", constraint["name"],
                           constraint["action"], str(constraint["passed"]), str(constraint["failed"]))
    return Group(grid, judged)


class LiveProgress:
    """Draws the driver's figures while the job runs, with the job's output printed above."""

    def __init__(self, path: Path, stream: IO[str] | None = None, where: str = "local[*]") -> None:
        self.path = path
        self.stream = stream or sys.stderr
        self.where = where               # the master (or Spark Connect server) the job runs on
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._live = None
        self._began = time.monotonic()
        self._started_in: float | None = None    # seconds until the driver's first figures

    def __enter__(self) -> LiveProgress:
        from rich.console import Console
        from rich.live import Live

        console = Console(file=self.stream, force_terminal=True)
        self._began = time.monotonic()
        self._live = Live(self.view(None), console=console, refresh_per_second=4, transient=True,
                          redirect_stdout=False, redirect_stderr=False)
        self._live.__enter__()
        self._thread = threading.Thread(target=self._run, name="dslc-live", daemon=True)
        self._thread.start()
        return self

    def print(self, line: str) -> None:
        """A line of the job's output, above the live table."""
        self._live.console.print(line, markup=False, highlight=False, emoji=False, soft_wrap=True)

    def _run(self) -> None:
        while not self._stop.wait(REFRESH_S):
            self._live.update(self.view(read_view(self.path)), refresh=True)

    def view(self, figures: dict[str, Any] | None):
        """What to draw now: Spark starting (with the seconds so far) until the driver writes its
        first figures, then the table (saying how long Spark took until the first task reports)."""
        if figures is None:
            from rich.text import Text
            return Text(starting(self.where, time.monotonic() - self._began))    # as it is, not highlighted
        if self._started_in is None:
            self._started_in = time.monotonic() - self._began
        return table(figures, self._started_in)

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        self._live.__exit__(None, None, None)


def pass_through(stream: IO[bytes], live: LiveProgress) -> threading.Thread:
    """Copy the job's output, line by line, above the live table (a thread, until it ends)."""
    def copy() -> None:
        for raw in iter(stream.readline, b""):
            live.print(raw.decode("utf-8", "replace").rstrip("\r\n"))

    thread = threading.Thread(target=copy, name="dslc-job-output", daemon=True)
    thread.start()
    return thread
