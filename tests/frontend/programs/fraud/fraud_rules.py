"""User functions of the fraud example (only their existence is checked by the front end)."""


def apply(row, rules):
    rules[row["rule_id"]] = row


def score(row, rules):
    yield {"order_id": row["order_id"], "score": 0.0}
