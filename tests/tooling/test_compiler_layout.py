"""compiler/ by stages (issue #42 item 1): frontend → plan (which asks sparksql, a leaf) → optimizer
→ codegen → pipeline → lsp → cli; a stage imports only the stages below it, and no module imports,
directly or through others, a module that imports it back. Read from the sources with `ast`, as
tests/tooling/test_runtime_layout.py reads the runtime, so a wrong arrow fails here first."""
from __future__ import annotations

import ast
from pathlib import Path

COMPILER = Path(__file__).resolve().parents[2] / "compiler"

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


def _module_name(path: Path) -> str:
    parts = path.relative_to(COMPILER).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(("dslc", "compiler", *parts))


def _part(module: str) -> str:
    return module.split(".")[2] if module.count(".") >= 2 else ""


def _type_only(tree: ast.Module) -> set[int]:
    """The ids of the imports under `if TYPE_CHECKING:`: they name types and run no import."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            found.update(id(inner) for inner in ast.walk(node) if isinstance(inner, (ast.Import, ast.ImportFrom)))
    return found


def _imports(path: Path, *, at_run_time: bool) -> set[str]:
    """Every dslc.compiler module `path` imports (a name imported from a package counts as its
    module when one exists); with `at_run_time`, the imports under TYPE_CHECKING left out."""
    tree = ast.parse(path.read_text())
    skipped = _type_only(tree) if at_run_time else set()
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.ImportFrom):      # relative: from . import x, from .plan import y
            name = _module_name(path)
            package = name if path.name == "__init__.py" else name.rpartition(".")[0]
            base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1])
            module = f"{base}.{node.module}" if node.module else base
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {m for m in found if m.startswith("dslc.compiler.")}


def _graph(*, at_run_time: bool) -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in COMPILER.rglob("*.py") if "__pycache__" not in p.parts}
    return {name: {m for m in _imports(path, at_run_time=at_run_time) if m in modules and m != name}
            for name, path in modules.items()}


def test_every_part_of_the_compiler_has_a_floor() -> None:
    parts = {_part(module) for module in _graph(at_run_time=False)} - {""}
    assert parts - FLOORS.keys() == set(), "a new part of compiler/: give it a floor in FLOORS"


def test_stages_import_only_the_stages_below_them() -> None:
    wrong = []
    for module, targets in sorted(_graph(at_run_time=False).items()):
        part = _part(module)
        for target in sorted(targets):
            other = _part(target)
            if part and other != part and FLOORS[other] >= FLOORS[part]:
                wrong.append(f"{module} imports {target}")
    assert wrong == []


def test_the_compiler_has_no_import_circle() -> None:
    graph = _graph(at_run_time=True)
    circles: list[list[str]] = []
    state: dict[str, int] = {}

    def visit(module: str, stack: list[str]) -> None:
        state[module] = 1
        stack.append(module)
        for target in sorted(graph[module]):
            if state.get(target) == 1:
                circles.append(stack[stack.index(target):] + [target])
            elif target not in state:
                visit(target, stack)
        stack.pop()
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [])
    assert circles == []


def test_the_spark_sql_model_is_a_leaf() -> None:
    """sparksql reads SQL text with its span and gives names, types and diagnostics: nothing of
    the front end, the plan or the stages after them."""
    outside = sorted(f"{module} imports {target}" for module, targets in _graph(at_run_time=False).items()
                     if _part(module) == "sparksql"
                     for target in targets if _part(target) not in ("sparksql", "source", "diagnostics"))
    assert outside == []
