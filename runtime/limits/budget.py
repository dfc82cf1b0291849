"""What an ENRICH whose BUDGET is spent raises: kept among the limits (a leaf every part may
import), so the token budget here and the store's call budget (wrappers/stored.py) raise one
exception the resolver knows."""
from __future__ import annotations


class BudgetSpent(Exception):
    """The operator's BUDGET for this run is spent: this element is left unanswered."""
