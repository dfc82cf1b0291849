"""EXPECT in a test case: the rows each EXPECT quarantines and the counts of each constraint.

    cases:
      - name: answers outside the categories are quarantined
        ...
        quarantine:                # rows per EXPECT (named by the stream it judges)
          labelled:
            - {ticket_id: t3, category: refunds, _constraints: [known_category]}
        constraints:               # per EXPECT, per constraint: rows failed, or {passed: n, failed: n}
          labelled:
            known_category: 1
            urgency_range: {passed: 5, failed: 0}

A quarantined row is compared on the columns the expected row names: the stream's columns and
`_constraints`, `_operator`, `_line`. The QUARANTINE folders of the pipeline are moved into the
case's folder (`sandboxed`), like its sinks and dead letters; the counts are the run's own, read
from its metrics (the `expectations` section).
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from dslc.compiler.plan import logical as plan

from . import values
from .case_file import CaseFileError
from .diff import RowDiff, diff_rows

META_COLUMNS = ("_constraints", "_operator", "_line")


def _expect(p: plan.Plan, name: str, where: str):
    found = p.expectation(name)
    if found is None:
        listed = ", ".join(e.on for e in p.expects) or "none"
        raise CaseFileError(f"{where}: no EXPECT ON {name!r} (the pipeline has EXPECT ON: {listed})")
    return found


def prepare(quarantine: dict[str, list[dict[str, Any]]], counts: dict[str, dict[str, dict[str, int]]],
            p: plan.Plan) -> tuple[dict[str, list[dict[str, Any]]], dict[str, list[dict[str, Any]]]]:
    """The expected quarantined rows and counts checked against the plan: EXPECT and constraint
    names, columns (the stream's and the meta columns), values of the columns' types."""
    rows: dict[str, list[dict[str, Any]]] = {}
    for name, given in quarantine.items():
        expect = _expect(p, name, "quarantine")
        if not expect.quarantine_paths:
            raise CaseFileError(f"quarantine {expect.on}: its EXPECT (line {expect.line}) quarantines nothing")
        schema = p.node(expect.on).schema
        columns = {f.name.lower(): f for f in schema}
        typed = []
        for i, row in enumerate(given, 1):
            unknown = [c for c in row if str(c).lower() not in columns and c not in META_COLUMNS]
            if unknown:
                raise CaseFileError(f"quarantine {expect.on}, row {i}: unknown column {unknown[0]!r} (columns: "
                                    f"{', '.join([f.name for f in schema] + list(META_COLUMNS))})")
            data = {k: v for k, v in row.items() if k not in META_COLUMNS}
            from .harness import _typed_row

            out = _typed_row(data, schema, f"quarantine {expect.on}, row {i}", all_columns=False)
            out.update({k: v for k, v in row.items() if k in META_COLUMNS})
            typed.append(values.stamps_as_text(values.comparable(out)))
        rows[expect.on] = typed
    expected_counts: dict[str, list[dict[str, Any]]] = {}
    for name, constraints in counts.items():
        expect = _expect(p, name, "constraints")
        known = {c.name.lower(): c.name for c in expect.constraints}
        listed = []
        for constraint, figures in constraints.items():
            if constraint.lower() not in known:
                raise CaseFileError(f"constraints {expect.on}: no constraint {constraint!r} (it has: "
                                    f"{', '.join(known.values())})")
            listed.append({"constraint": known[constraint.lower()], **figures})
        expected_counts[expect.on] = listed
    return rows, expected_counts


def sandboxed(p: plan.Plan, root: Path) -> plan.Plan:
    """The plan with every QUARANTINE folder inside the case's folder (`root/quarantine/<n>`)."""
    if not p.expects:
        return p
    folders: dict[str, str] = {}
    expects = []
    for expect in p.expects:
        constraints = []
        for constraint in expect.constraints:
            if constraint.path is not None:
                folder = folders.setdefault(constraint.path, str(root / "quarantine" / str(len(folders) + 1)))
                constraint = dataclasses.replace(constraint, path=folder)
            constraints.append(constraint)
        expects.append(dataclasses.replace(expect, constraints=tuple(constraints)))
    return dataclasses.replace(p, expects=tuple(expects))


def quarantined(sandboxed_plan: plan.Plan, name: str) -> list[dict[str, Any]]:
    """The rows the EXPECT on `name` quarantined in a case's run (each folder it writes to)."""
    rows = []
    for path in sandboxed_plan.expectation(name).quarantine_paths:
        folder = Path(path)
        files = sorted(f for f in folder.rglob("part-*") if f.is_file()) if folder.exists() else []
        for file in files:
            rows += [values.stamps_as_text(values.comparable(json.loads(line)))
                     for line in file.read_text(encoding="utf-8").splitlines() if line.strip()]
    return rows


def counted(metrics_file: Path, name: str) -> list[dict[str, Any]]:
    """Each constraint's passed and failed rows in a case's run, from its metrics."""
    try:
        document = json.loads(metrics_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    figures = (document.get("expectations") or {}).get(name) or {"constraints": []}
    return [{"constraint": c["name"], "passed": c["passed"], "failed": c["failed"]} for c in figures["constraints"]]


def diffs(sandboxed_plan: plan.Plan, metrics_file: Path, rows: dict[str, list[dict[str, Any]]],
          counts: dict[str, list[dict[str, Any]]], ordered: bool,
          outputs: dict[str, list[dict[str, Any]]]) -> list[RowDiff]:
    """The expected quarantined rows and counts against the run's (kept in `outputs` too, as
    `quarantine:<stream>` and `constraints:<stream>`)."""
    found = []
    for name in [e.on for e in sandboxed_plan.expects]:
        if sandboxed_plan.expectation(name).quarantine_paths:
            outputs[f"quarantine:{name}"] = quarantined(sandboxed_plan, name)
        outputs[f"constraints:{name}"] = counted(metrics_file, name)
    for name, expected in rows.items():
        found.append(diff_rows(f"quarantine of {name}", expected, outputs[f"quarantine:{name}"], ordered=ordered))
    for name, expected in counts.items():
        found.append(diff_rows(f"constraints of {name}", expected, outputs[f"constraints:{name}"], ordered=False))
    return found
