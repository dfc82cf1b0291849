"""A query Spark's analyzer refuses when the job starts, shown at its place in the .flow file.

The fast check leaves some errors to Spark (a function's argument types, aggregation rules); a
job that meets one fails before it reads a row with an AnalysisException whose query context
holds the refused fragment of the SQL (`sort_array(amount)`). Under `dslc run` (DSLC_FLOW_FILE
set) the job finds that fragment in the .flow file and prints the error the way `dslc check
--spark` would: `file:line:col: error[E0212]: Spark rejects this query (CONDITION): ...`, the
source line and a caret. A fragment that is not in the file exactly once stays Spark's message.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

from dslc.runtime import run_env

#: The .flow file `dslc run` runs (absolute), so a failed job can point into it.
FLOW_ENV = run_env.FLOW_FILE.name
_STATE = re.compile(r"\s*SQLSTATE: \w+.*", re.S)
_CONDITION = re.compile(r"^\[[A-Z0-9_.]+\]\s*")


def located(error: BaseException) -> str | None:
    """The error as a diagnostic at its line of the .flow file, None when it cannot be placed."""
    path = run_env.FLOW_FILE.get()
    if not path or not hasattr(error, "getQueryContext"):
        return None
    try:
        condition = error.getCondition() if hasattr(error, "getCondition") else error.getErrorClass()
        fragments = [c.fragment() for c in error.getQueryContext() if c.fragment()]
        text = Path(path).read_text(encoding="utf-8")
    except Exception:       # noqa: BLE001 - no context to place it by: Spark's own message stays
        return None
    if not fragments or not condition:
        return None
    fragment = fragments[0]
    places = [m.start() for m in re.finditer(re.escape(fragment), text)]
    if len(places) != 1:
        return None
    offset = places[0]
    line = text.count("\n", 0, offset) + 1
    col = offset - (text.rfind("\n", 0, offset) + 1) + 1
    source = text.splitlines()[line - 1]
    width = max(1, min(len(fragment.split("\n")[0]), len(source) - col + 1))
    message = _CONDITION.sub("", _STATE.sub("", str(error).strip().split("\n")[0])).rstrip(" ;.") + "."
    shown = os.path.relpath(path) if not os.path.relpath(path).startswith("..") else path
    gutter = " " * len(str(line))
    return (f"{shown}:{line}:{col}: error[E0212]: Spark rejects this query ({condition}): {message}\n"
            f" {line} | {source}\n"
            f" {gutter} | {' ' * (col - 1)}{'^' * width}\n"
            f" {gutter} = hint: Spark's analyzer refused it as the job started; "
            f"`dslc check --spark` finds it before a run")
