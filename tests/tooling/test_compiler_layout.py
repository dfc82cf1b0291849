"""compiler/ by stages (issue #42 item 1): frontend → plan (which asks sparksql, a leaf) → optimizer
→ codegen → pipeline → lsp → cli; a stage imports only the stages below it, and no module imports,
directly or through others, a module that imports it back. Read from the sources with `ast`, as
tests/tooling/test_runtime_layout.py reads the runtime, so a wrong arrow fails here first."""
from __future__ import annotations

from pathlib import Path

from import_graph import circles, graph

COMPILER = Path(__file__).resolve().parents[2] / "compiler"
PACKAGE = "dslc.compiler"

# part (a folder of compiler/, or a module at its top) -> its floor: a part imports only parts on
# lower floors. Parts on one floor know nothing of each other (sparksql models Spark SQL without
# the front end's syntax tree or the plan); `dslc lsp` is a command of the command line, so cli
# stands above lsp, and what the two share lives in interactive/.
FLOORS = {
    "source": 0,
    "diagnostics": 1,
    "frontend": 2, "sparksql": 2,
    "plan": 3,
    "optimizer": 4,
    "codegen": 5,
    "pipeline": 6, "report": 6, "interactive": 6,
    "lsp": 7,
    "cli": 8,
}


def _part(module: str) -> str:
    return module.split(".")[2] if module.count(".") >= 2 else ""


def test_every_part_of_the_compiler_has_a_floor() -> None:
    parts = {_part(module) for module in graph(COMPILER, PACKAGE)} - {""}
    assert parts - FLOORS.keys() == set(), "a new part of compiler/: give it a floor in FLOORS"


def test_stages_import_only_the_stages_below_them() -> None:
    wrong = []
    for module, targets in sorted(graph(COMPILER, PACKAGE).items()):
        part = _part(module)
        for target in sorted(targets):
            other = _part(target)
            if part and other != part and FLOORS[other] >= FLOORS[part]:
                wrong.append(f"{module} imports {target}")
    assert wrong == []


def test_the_compiler_has_no_import_circle() -> None:
    """Imports under TYPE_CHECKING name types only, so they close no circle."""
    assert circles(graph(COMPILER, PACKAGE, at_run_time=True)) == []


def test_the_spark_sql_model_is_a_leaf() -> None:
    """sparksql reads SQL text with its span and gives names, types and diagnostics: nothing of
    the front end, the plan or the stages after them."""
    outside = sorted(f"{module} imports {target}" for module, targets in graph(COMPILER, PACKAGE).items()
                     if _part(module) == "sparksql"
                     for target in targets if _part(target) not in ("sparksql", "source", "diagnostics"))
    assert outside == []
