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
    "calls": ("core.async_operator", "core.resolution", "core.chain", "core.arrow_chain", "wrappers", "spark",
              "policies"),
    "wrappers": ("core.async_operator", "core.resolution", "core.chain", "core.arrow_chain", "spark", "policies"),
    "limits": ("core", "calls", "wrappers", "spark", "policies"),
    # what decides around an element's attempts (RETRY, RATE, ADAPTIVE, ON OUTAGE, BUDGET): the
    # resolver (core/) runs them; they drive limits/ and read calls/' errors, and know no wrapper
    "policies": ("core", "wrappers", "spark", "store", "broadcast", "databases", "vectors", "batches"),
    "schema": ("core", "calls", "wrappers", "limits", "spark"),
    "core": ("spark",),
    # the driver's side of DATABASE (URLs, the check before Spark starts, tables, commits): a leaf
    "databases": ("core", "calls", "wrappers", "limits", "spark", "broadcast", "store", "vectors"),
    # NEAREST BY's index and probe: NumPy, pyarrow and faiss only, a leaf as limits/ is
    "vectors": ("core", "calls", "wrappers", "limits", "schema", "broadcast", "sources", "store", "spark",
                "databases"),
    # TIER BATCH's provider batches run on the driver before the pass: calls, the store, limits
    "batches": ("core", "spark"),
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


def test_the_operator_and_the_resolver_never_ask_which_wrapper_they_hold() -> None:
    """calls/factory.py composes every wrapper (issue #42): the operator core imports none, and
    asks the call what they add through `EnrichCall` only."""
    reached = _graph()
    for module in ("dslc.runtime.core.async_operator", "dslc.runtime.core.resolution"):
        assert not [t for t in reached[module] if t.startswith("dslc.runtime.wrappers")], module


def test_each_attempt_policy_is_a_module_of_its_own() -> None:
    from dslc.runtime.policies.base import AttemptPolicy

    policies = sorted(p.stem for p in (RUNTIME / "policies").glob("*.py") if p.stem not in ("__init__", "base"))
    assert policies == ["adaptive", "budget", "outage", "pushback", "rate", "refusal", "retry"]
    for name in policies:
        module = __import__(f"dslc.runtime.policies.{name}", fromlist=["_"])
        assert any(isinstance(v, type) and issubclass(v, AttemptPolicy) and v is not AttemptPolicy
                   for v in vars(module).values()), name


def test_every_call_kind_is_registered_behind_the_one_interface() -> None:
    from dslc.runtime.calls.base import EnrichCall
    from dslc.runtime.calls.factory import KINDS

    assert KINDS, "no call kind registered"
    for config_type, kind in KINDS.items():
        assert issubclass(kind, EnrichCall), f"{kind.__name__} for {config_type.__name__} is not an EnrichCall"


def test_an_errors_class_is_decided_in_one_leaf_module():
    """calls/errors.py (which class an error is in, so whether RETRY calls again: #41) imports no
    other part of the runtime, so every part may ask it (the operator core, wrappers, a future
    policy object) without a circle."""
    assert _graph()["dslc.runtime.calls.errors"] == set()


def test_enrich_with_sql_is_a_registered_call_kind() -> None:
    from dslc.runtime.calls.factory import KINDS
    from dslc.runtime.calls.sql import SqlEnrichCall
    from dslc.runtime.config import SqlCall

    assert KINDS[SqlCall] is SqlEnrichCall


def test_expect_figures_and_the_chain_operator_need_no_spark() -> None:
    """EXPECT's figures are read by the compiler (the report, `dslc run`'s live view) and its
    chain operator runs in the Python workers: neither imports Spark's glue (issue #45)."""
    reached = _graph()
    for module in ("dslc.runtime.expect_figures", "dslc.runtime.core.expect_operator", "dslc.runtime.core.expect_batch"):
        seen, stack = set(), [module]
        while stack:
            current = stack.pop()
            if current in seen:
                continue
            seen.add(current)
            stack.extend(reached.get(current, ()))
        assert not [m for m in seen if m.startswith("dslc.runtime.spark")], module


def test_provenance_is_a_schema_leaf_and_an_operator_part() -> None:
    """PROVENANCE (#46): what the struct holds and the note an answer carries are decided in one
    leaf of schema/ (the compiler types the column from it, the kinds and wrappers write notes
    through it); the struct is made by core/provenance.py, which needs no Spark."""
    reached = _graph()
    assert reached["dslc.runtime.schema.provenance"] <= {"dslc.runtime.config"}
    assert not [m for m in reached["dslc.runtime.core.provenance"] if m.startswith("dslc.runtime.spark")]
    writers = [m for m, targets in reached.items() if "dslc.runtime.schema.provenance" in targets]
    assert {"dslc.runtime.calls.http", "dslc.runtime.calls.model", "dslc.runtime.wrappers.stored",
            "dslc.runtime.wrappers.recording", "dslc.runtime.core.provenance"} <= set(writers)
