"""CtrlC: while a REPL command waits for Spark, SIGINT counts a press instead of raising
KeyboardInterrupt (which py4j cannot survive mid-call), and the handler before comes back."""
from __future__ import annotations

import signal
import threading

import pytest

from dslc.compiler.interactive.ctrl_c import CtrlC


def test_a_sigint_is_counted_not_raised_and_the_handler_before_comes_back():
    before = signal.getsignal(signal.SIGINT)
    with CtrlC() as ctrl_c:
        signal.raise_signal(signal.SIGINT)       # a real signal to this process
        signal.raise_signal(signal.SIGINT)
        assert ctrl_c.presses == 2
    assert signal.getsignal(signal.SIGINT) is before
    with pytest.raises(KeyboardInterrupt):
        signal.raise_signal(signal.SIGINT)       # Python's own behaviour again


def test_outside_the_main_thread_it_changes_nothing():
    before = signal.getsignal(signal.SIGINT)
    seen = []

    def elsewhere() -> None:
        with CtrlC() as ctrl_c:
            seen.append(signal.getsignal(signal.SIGINT))
        seen.append(ctrl_c.presses)

    thread = threading.Thread(target=elsewhere)
    thread.start()
    thread.join()
    assert seen == [before, 0]
