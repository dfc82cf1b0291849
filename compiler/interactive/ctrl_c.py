"""Ctrl-C as a request, not an exception, while the REPL waits for Spark.

Python raises KeyboardInterrupt in the main thread wherever that thread happens to be. While a
job runs, the REPL's main thread spends much of its wait inside py4j calls (the progress line's
status polls). py4j meets a KeyboardInterrupt raised there by logging its traceback (onto the
REPL's screen) and shutting down every pooled connection to the JVM, the worker thread's too; the
worker's next call gets a new JVM thread without its job group, so the :show's later jobs run
outside the group that Ctrl-C cancels, and the REPL waits for the whole job. While a `CtrlC` is
active, SIGINT only counts the presses; the wait loop looks at the count between its py4j calls
and cancels from there.
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
