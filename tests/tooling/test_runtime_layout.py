"""runtime/ by parts (issue #29 item 0): imports go one way between the parts and no module of
the runtime imports, directly or through others, a module that imports it back. Read from the
sources with `ast`, so a circle added later fails here before it fails at import time."""
from __future__ import annotations

from pathlib import Path

from import_graph import circles, graph

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
    # NEAREST BY's index and probe: NumPy, pyarrow and faiss only, a leaf as limits/ is
    "vectors": ("core", "calls", "wrappers", "limits", "schema", "broadcast", "sources", "store", "spark"),
}


def _graph() -> dict[str, set[str]]:
    return graph(RUNTIME, "dslc.runtime")


def test_the_runtime_has_no_import_circle() -> None:
    assert circles(_graph()) == []


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
