"""`dslc run`'s live table on a terminal: the figures the job's driver writes to a file each
second (runtime/spark/progress.py), drawn as one refreshing table (rich). When the output is not
a terminal the driver itself prints a line every 10 s instead, and this module is not used.

The job's own output (Spark's warnings, CONSOLE sinks, the table at the end) passes through this
process, printed above the live table so the two never overwrite each other; the live table
goes away when the job ends, leaving the job's final table and diagnosis.
"""
from __future__ import annotations

import json
import sys
import threading
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


def table(view: dict[str, Any] | None):
    """The rich Table of one view."""
    from rich.table import Table

    rows = (view or {}).get("rows") or []
    extras = extra_columns(rows)
    title = f"dslc: {format_elapsed((view or {}).get('elapsed', 0))}" + ("" if rows else " (waiting for tasks)")
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

    def __init__(self, path: Path, stream: IO[str] | None = None) -> None:
        self.path = path
        self.stream = stream or sys.stderr
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._live = None

    def __enter__(self) -> LiveProgress:
        from rich.console import Console
        from rich.live import Live

        console = Console(file=self.stream, force_terminal=True)
        self._live = Live(table(None), console=console, refresh_per_second=4, transient=True,
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
            view = read_view(self.path)
            if view is not None:
                self._live.update(table(view), refresh=True)

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
