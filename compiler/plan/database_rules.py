"""BROADCAST ... FROM DATABASE db TABLE|QUERY [SCHEMA (...)] KEY col [REFRESH EVERY d]: rules kept
where they are kept.

Planned as what it is: a database SOURCE of the broadcast's own (`<name>_rows`, a name no
statement can read; `dslc test` files give its rows under the broadcast's name) and a BROADCAST
... KEY col from it, with the refresh interval. BATCH reads the table once (Spark's JDBC reader,
the rows applied as upserts), as for any BROADCAST from a SOURCE ... FROM DATABASE. STREAMING
reads it when the job starts and, with REFRESH EVERY d under a continuous trigger, again every d,
applying the difference (runtime/spark/refreshed_state.py). REFRESH EVERY d is allowed as well
on a BROADCAST that reads a SOURCE ... FROM DATABASE by name.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from dslc.compiler.diagnostics import did_you_mean, error
from dslc.compiler.frontend import ast
from dslc.compiler.plan import databases, values
from dslc.compiler.plan import logical as plan
from dslc.runtime.config import DatabaseTable

if TYPE_CHECKING:
    from dslc.compiler.plan.planner import _Planner as Planner


def rows_name(planner: Planner, name: str) -> str:
    """The name of a database BROADCAST's own source: `<name>_rows`, numbered past any name taken."""
    candidate, n = f"{name}_rows", 2
    while candidate.lower() in planner.defs or candidate.lower() in planner.nodes:
        candidate, n = f"{name}_rows{n}", n + 1
    return candidate


def broadcast(planner: Planner, stmt: ast.Broadcast) -> plan.BroadcastState | None:
    """The state of a BROADCAST ... FROM DATABASE, its own source added to the plan before it."""
    connector = stmt.database
    assert connector is not None
    what = f"BROADCAST {stmt.name.value}"
    if stmt.schema is not None:
        schema = planner._columns(stmt.schema.args, f"SCHEMA of '{stmt.name.value}'")
        if len({f.name.lower() for f in schema}) != len(schema):
            return None
    else:
        schema = databases.live_schema(planner, connector, what)
    ok = _changelog_only(planner, stmt)
    refresh = _interval(planner, stmt)
    database = databases.lookup(connector.database, planner.databases, planner.problems) \
        if connector.database is not None else None
    key = None
    if schema is not None and stmt.key is not None:
        key = next((f.name for f in schema if f.name.lower() == stmt.key.value.lower()), None)
        if key is None:
            planner.add(error("E0204", stmt.key.span, column=stmt.key.value, where=f"the rows of {what}",
                              hint=did_you_mean(stmt.key.value, [f.name for f in schema])))
    if schema is None or key is None or database is None or connector.arg is None or not ok or refresh is False:
        return None
    is_query = connector.relation is not None and connector.relation.value == "QUERY"
    text = connector.arg.value
    table = DatabaseTable(database.name, database.url, table=None if is_query else text,
                          query=text if is_query else None)
    name = rows_name(planner, stmt.name.value)
    planner.nodes[name.lower()] = plan.Source(
        name=name, schema=schema, line=planner.line(stmt.span), span=connector.span, connector="DATABASE",
        path=text, options=(), database=table, read_once=True)
    return plan.BroadcastState(name=stmt.name.value, source=name, key=key, op=None, using=None, schema=schema,
                               line=planner.line(stmt.span), span=stmt.span, refresh_s=refresh or None)


def _changelog_only(planner: Planner, stmt: ast.Broadcast) -> bool:
    """A table is the state itself: KEY col only (a missing row is a delete, so no OP; no USING)."""
    if stmt.op is not None:
        planner.add(error("E0304", stmt.op.span, first="OP", second="BROADCAST ... FROM DATABASE",
                          hint="the table is the rules' state: a row that is no longer there is a delete"))
        return False
    if stmt.using is not None:
        planner.add(error("E0304", stmt.using.span, first="USING PYTHON", second="BROADCAST ... FROM DATABASE",
                          hint="the table is the rules' state: name its key, KEY col"))
        return False
    return True


def _interval(planner: Planner, stmt: ast.Broadcast) -> float | None | bool:
    """REFRESH EVERY d in seconds (None: not given; False: wrong, reported)."""
    if stmt.refresh is None:
        return None
    seconds = values.duration(stmt.refresh, planner.problems)
    if seconds is None:
        return False
    if seconds <= 0:
        planner.add(error("E0302", stmt.refresh.span, option="REFRESH EVERY", rule="a duration above zero",
                          text=stmt.refresh.text))
        return False
    return seconds


def refresh_of_source(planner: Planner, stmt: ast.Broadcast, src: plan.PlanNode | None) -> float | None | bool:
    """REFRESH EVERY d of a BROADCAST that reads a stream by name: only a SOURCE ... FROM DATABASE
    is re-read (files and topics deliver their updates as they come), and only with KEY."""
    if stmt.refresh is None:
        return None
    if src is not None and not (isinstance(src, plan.Source) and src.database is not None):
        planner.add(error("E0304", stmt.refresh.span, first="REFRESH EVERY", second=f"a BROADCAST from '{src.name}'",
                          hint="only a database table is re-read: its updates are not a stream of rows; "
                               "a file or topic source delivers each update as it comes"))
        return False
    if stmt.using is not None or stmt.op is not None:
        clause = stmt.using if stmt.using is not None else stmt.op
        planner.add(error("E0304", clause.span, first="USING PYTHON" if stmt.using is not None else "OP",
                          second="REFRESH EVERY",
                          hint="a refreshed table is the rules' state: KEY col only, a missing row a delete"))
        return False
    return _interval(planner, stmt)
