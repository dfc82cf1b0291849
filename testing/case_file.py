"""The `*.test.yaml` file: its shape, read with PyYAML and checked before anything runs.

    pipeline: pipeline.flow        # optional: default is the .flow named like the test file
    cases:
      - name: a big order in FR is flagged
        sources:                   # rows per SOURCE (a SOURCE not given is empty)
          orders:
            - {order_id: o1, customer_id: c01, amount: 120.0, country: FR, ts: 2024-05-01 10:00:00}
        enrich:                    # answers per ENRICH operator and call key
          enriched:
            - {key: c01, answer: {tier: gold, risk: 0.5}}
            - {key: c13, miss: true}
            - {key: c99, error: HTTP 500}
            - {key: c98, timeout: true}
        replay: recordings/run1    # optional: a folder written by `dslc run --record`
        unrecorded: error          # or miss: a call nobody answered
        latency: false             # true: wait as long as the recorded calls took
        expect:                    # rows per SINK, named by the stream it writes
          flagged:
            - {order_id: o1, rule_id: r1}
        dead_letters:              # rows per ENRICH with a DEAD LETTER
          enriched:
            - {kind: timeout, key: {customer_id: c98}}
        quarantine:                # rows per EXPECT (by the stream it judges) that it quarantines
          orders:
            - {order_id: o7, _constraints: [positive_amount]}
        constraints:               # per EXPECT, per constraint: rows failed, or {passed: n, failed: n}
          orders:
            positive_amount: 1
        ordered: false             # true: rows must come in this order

Only the structure is checked here; names and columns are checked against the pipeline's plan
when the case runs (harness.py).
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

SUFFIX = ".test.yaml"
FILE_KEYS = ("pipeline", "cases")
CASE_KEYS = ("name", "sources", "enrich", "replay", "unrecorded", "latency", "expect", "dead_letters", "quarantine",
             "constraints", "ordered")
OUTCOMES = ("answer", "miss", "error", "timeout")


class CaseFileError(Exception):
    """A test file or case that cannot run; the message names the file, the case and the place."""


@dataclass
class Case:
    """One case of a test file, as written (values still YAML values)."""

    name: str
    sources: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    enrich: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    replay: Path | None = None
    unrecorded: str = "error"
    latency: bool = False
    expect: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    dead_letters: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    quarantine: dict[str, list[dict[str, Any]]] = field(default_factory=dict)      # rows per EXPECT
    constraints: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)  # EXPECT -> constraint -> counts
    ordered: bool = False
    problem: str | None = None          # set when the case is malformed: it fails with this message


@dataclass
class TestFile:
    """A test file: its pipeline and its cases."""

    path: Path
    pipeline: Path
    cases: list[Case]


def _unknown(keys: Any, allowed: tuple[str, ...], where: str) -> str | None:
    for key in keys:
        if key not in allowed:
            close = difflib.get_close_matches(str(key), allowed, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else f" (expected one of {', '.join(allowed)})"
            return f"{where}: unknown key {key!r}{hint}"
    return None


def _rows_by_name(value: Any, where: str) -> dict[str, list[dict[str, Any]]]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise CaseFileError(f"{where}: expected a mapping of names to lists of rows")
    result: dict[str, list[dict[str, Any]]] = {}
    for name, rows in value.items():
        rows = [] if rows is None else rows
        if not isinstance(rows, list):
            raise CaseFileError(f"{where} {name}: expected a list of rows")
        for index, row in enumerate(rows, 1):
            if not isinstance(row, dict):
                raise CaseFileError(f"{where} {name}, row {index}: expected a mapping of column to value, got {row!r}")
        result[str(name)] = rows
    return result


def read_counts(value: Any, where: str) -> dict[str, dict[str, dict[str, int]]]:
    """`constraints:` of a case checked for shape: EXPECT → constraint → {failed[, passed]}."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise CaseFileError(f"{where}: expected a mapping of EXPECT names (the streams they judge) to constraints")
    out: dict[str, dict[str, dict[str, int]]] = {}
    for name, constraints in value.items():
        if not isinstance(constraints, dict):
            raise CaseFileError(f"{where} {name}: expected a mapping of constraint names to counts")
        out[str(name)] = {}
        for constraint, counts in constraints.items():
            place = f"{where} {name}, {constraint}"
            counts = {"failed": counts} if isinstance(counts, int) and not isinstance(counts, bool) else counts
            if not isinstance(counts, dict) or not counts or any(k not in ("passed", "failed") for k in counts) or \
                    any(not isinstance(v, int) or isinstance(v, bool) or v < 0 for v in counts.values()):
                raise CaseFileError(f"{place}: expected the rows it failed (a number), or {{passed: n, failed: n}}")
            out[str(name)][str(constraint)] = dict(counts)
    return out


