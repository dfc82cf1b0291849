async def double_it(row):
    return {"doubled": row["value"] * 2}


def label(row):
    return {"label": "high" if row["doubled"] > 10 else "low"}


def check(row, limits):
    limit = limits.get(row["device"])
    yield {"device": row["device"], "over": bool(limit and row["value"] > limit["limit"])}
