"""Where a pipeline run locally keeps the tables of Spark's catalog (SOURCE ... FROM TABLE, SINK ...
TO TABLE): under its own folder, in Spark's layout, so they persist between runs. Read by the
compiler (a table's columns) and by the job (spark/tables.py); no Spark here."""
from __future__ import annotations

from pathlib import Path

#: The folder of the local catalog's tables, under the pipeline's folder.
WAREHOUSE = "spark-warehouse"


def local_folder(folder: str | Path, name: str) -> Path:
    """Where table `name` lives: `spark-warehouse/<namespace>.db/<table>`, a table of the default
    namespace directly in the warehouse (as Spark lays out its own warehouse)."""
    parts = name.lower().split(".")
    if len(parts) == 3 and parts[0] == "spark_catalog":
        parts = parts[1:]
    warehouse = Path(folder) / WAREHOUSE
    if len(parts) == 1 or parts[0] == "default":
        return warehouse / parts[-1]
    return warehouse / f"{parts[-2]}.db" / parts[-1]
