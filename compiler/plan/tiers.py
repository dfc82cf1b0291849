"""TIER, PRICE, BUDGET n USD and ON BATCH FAILURE of an ENRICH, read and checked against its call,
its STORE and the pipeline's MODE.

- TIER FLEX | BATCH asks a model provider for a cheaper tier of the same API: MODEL and EMBEDDING
  only; the embeddings API has no flex tier; TIER BATCH keeps its answers in the answer store
  (STORE) and answers within the provider's 24 hours, which no micro-batch waits for (STREAMING
  names FLEX as the way out). TIER FLEX without a TIMEOUT waits 15 minutes, as the provider asks.
- PRICE is what a call of the operator's own tier costs: per call, or per million input (and, for
  MODEL, output) tokens, which only a model's answers report.
- BUDGET n USD counts money at that PRICE, so it needs one.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from dslc.compiler.diagnostics import Diagnostic, error
from dslc.compiler.frontend import ast
from dslc.compiler.plan import values
from dslc.runtime.config import TIERS, Price

if TYPE_CHECKING:
    from dslc.compiler.plan.enrich_options import EnrichOptions
    from dslc.compiler.plan.planner import _Planner as Planner

KEYS = ("tier", "price", "on_batch_failure")
FLEX_TIMEOUT_S = 900.0          # the provider's advice for flex requests: 15 minutes
_PRICE_EXAMPLE = "PRICE 0.40 PER MILLION INPUT TOKENS, 1.60 PER MILLION OUTPUT TOKENS"


def read_option(result: "EnrichOptions", opt: ast.Opt, problems: list[Diagnostic]) -> None:
    """One TIER, PRICE or ON BATCH FAILURE clause into `result`."""
    if opt.key == "tier":
        result.tier = values.choice(opt.args[0], TIERS, "TIER", problems) or result.tier
    elif opt.key == "on_batch_failure":
        result.batch_failure = values.choice(opt.args[0], ("ONLINE", "BATCH"), "ON BATCH FAILURE",
                                             problems) or result.batch_failure
    else:
        result.price = _price(opt, problems)


def _price(opt: ast.Opt, problems: list[Diagnostic]) -> Price | None:
    amount = values.positive(opt.args[0], "PRICE", problems)
    if opt.args[1].value == "CALL":
        return Price(per_call=amount) if amount else None
    output = values.positive(opt.args[2], "PRICE ... PER MILLION OUTPUT TOKENS", problems) if len(opt.args) > 2 else 0.0
    if not amount or output is None:
        return None
    return Price(input_per_million=amount, output_per_million=output)


def check(planner: "Planner", stmt: ast.Enrich, checked: "EnrichOptions") -> None:
    """The clauses against the call's kind, STORE and the MODE; FLEX's default TIMEOUT."""
    clauses = checked.clauses
    model = isinstance(stmt.call, (ast.ModelCall, ast.EmbeddingCall))
    kind = "MODEL" if isinstance(stmt.call, ast.ModelCall) else "EMBEDDING" if model else \
        "HTTP" if isinstance(stmt.call, ast.HttpCall) else "PYTHON"
    tier = clauses.get("tier")
    if tier is not None and checked.tier != "STANDARD":
        _check_tier(planner, tier, checked, kind, model)
    failure = clauses.get("on_batch_failure")
    if failure is not None and checked.tier != "BATCH":
        planner.add(error("E0325", failure.span, clause="ON BATCH FAILURE",
                          what="TIER BATCH (it says where a line the provider's batch could not answer goes)",
                          hint="add TIER BATCH, or drop ON BATCH FAILURE"))
    price = clauses.get("price")
    if price is not None and checked.price is not None:
        _check_price(planner, price, checked.price, kind, model)
    budget = clauses.get("budget")
    if budget is not None and checked.budget is not None and checked.budget.unit == "USD" and price is None:
        planner.add(error("E0325", budget.span, clause=f"BUDGET {budget.args[0].text} USD",
                          what="PRICE (what a call costs, so that money can be counted)",
                          hint=f"add {_PRICE_EXAMPLE if model else 'PRICE 0.002 PER CALL'}, or count "
                               f"{'TOKENS or CALLS' if model else 'CALLS'}"))
    if checked.tier == "FLEX" and "timeout" not in clauses:
        checked.timeout_s = FLEX_TIMEOUT_S


def _check_tier(planner: "Planner", tier: ast.Opt, checked: "EnrichOptions", kind: str, model: bool) -> None:
    name = checked.tier
    if not model:
        planner.add(error("E0325", tier.span, clause=f"TIER {name}",
                          what="MODEL or EMBEDDING (a model provider's cheaper tier of the same API)",
                          hint="drop TIER: an HTTP service or a Python function has no provider tiers"))
        return
    if name == "FLEX" and kind == "EMBEDDING":
        planner.add(error("E0304", tier.span, first="TIER FLEX", second="EMBEDDING (the embeddings API has no flex tier)",
                          hint="TIER BATCH answers embeddings at half price too"))
    if name != "BATCH":
        return
    if not checked.store:
        planner.add(error("E0325", tier.span, clause="TIER BATCH",
                          what="STORE (the provider's batch answers are kept in the answer store, where the job "
                               "finds them; a run stopped halfway resumes the same batches)",
                          hint="add STORE TTL 30d"))
    if planner.settings.mode == "STREAMING":
        planner.add(error("E0311", tier.span, feature="TIER BATCH", mode="STREAMING",
                          why="a provider's batch answers within 24 hours, and a micro-batch waits for its rows' answers",
                          hint="use TIER FLEX: the same half price, answered online (slower, with a TIMEOUT of "
                               "15 minutes)" if kind == "MODEL" else "drop TIER: the embeddings API has no flex tier"))


def _check_price(planner: "Planner", clause: ast.Opt, price: Price, kind: str, model: bool) -> None:
    if price.per_call:
        return
    if not model:
        planner.add(error("E0304", clause.span, first="PRICE ... PER MILLION INPUT TOKENS",
                          second=f"WITH {kind} (tokens are counted from a model's answers)",
                          hint=f"price its calls: PRICE {clause.args[0].text} PER CALL"))
    elif kind == "MODEL" and len(clause.args) < 3:
        planner.add(error("E0325", clause.span, clause="PRICE ... PER MILLION INPUT TOKENS of a MODEL",
                          what="the price of its output tokens too (a model's answers are billed)",
                          hint=f"write PRICE {clause.args[0].text} PER MILLION INPUT TOKENS, "
                               "1.60 PER MILLION OUTPUT TOKENS"))
