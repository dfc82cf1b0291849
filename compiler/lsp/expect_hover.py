"""Hover on an EXPECT statement (its keywords or a constraint's name): each constraint with the
action it takes (its own, or the statement's default), where the EXPECT runs in the physical
plan, and what a MODEL is asked to keep; before the statement checks, the constraints as written."""
from __future__ import annotations

from dslc.compiler.frontend import ast
from dslc.compiler.plan.expect_explain import action, model_asks
from dslc.compiler.plan.logical import Plan

#: Words of an EXPECT statement that hovering explains it on.
WORDS = {"EXPECT", "CONSTRAINT", "CHECK", "VIOLATION", "WARN", "DROP", "QUARANTINE", "FAIL"}


def wants(statement, word: str) -> bool:
    """True when hovering `word` inside `statement` shows the EXPECT."""
    return isinstance(statement, ast.Expect) and (
        word.upper() in WORDS or any(c.name.value.lower() == word.lower() for c in statement.constraints))


def text(statement: ast.Expect, plan: Plan | None) -> str:
    """The hover's markdown."""
    target = statement.target.value
    expect = plan.expectation(target) if plan is not None else None
    lines = [f"**EXPECT ON** `{target}`: every reader of `{target}` reads the rows that pass", "",
             "| constraint | action | line |", "|---|---|---|"]
    if expect is None:
        default = _written(statement.default) if statement.default else "WARN"
        lines += [f"| {c.name.value} | {_written(c.violation) if c.violation else default} | |"
                  for c in statement.constraints]
        lines += ["", "not checked yet: the statement (or the stream it judges) has errors"]
        return "\n".join(lines)
    lines += [f"| {c.name} | {action(c)} | {c.line} |" for c in expect.constraints]
    lines += ["", f"runs {_placement(plan, target)}"]
    asked = model_asks(plan, expect)
    if asked:
        lines += ["", "asked of the model (structured output), still checked on its answers:"]
        lines += [f"- {item.describe()}" for item in asked]
    return "\n".join(lines)


def _written(violation: ast.Violation) -> str:
    return f"QUARANTINE '{violation.path.value}'" if violation.path else violation.action.value


def _placement(plan: Plan, target: str) -> str:
    from dslc.compiler.optimizer.expect_placement import placement
    from dslc.compiler.optimizer.optimize import optimize

    try:
        return placement(optimize(plan), target) or "nowhere"
    except Exception:  # noqa: BLE001 - a plan salvaged around errors: say what is known
        return "where the physical plan puts it (once the whole file checks)"
