"""Column references by the user's exact names: Spark parses the string given to `F.col` and
`fromDDL`, so a name with a dot, a space or a back-quote is back-quoted (inner back-quotes doubled)."""
from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F


def quoted(name: str) -> str:
    """`name` back-quoted for Spark's parser."""
    return "`" + name.replace("`", "``") + "`"


def col(*parts: str) -> Column:
    """The column `parts[-1]`, qualified by the relation or alias names before it."""
    return F.col(".".join(quoted(p) for p in parts))
