"""User functions the error cases refer to (the checker only needs the module to exist)."""


def customer(row):
    return None


def score(row, rules):
    return []


def apply(row, rules):
    rules[row["rule_id"]] = row