def _answers(value: Any, where: str) -> dict[str, list[dict[str, Any]]]:
    answers = _rows_by_name(value, where)
    for operator, entries in answers.items():
        for index, entry in enumerate(entries, 1):
            place = f"{where} {operator}, answer {index}"
            problem = _unknown(entry, ("key", *OUTCOMES, "latency_ms", "raw"), place)
            if problem:
                raise CaseFileError(problem)
            if "key" not in entry:
                raise CaseFileError(f"{place}: needs a key (the call key's value, or a mapping column: value)")
            given = [o for o in OUTCOMES if o in entry and entry[o] not in (None, False)]
            if len(given) != 1:
                raise CaseFileError(f"{place}: give exactly one of answer, miss: true, error: <message>, timeout: true")
    return answers


def _case(raw: Any, index: int, folder: Path, seen: set[str]) -> Case:
    if not isinstance(raw, dict):
        return Case(name=f"case {index}", problem=f"case {index}: expected a mapping with name, sources, expect")
    name = str(raw.get("name") or f"case {index}")
    case = Case(name=name)
    try:
        if name in seen:
            raise CaseFileError(f"a second case is named {name!r}")
        seen.add(name)
        problem = _unknown(raw, CASE_KEYS, "case")
        if problem:
            raise CaseFileError(problem)
        case.sources = _rows_by_name(raw.get("sources"), "source")
        case.enrich = _answers(raw.get("enrich"), "enrich")
        case.expect = _rows_by_name(raw.get("expect"), "sink")
        case.dead_letters = _rows_by_name(raw.get("dead_letters"), "dead letters of")
        case.quarantine = _rows_by_name(raw.get("quarantine"), "quarantine of")
        case.constraints = read_counts(raw.get("constraints"), "constraints of")
        if raw.get("replay") is not None:
            case.replay = (folder / str(raw["replay"])).resolve()
            if not case.replay.is_dir():
                raise CaseFileError(f"replay: no recording folder {case.replay}")
        case.unrecorded = str(raw.get("unrecorded", "error"))
        if case.unrecorded not in ("error", "miss"):
            raise CaseFileError(f"unrecorded: expected error or miss, got {case.unrecorded!r}")
        for flag in ("latency", "ordered"):
            if not isinstance(raw.get(flag, False), bool):
                raise CaseFileError(f"{flag}: expected true or false, got {raw[flag]!r}")
        case.latency = raw.get("latency", False)
        case.ordered = raw.get("ordered", False)
        if not (case.expect or case.dead_letters or case.quarantine or case.constraints):
            raise CaseFileError("the case checks nothing: give expect (rows per sink), dead_letters, quarantine "
                                "or constraints")
    except CaseFileError as exc:
        case.problem = f"case {name!r}: {exc}"
    return case


def load(path: str | Path) -> TestFile:
    """Read a test file; a malformed file raises CaseFileError, a malformed case is kept with its problem."""
    path = Path(path)
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise CaseFileError(f"{path}: cannot read: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        raise CaseFileError(f"{where}: not valid YAML: {getattr(exc, 'problem', None) or exc}") from None
    if not isinstance(document, dict):
        raise CaseFileError(f"{path}: expected a mapping with pipeline and cases")
    problem = _unknown(document, FILE_KEYS, str(path))
    if problem:
        raise CaseFileError(problem)
    default = path.name[: -len(SUFFIX)] + ".flow" if path.name.endswith(SUFFIX) else path.stem + ".flow"
    pipeline = (path.parent / str(document.get("pipeline") or default)).resolve()
    if not pipeline.is_file():
        raise CaseFileError(f"{path}: pipeline {pipeline} not found (set `pipeline:` to the .flow file)")
    raw_cases = document.get("cases")
    if not isinstance(raw_cases, list) or not raw_cases:
        raise CaseFileError(f"{path}: expected `cases:` with a list of cases")
    seen: set[str] = set()
    return TestFile(path, pipeline, [_case(raw, i, path.parent, seen) for i, raw in enumerate(raw_cases, 1)])


def find(paths: list[str | Path]) -> list[Path]:
    """Every test file named by `paths` (files as given, folders searched recursively)."""
    found: list[Path] = []
    for given in paths:
        p = Path(given)
        if p.is_dir():
            found += sorted(f for f in p.rglob(f"*{SUFFIX}") if "target" not in f.relative_to(p).parts)
        elif p.is_file():
            found.append(p)
        else:
            raise CaseFileError(f"{p}: no such file or folder")
    return list(dict.fromkeys(found))
