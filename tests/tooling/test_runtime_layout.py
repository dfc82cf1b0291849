"""runtime/ by parts (issue #29 item 0): imports go one way between the parts and no module of
the runtime imports, directly or through others, a module that imports it back. Read from the
sources with `ast`, so a circle added later fails here before it fails at import time."""
from __future__ import annotations

import ast
from pathlib import Path

RUNTIME = Path(__file__).resolve().parents[2] / "runtime"

# part -> parts it must not import (what would turn the one-way layering around); calls/factory.py
# is where a kind meets its wrappers, so it alone of calls/ may import wrappers/
COMPOSES = {"dslc.runtime.calls.factory"}
FORBIDDEN = {
    # a call may hold a limit of its own (a model's TOKENS per minute): limits are leaves
    "calls": ("core.async_operator", "core.resolution", "core.chain", "core.arrow_chain", "wrappers", "spark"),
    "wrappers": ("core.async_operator", "core.resolution", "core.chain", "core.arrow_chain", "spark"),
    "limits": ("core", "calls", "wrappers", "spark"),
    "schema": ("core", "calls", "wrappers", "limits", "spark"),
    "core": ("spark",),
    # TIER BATCH's provider batches run on the driver before the pass: calls, the store, limits
    "batches": ("core", "spark"),
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(RUNTIME).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(("dslc", "runtime", *parts))


def _imports(path: Path) -> set[str]:
    """Every dslc.runtime module `path` imports (a name imported from a package counts as its
    module when one exists)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {m for m in found if m.startswith("dslc.runtime")}


def _graph() -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in RUNTIME.rglob("*.py") if "__pycache__" not in p.parts}
    return {name: {m for m in _imports(path) if m in modules and m != name} for name, path in modules.items()}


def test_the_runtime_has_no_import_circle() -> None:
    graph = _graph()
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


def test_parts_import_one_way() -> None:
    wrong = []
    for module, targets in _graph().items():
        part = module.split(".")[2] if module.count(".") >= 3 else ""
        for target in targets:
            if module in COMPOSES and target.startswith("dslc.runtime.wrappers"):
                continue
            for forbidden in FORBIDDEN.get(part, ()):
                if target == f"dslc.runtime.{forbidden}" or target.startswith(f"dslc.runtime.{forbidden}."):
                    wrong.append(f"{module} imports {target}")
    assert wrong == []


def test_every_call_kind_is_registered_behind_the_one_interface() -> None:
    from dslc.runtime.calls.base import EnrichCall
    from dslc.runtime.calls.factory import KINDS

    assert KINDS, "no call kind registered"
    for config_type, kind in KINDS.items():
        assert issubclass(kind, EnrichCall), f"{kind.__name__} for {config_type.__name__} is not an EnrichCall"
