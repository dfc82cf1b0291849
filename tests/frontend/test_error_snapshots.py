"""Every tests/errors/*.flow through the real CLI: exit 1, the exact output (syrupy snapshot),
no traceback, and the first diagnostic where the file's first line says (`-- expect: E0204 3:21`).
A second line `-- check: --mode streaming` gives `dslc check` those arguments."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from dslc.compiler.cli.main import main

ERRORS = Path(__file__).parent.parent / "errors"
CASES = sorted(ERRORS.glob("*.flow"))
_EXPECT = re.compile(r"^-- expect: (E\d{4}) (\d+):(\d+)\s*$")
_ARGS = re.compile(r"^-- check: (.+?)\s*$")
_FIRST = re.compile(r"^(?P<file>[^:\n]+):(?P<line>\d+):(?P<col>\d+): error\[(?P<code>E\d{4})\]", re.M)


def test_there_are_enough_cases():
    assert len(CASES) >= 45


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.stem)
def test_error_output(case: Path, capsys, monkeypatch, snapshot):
    lines = case.read_text(encoding="utf-8").splitlines()
    expect = _EXPECT.match(lines[0])
    assert expect, f"{case.name}: first line must be '-- expect: CODE LINE:COL'"
    given = _ARGS.match(lines[1])
    monkeypatch.chdir(ERRORS)            # a relative path keeps the output stable
    status = main(["check", *(given[1].split() if given else ()), case.name])
    out = capsys.readouterr()
    assert status == 1
    assert out.out == ""
    assert "Traceback" not in out.err
    first = _FIRST.search(out.err)
    assert first is not None, out.err
    assert (first["file"], first["code"], first["line"], first["col"]) == \
        (case.name, expect[1], expect[2], expect[3])
    assert re.search(r"^\d+ errors? found$", out.err, re.M)
    assert out.err == snapshot
