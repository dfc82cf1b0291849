"""The dead-letter ceiling: a run that dead-lettered more than its pipeline allows does not end
with exit 0 (docs/operations.md, "Dead letters").

`ON ... DEAD LETTER 'path' UP TO n% | n ROWS` sets an operator's ceiling; without UP TO it is
`config.DEFAULT_CEILING` (50%), so a run in which every element of an operator failed never
exits 0 unless `UP TO 100%` says that is fine. An operator without dead letters (ON ERROR NULL or
DROP) whose every element failed (an error or a timeout) is held to the same rule.

Checked on the driver from the operators' figures added up over the run: in BATCH when the job
has written everything (its report), in STREAMING after its queries ended and, under a
continuous trigger, as micro-batches complete (streaming.await_queries stops the queries at the
micro-batch that crossed it). Above the ceiling the run ends with exit code 5.
"""
from __future__ import annotations

from typing import Any

from dslc.runtime import config as C
from dslc.runtime import exit_codes
from dslc.runtime.metrics import top_errors

from . import outcome
from .outcome import RunStop


def breaches(operators: dict[str, C.Enrich], figures: dict[str, dict[str, Any]],
             paths: dict[str, tuple[str, ...]]) -> list[str]:
    """A sentence per operator above its ceiling (empty: every one within it). `figures`: the
    operators' merged metrics; `paths`: dead-letter path -> the operators writing there."""
    where = {name: path for path, names in paths.items() for name in names}
    found = []
    for name, op in sorted(operators.items()):
        m = figures.get(name) or {}
        elements = int(m.get("elements_in") or 0)
        letters = int(m.get("dead_letters") or 0)
        failed = int(m.get("errors") or 0) + int(m.get("timeouts") or 0)
        ceiling = op.ceiling or C.DEFAULT_CEILING
        errors = "; ".join(f"{label} ({n})" for label, n in top_errors(m.get("error_messages") or {}))
        written = f"({ceiling})" if op.ceiling else f"({ceiling}, the default)"
        if op.dead_letters and not ceiling.allows(letters, elements):
            path = where.get(name, "its dead-letter path")
            found.append(f"ENRICH '{name}' (line {op.line}): {letters} of {elements} elements "
                         f"({_share(letters, elements)}) were dead-lettered to {path}, above its ceiling "
                         f"{written}; everything else was written. Top errors: {errors or 'none counted'}. "
                         "Fix the cause and run again, or allow more with DEAD LETTER '...' UP TO n% | n ROWS")
        elif not op.dead_letters and elements and failed >= elements and not ceiling.allows(failed, elements):
            found.append(f"ENRICH '{name}' (line {op.line}): every one of its {elements} elements failed "
                         f"(ON ERROR {op.on_error.value}, ON TIMEOUT {op.on_timeout.value}). Top errors: "
                         f"{errors or 'none counted'}")
    return found


def check(operators: dict[str, C.Enrich], figures: dict[str, dict[str, Any]],
          paths: dict[str, tuple[str, ...]]) -> None:
    """Raise the run's stop (exit code 5) when some operator is above its ceiling."""
    found = breaches(operators, figures, paths)
    if found:
        raise RunStop("\ndslc: error: ".join(found), exit_codes.DEAD_LETTERS)


def _share(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "-"


def check_now() -> None:
    """`check` on the figures the running job's tasks have reported so far (STREAMING under a
    continuous trigger, between micro-batches)."""
    run = outcome.current()
    if run.collector is not None and run.enrich and run.checks_ceiling:
        check(run.enrich, run.collector.value(), run.dead_letters)
