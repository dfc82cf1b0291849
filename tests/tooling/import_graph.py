"""The import graph of a package read from its sources with `ast` (nothing is imported), and
the circles in it: what tests/tooling/test_runtime_layout.py and test_compiler_layout.py check."""
from __future__ import annotations

import ast
from pathlib import Path


def module_name(root: Path, package: str, path: Path) -> str:
    """`dslc.runtime.core.chain` for runtime/core/chain.py (root runtime/, package dslc.runtime)."""
    parts = path.relative_to(root).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join((package, *parts))


def _type_only(tree: ast.Module) -> set[int]:
    """The ids of the imports under `if TYPE_CHECKING:`: they name types and run no import."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            found.update(id(inner) for inner in ast.walk(node) if isinstance(inner, (ast.Import, ast.ImportFrom)))
    return found


def imports(root: Path, package: str, path: Path, *, at_run_time: bool = False) -> set[str]:
    """Every module of `package` that `path` imports (a name imported from a package counts as its
    module when one exists); with `at_run_time`, the imports under TYPE_CHECKING left out."""
    name = module_name(root, package, path)
    here = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text())
    skipped = _type_only(tree) if at_run_time else set()
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = here.split(".")[: len(here.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {m for m in found if m == package or m.startswith(package + ".")}


def graph(root: Path, package: str, *, at_run_time: bool = False) -> dict[str, set[str]]:
    """Each module of the package -> the package's modules it imports."""
    modules = {module_name(root, package, p): p for p in root.rglob("*.py") if "__pycache__" not in p.parts}
    return {name: {m for m in imports(root, package, path, at_run_time=at_run_time) if m in modules and m != name}
            for name, path in modules.items()}


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every circle a depth-first walk meets, as the modules along it (first one repeated last)."""
    found: list[list[str]] = []
    state: dict[str, int] = {}

    def visit(module: str, stack: list[str]) -> None:
        state[module] = 1
        stack.append(module)
        for target in sorted(edges[module]):
            if state.get(target) == 1:
                found.append(stack[stack.index(target):] + [target])
            elif target not in state:
                visit(target, stack)
        stack.pop()
        state[module] = 2

    for module in sorted(edges):
        if module not in state:
            visit(module, [])
    return found
