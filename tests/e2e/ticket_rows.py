"""The support tickets the budget tests label (TOKENS and USD budgets alike): rows with repeated
subjects and bodies of different lengths, in two JSON files, and a labeller that answers by keyword."""
from __future__ import annotations

import json
from pathlib import Path

from dslc.testing.openai_service import keyword_labeller

LABELS = keyword_labeller({"category": [("invoice", "billing"), ("password", "account"), ("", "other")],
                           "urgency": [("down", 5), ("", 2)]})


def write_tickets(folder: Path, n: int = 48, distinct: int = 24) -> list[dict]:
    """`n` tickets, `distinct` of them different, written to folder/in/{0,1}.json."""
    subjects = ["invoice twice", "password reset", "site down", "hello there", "refund invoice", "cannot login"]
    rows = [{"id": f"t{i}", "subject": subjects[i % distinct % len(subjects)],
             "body": f"ticket body number {i % distinct} " + "details " * (i % distinct % 5)} for i in range(n)]
    (folder / "in").mkdir(parents=True)
    for part in range(2):
        (folder / f"in/{part}.json").write_text("".join(json.dumps(r) + "\n" for r in rows[part::2]))
    return rows
