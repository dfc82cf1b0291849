"""Optimiser rules against their fixture files, as sqlglot's tests/fixtures/optimizer/*.sql.

Each file in fixtures/ is named after a rule and holds its cases. Lines before the first case are
a preamble put in front of every case's flow. A case is a `# title` line, a flow, a `----` line,
then what `dslc explain --physical` prints for it (its passes and steps). A flow line
`-- options: chaining=off` switches optimiser options off for that case; the Python functions
flows name are in fixtures/udfs.py.

`python tests/optimizer/test_rules.py` rewrites the expected parts from the compiler's output:
review the diff as you would a snapshot update.
"""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from dslc.compiler.optimizer.explain import render_physical
from dslc.compiler.optimizer.optimize import Options
from dslc.compiler.pipeline import check_file

FIXTURES = Path(__file__).parent / "fixtures"
_TITLE = re.compile(r"^# (.+)$", re.M)
_OPTIONS = re.compile(r"^-- options:(.*)$", re.M)


@dataclasses.dataclass(frozen=True)
class Case:
    """One fixture case: the flow (preamble included) and the expected physical plan text."""

    file: Path
    title: str
    flow: str
    expected: str

    @property
    def options(self) -> Options:
        switches = {}
        for found in _OPTIONS.findall(self.flow):
            for item in found.split():
                name, value = item.split("=")
                switches[name] = value == "on"
        return Options(**switches)


def load_cases(path: Path) -> tuple[str, list[Case]]:
    """The preamble and the cases of one fixture file."""
    text = path.read_text()
    titles = list(_TITLE.finditer(text))
    preamble = text[: titles[0].start()] if titles else text
    cases = []
    for title, following in zip(titles, [*titles[1:], None]):
        body = text[title.end() + 1: following.start() if following else len(text)]
        flow, separator, expected = body.partition("\n----\n")
        assert separator, f"{path.name}: case '{title.group(1)}' has no ---- line"
        cases.append(Case(path, title.group(1), preamble + flow.rstrip("\n") + "\n", expected.rstrip("\n") + "\n"))
    return preamble, cases


def physical_text(case: Case, folder: Path) -> str:
    """What `dslc explain --physical` prints for the case's flow."""
    flow = folder / "pipeline.flow"
    flow.write_text(case.flow)
    for module in FIXTURES.glob("*.py"):     # the user functions the flows name
        (folder / module.name).write_text(module.read_text())
    return render_physical(check_file(flow), "text", case.options)


def _all_cases() -> list[Case]:
    return [case for path in sorted(FIXTURES.glob("*.txt")) for case in load_cases(path)[1]]


@pytest.mark.parametrize("case", _all_cases(), ids=lambda c: f"{c.file.stem}: {c.title}")
def test_rule_fixture(case, tmp_path):
    assert physical_text(case, tmp_path) == case.expected


def test_every_rule_has_fixtures():
    """A rule module without a fixture file would escape the cases above."""
    rules = Path(__file__).parents[2] / "compiler/optimizer/rules"
    names = {re.search(r'^NAME = "(\w+)"', p.read_text(), re.M).group(1) for p in rules.glob("*.py") if p.stem != "__init__"}
    assert names == {p.stem for p in FIXTURES.glob("*.txt")}


def update_fixtures(folder: Path) -> None:
    """Rewrite every fixture file's expected parts with the compiler's current output."""
    for path in sorted(FIXTURES.glob("*.txt")):
        preamble, cases = load_cases(path)
        parts = [preamble]
        for case in cases:
            flow = case.flow[len(preamble):]
            parts.append(f"# {case.title}\n{flow}----\n{physical_text(case, folder)}\n")
        path.write_text("".join(parts).rstrip("\n") + "\n")


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as scratch:
        update_fixtures(Path(scratch))
