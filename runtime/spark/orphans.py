"""`dslc run`'s processes die with it: a run killed without a word (SIGKILL, its terminal gone)
must not leave Spark's JVM or Python workers running, sending calls whose answers nobody keeps
and the next run pays for again.

Three links, each where the process is made:

- `dslc run` starts spark-submit with a parent-death signal (Linux `prctl(PR_SET_PDEATHSIG,
  SIGKILL)`, kept across spark-submit's exec of the JVM): the JVM is killed when `dslc run` dies;
- Spark's Python daemon (dslc's, runtime/spark/daemon.py) puts itself and the workers it forks
  in a process group of their own, so killing `dslc run`'s group misses it; it watches its
  parent, the JVM, and kills its whole group once the JVM is gone (`die_with_parent`). A
  parent-death signal cannot do it: the JVM thread that started the daemon ends long before the
  JVM, and the signal follows the thread;
- the job's Python driver, the JVM's child too, does the same for itself.
"""
from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time
from typing import Callable

PR_SET_PDEATHSIG = 1
WATCH_S = 0.02      # how often a process looks whether its parent is still there


def parent_death_signal() -> Callable[[], None] | None:
    """A `preexec_fn` that has the child killed when this thread dies (Linux), else None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl      # looked up before the fork
    except (OSError, AttributeError):
        return None

    def set_signal() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)

    return set_signal


def die_with_parent(group: bool) -> None:
    """Watch this process's parent; once it is gone, SIGKILL this process's group (`group`:
    the daemon and its workers) or this process alone."""
    parent = os.getppid()
    if parent == 1:
        return      # already an orphan's child: nothing to watch

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(WATCH_S)
        if group:
            os.killpg(os.getpgrp(), signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name="dslc-die-with-parent", daemon=True).start()
