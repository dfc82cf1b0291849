"""How a run ends, as its exit code: one table for `dslc run` and the generated job, in BATCH and
in STREAMING (docs/operations.md, "Exit codes").

A scheduler can act on the code alone: 2 will not get better by running again (fix the file,
a secret or a path), 3 continues where it stopped when run again, 5 wrote everything and asks
for a look at the dead letters.
"""
from __future__ import annotations

DONE = 0            # the run did what the pipeline says
FAILED = 1          # it failed (a service that never answered, a write that failed, a bug)
WRONG = 2           # the pipeline or its configuration is wrong: a check, a missing secret, refused
                    # credentials, a sink that cannot be written
BUDGET = 3          # a BUDGET was spent: rows are left unanswered, a rerun continues
EXPECTATION = 4     # an EXPECT ... ON VIOLATION FAIL broken by a row
DEAD_LETTERS = 5    # more dead letters than the ceiling allows (ON ... DEAD LETTER 'path' UP TO ...)
INTERRUPTED = 130   # Ctrl-C (SIGINT)
TERMINATED = 143    # SIGTERM

MEANING = {
    DONE: "done", FAILED: "failed", WRONG: "the pipeline or its configuration is wrong", BUDGET: "budget spent",
    EXPECTATION: "an expectation failed", DEAD_LETTERS: "dead letters over the ceiling",
    INTERRUPTED: "interrupted", TERMINATED: "terminated",
}


def meaning(code: int) -> str:
    """What an exit code says, in words."""
    return MEANING.get(code, "failed")
