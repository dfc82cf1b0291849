"""Ctrl-C as a request, not an exception, while the REPL waits for Spark.

Python raises KeyboardInterrupt in the main thread wherever that thread happens to be. While a
job runs, the REPL's main thread spends much of its wait inside py4j calls (the progress line's
status polls). A KeyboardInterrupt raised in one of them, while it waits for the JVM's answer,
leaves that answer unread on the thread's py4j connection: the next call on it, the job group's
cancel, reads the stale answer instead of its own, so nothing is cancelled and the REPL waits for
the whole job. While a `CtrlC` is active, SIGINT only counts the presses; the wait loop looks at
the count between its py4j calls and cancels from there.
"""
from __future__ import annotations

import signal
import threading


class CtrlC:
    """Counts Ctrl-C presses instead of raising KeyboardInterrupt, while the `with` lasts.

    Only the main thread can set a signal handler (and only it receives KeyboardInterrupt); in
    any other thread this does nothing. The handler in place before is restored on exit."""

    def __init__(self) -> None:
        self.presses = 0
        self._installed = False
        self._previous = None

    def __enter__(self) -> "CtrlC":
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._pressed)
            self._installed = True
        return self

    def _pressed(self, signum, frame) -> None:
        # runs between any two bytecodes of the main thread, even inside a lock or a py4j call:
        # no lock, no I/O, no exception
        self.presses += 1

    def __exit__(self, *exc) -> None:
        if self._installed:   # None: the handler was not set from Python; Python's own is the best guess
            signal.signal(signal.SIGINT, signal.default_int_handler if self._previous is None else self._previous)
            self._installed = False
