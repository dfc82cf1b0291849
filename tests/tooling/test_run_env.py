"""The registry of `dslc run`'s contract with the job (runtime/run_env.py, issue #42 item 3): every
name the shipped code or the docs spell is declared there, the code takes the names from it, each
declared reader does read it, and the docs table is the registry's."""
from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

import pytest
from import_graph import graph

from dslc.runtime import run_env

REPO = Path(__file__).resolve().parents[2]
SHIPPED = ("compiler", "runtime", "testing", "tools")
REGISTRY = REPO / "runtime" / "run_env.py"
# a name of the contract wherever it is spelled: code, a message, a docstring, a page
NAME = re.compile(r"(?<![\w.])(DSLC_[A-Z][A-Z0-9_]*|spark\.dslc\.[a-z][a-z0-9_.]*[a-z0-9_])")


def _shipped() -> list[Path]:
    return sorted(p for part in SHIPPED for p in (REPO / part).rglob("*.py") if p != REGISTRY)


def _docs() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def _where(path: Path) -> str:
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else path.name


def _undeclared(paths: list[Path]) -> list[str]:
    return [f"{_where(p)}:{n}: {name}" for p in paths
            for n, line in enumerate(p.read_text().splitlines(), 1)
            for name in NAME.findall(line) if name not in run_env.BY_NAME]


def test_every_name_the_shipped_code_spells_is_declared() -> None:
    assert _undeclared(_shipped()) == []


def test_every_name_the_docs_and_the_benchmarks_spell_is_declared() -> None:
    """The benchmarks play the user: they may spell a name, but only a declared one."""
    assert _undeclared([*_docs(), *sorted((REPO / "bench").rglob("*.py"))]) == []


def test_an_undeclared_name_is_found_and_an_identifier_is_not(tmp_path: Path) -> None:
    module = tmp_path / "new_module.py"
    module.write_text('"""Reads $DSLC_MASTER."""\n_DSLC_ERROR = 1\n'
                      'x = os.environ.get("DSLC_NEW_THING") or conf("spark.dslc.new.key", "spark.dslc.count_rows")\n')
    assert _undeclared([module]) == ["new_module.py:3: DSLC_NEW_THING", "new_module.py:3: spark.dslc.new.key"]
    assert _literals(module) == ["new_module.py:3: 'spark.dslc.count_rows'"]


def _literals(path: Path) -> list[str]:
    """The string constants of `path` that are exactly a name of the contract (a docstring or a
    message that mentions one is prose, not a name the code uses)."""
    tree = ast.parse(path.read_text())
    names = set(run_env.BY_NAME)
    return [f"{_where(path)}:{node.lineno}: {node.value!r}" for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names]


def test_the_shipped_code_takes_the_names_from_the_registry() -> None:
    assert [hit for p in _shipped() for hit in _literals(p)] == []


def _attributes() -> dict[str, run_env.Variable]:
    return {attr: v for attr, v in vars(run_env).items() if isinstance(v, run_env.Variable)}


@pytest.mark.parametrize("attr", sorted(_attributes()))
def test_each_declared_reader_reads_it(attr: str) -> None:
    """The files a variable's `read_by` names exist and use it (through the registry, or, for a
    test helper playing the user, by its name), so `read_by` cannot drift from the code."""
    variable = _attributes()[attr]
    readers = re.findall(r"[\w/]+\.py", variable.read_by)
    assert readers, f"{attr}: read_by names no file"
    for reader in readers:
        text = (REPO / reader).read_text()
        assert f"run_env.{attr}" in text or f'"{variable.name}"' in text, f"{reader} does not read {variable.name}"


def test_each_name_is_declared_once() -> None:
    assert len(run_env.BY_NAME) == len(run_env.ALL)


def test_the_docs_table_is_the_registrys() -> None:
    spec = importlib.util.spec_from_file_location("make_run_env_table", REPO / "tools" / "make_run_env_table.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    text = tool.DOC.read_text()
    assert tool.with_table(text) == text, "docs/operations.md: run `.venv/bin/python tools/make_run_env_table.py`"
    for v in run_env.ALL:
        assert f"| `{v.name}` |" in text


def test_the_registry_is_a_leaf() -> None:
    """The compiler, the driver and the Python workers import it: it imports nothing of dslc."""
    assert graph(REPO / "runtime", "dslc.runtime")["dslc.runtime.run_env"] == set()


def test_reading_follows_os_environ_get() -> None:
    env = {run_env.MASTER.name: "", run_env.PROGRESS.name: "0"}
    assert run_env.MASTER.get(environ={}) == "local[*]"
    assert run_env.MASTER.get("local[2]", environ={}) == "local[2]"
    assert run_env.MASTER.get(environ=env) == ""          # set to "": "", as os.environ.get gives
    assert run_env.PROGRESS.switched_off(environ=env)
    assert not run_env.PROGRESS.switched_off(environ={})
    assert not run_env.METRICS_QUIET.is_one(environ={})
    assert run_env.METRICS_FILE.get(environ={}) is None
