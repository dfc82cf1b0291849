"""A case's sink read back from its Parquet files with pyarrow, as the rows Spark's own read
would collect, without a Spark job (one cost about a second per sink, 13 % of `dslc test
examples/`).

The rows must be exactly Spark's: the values go through PySpark's own conversion
(`StructType.toInternal` then `fromInternal`, what `collect()` applies), with the Spark schema
the writer stored in each file's footer; timestamps are read as the UTC instants Spark stored
(INT96 or microseconds), maps as dicts. The files are Spark's: a streaming sink's are those its
log (`_spark_metadata`) names, in the order Spark reads small files in (largest first). Where this
cannot be sure of Spark's reading (no Spark schema in a footer, files of different schemas, dates
written in the legacy calendar, a type Arrow does not map), it says so (None) and the caller
reads with Spark.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

SPARK_SCHEMA = b"org.apache.spark.sql.parquet.row.metadata"
#: footer keys Spark writes when dates or timestamps were rebased to the old Julian calendar
LEGACY = (b"org.apache.spark.legacyDateTime", b"org.apache.spark.legacyINT96")


def read(folder: Path, files: list[Path], wanted: list[str]) -> list[Any] | None:
    """The rows (pyspark Rows) of the Parquet sink in `folder` (`files`: its data files, hidden
    ones left out), with the columns of `wanted` it has (all when it has none of them); None when
    Spark's read must decide."""
    try:
        return _read(folder, files, wanted)
    except Exception:  # noqa: BLE001 - any doubt: Spark reads the sink, as before
        return None


def _read(folder: Path, files: list[Path], wanted: list[str]) -> list[Any] | None:
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import StructType

    files = _committed(folder, files)
    if files is None:
        return None
    footers = [pq.read_schema(f).metadata or {} for f in files]
    stored = {m.get(SPARK_SCHEMA) for m in footers}
    if len(stored) != 1 or None in stored or any(key in m for m in footers for key in LEGACY):
        return None
    schema = StructType.fromJson(json.loads(stored.pop()))
    columns = [n for n in wanted if n in schema.names] or schema.names
    chosen = StructType([schema[n] for n in columns])
    arrow = to_arrow_schema(chosen, timezone="UTC")
    tables = [pq.read_table(f, columns=columns).cast(arrow) for f in files]
    table = pa.concat_tables(tables) if tables else arrow.empty_table()
    return [chosen.fromInternal(chosen.toInternal(row)) for row in table.to_pylist(maps_as_pydicts="strict")]


def _committed(folder: Path, files: list[Path]) -> list[Path] | None:
    """The Parquet files Spark reads in `folder`, largest first (Spark packs small files into
    read partitions by size, largest first; equal sizes by name); a streaming sink's are the ones
    its log adds. None when the log holds what this does not read."""
    if any(f.parent != folder for f in files):
        return None             # folders inside: Spark would read them as partitions
    parquet = [f for f in files if f.suffix == ".parquet"]
    log = folder / "_spark_metadata"
    if log.is_dir():
        added = _logged(log)
        if added is None or not added <= {f.resolve() for f in parquet}:
            return None
        parquet = [f for f in parquet if f.resolve() in added]
    elif len(parquet) != len(files):
        return None         # other files Spark would try to read as Parquet
    return sorted(parquet, key=lambda f: (-f.stat().st_size, f.name))


def _logged(log: Path) -> set[Path] | None:
    """The files a FileStreamSink log adds: its latest compaction and the batches after it."""
    batches = {}
    for entry in log.iterdir():
        name = entry.name.removesuffix(".compact")
        if not name.isdigit():
            if entry.name.startswith("."):
                continue        # Hadoop's checksums
            return None
        batches[int(name)] = entry
    compacted = [n for n, e in batches.items() if e.name.endswith(".compact")]
    start = max(compacted, default=0)
    added: set[Path] = set()
    for n in sorted(b for b in batches if b >= start):
        lines = batches[n].read_text(encoding="utf-8").splitlines()
        if not lines or lines[0] != "v1":
            return None
        for line in filter(None, lines[1:]):
            record = json.loads(line)
            if record.get("action") != "add" or record.get("isDir"):
                return None
            added.add(Path(unquote(urlparse(record["path"]).path)).resolve())
    return added
