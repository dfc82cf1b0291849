async def score(row):
    return {"score": row["amount"] / 10}
