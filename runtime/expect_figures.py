"""The figures of a run's EXPECTs as people read them: the table the run prints, the diagnosis
line of the constraint that removes the most rows, the live lines; from the metrics JSON's
`expectations` section (runtime/spark/expectations.py makes it), so the report and `dslc run`'s
live view read the same figures."""
from __future__ import annotations

from typing import Any


def worst_first(constraints: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A stream's constraints, the one that failed most rows first (statement order among equals)."""
    return sorted(constraints, key=lambda c: -int(c.get("failed", 0)))


def _action(constraint: dict[str, Any]) -> str:
    return f"QUARANTINE '{constraint['path']}'" if constraint.get("path") else constraint["action"]


def headline(name: str, figures: dict[str, Any]) -> str:
    return (f"EXPECT ON {name} (line {figures['line']}): {figures['rows']} rows judged, {figures['passed']} passed, "
            f"{figures['dropped']} dropped, {figures['quarantined']} quarantined")


def format_table(section: dict[str, dict[str, Any]]) -> str:
    """One block per EXPECT: its rows, then each constraint (worst first) passed and failed."""
    lines = ["dslc: expectations"]
    for name, figures in section.items():
        lines.append(headline(name, figures))
        rows = [("constraint", "line", "action", "passed", "failed")]
        rows += [(c["name"], str(c["line"]), _action(c), str(c["passed"]), str(c["failed"]))
                 for c in worst_first(figures["constraints"])]
        widths = [max(len(r[i]) for r in rows) for i in range(5)]
        for row in rows:
            lines.append("  " + "  ".join(cell.ljust(w) if i in (0, 2) else cell.rjust(w)
                                          for i, (cell, w) in enumerate(zip(row, widths))).rstrip())
    return "\n".join(lines)


def diagnoses(section: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Per EXPECT that removed rows, the DROP or QUARANTINE constraint that fails the most rows
    (a row failing several goes by the strictest action, so it may be removed by another): said
    as the ENRICHes' diagnoses are (runtime/diagnosis.py)."""
    out = []
    for name, figures in section.items():
        removing = [c for c in worst_first(figures["constraints"]) if c["action"] in ("DROP", "QUARANTINE")
                    and c["failed"]]
        if not removing or not figures["rows"]:
            continue
        worst = removing[0]
        share = 100.0 * worst["failed"] / figures["rows"]
        why = (f"constraint {worst['name']} (line {worst['line']}, {worst['action']}) fails the most rows: {worst['failed']} of "
               f"{figures['rows']} ({share:.1f}%)")
        advice = (f"its rows are in {worst['path']}" if worst.get("path") else "its rows are dropped (ON VIOLATION DROP)")
        out.append({"operator": f"EXPECT ON {name}", "cause": "expectation",
                    "figures": {"rows": figures["rows"], "failed": worst["failed"], "constraint": worst["name"]},
                    "why": why, "advice": advice, "line": f"dslc: EXPECT ON {name}: {why}; {advice}"})
    return out


def live_lines(section: dict[str, dict[str, Any]]) -> list[str]:
    """Short lines for a live view: per EXPECT, its rows and each constraint's failures."""
    out = []
    for name, figures in section.items():
        failed = ", ".join(f"{c['name']} {c['failed']}" for c in worst_first(figures["constraints"]))
        out.append(f"EXPECT ON {name}: {figures['rows']} judged, {figures['passed']} passed; failed: {failed}")
    return out
