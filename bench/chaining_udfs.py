"""User functions of the chaining benchmark's pipeline (copied beside its .flow file)."""


async def score(row):
    """ENRICH WITH PYTHON: an async function that answers at once (a lookup served from memory)."""
    return {"score": row["value"] * 2.0}


def label(row):
    """PROCESS: one label per reading."""
    return {"device": row["device"], "value": row["value"], "score": row["score"],
            "label": "high" if row["score"] > 100.0 else "low"}


def over(row):
    """PROCESS: keep the high readings."""
    if row["label"] == "high":
        yield {"device": row["device"], "over": True}
