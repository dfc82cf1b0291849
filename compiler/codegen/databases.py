"""The steps of a job that read tables: SOURCE ... FROM DATABASE (Spark's JDBC reader; in
STREAMING read once when the job starts and held for the run), in STREAMING a BROADCAST of a
table, read by the driver when the job starts and at each REFRESH (runtime/spark/refreshed_state.py),
and SOURCE ... FROM TABLE (Spark's catalog, runtime/spark/tables.py). A `dslc test` case stands a
PARQUET file in for a database table, read the same way."""
from __future__ import annotations

import ast

from dslc.compiler.codegen.emitter import lit
from dslc.compiler.plan import logical as plan


class DatabaseSteps:
    """Mixed into the lowering (compiler/codegen/lower.py): `out`, `plan`, `streaming`, `v`,
    `comment` and `_view` are its."""

    def _read_once(self, name: str) -> bool:
        node = self.plan.node(name)
        return isinstance(node, plan.Source) and node.read_once

    def _columns_call(self, head: str, args: list[str], tail: str = "") -> None:
        """`head(args)tail` as the emitter writes calls, an argument `columns=((name, type), ...)`
        too long for a line written one column a line."""
        o = self.out
        one = f"{head}({', '.join(args)}){tail}"
        if len(one) <= o.room():
            o.line(one)
            return
        o.line(f"{head}(")
        with o.indent():
            for arg in args:
                if arg.startswith("columns=") and len(arg) >= o.room():
                    o.line("columns=(")
                    with o.indent():
                        for pair in ast.literal_eval(arg[len("columns="):]):
                            o.line(f"{lit(pair)},")
                    o.line("),")
                else:
                    o.line(f"{arg},")
        o.line(f"){tail}")

    def _read_table(self, node: plan.Source) -> None:
        """SOURCE ... FROM TABLE: the catalog's table (a stream of its new files in STREAMING)."""
        args = ["spark", lit(node.path), "FOLDER", f"columns={lit(tuple((f.name, f.type) for f in node.schema))}"]
        if self.streaming:
            args.append("streaming=True")
        self._columns_call(f"{self.v(node.name)} = tables.read", args)
        if node.watermark and self.streaming:
            self.out.line(f"{self.v(node.name)} = {self.v(node.name)}.withWatermark("
                          f"{lit(node.watermark.column)}, {lit(f'{node.watermark.delay_s:g} seconds')})")
        self._view(self.v(node.name), node.name)

    def _read_database(self, node: plan.Source) -> None:
        """SOURCE ... FROM DATABASE: Spark's JDBC reader, in ranges with PARTITION BY; in
        STREAMING read once when the job starts and held (a table has no offsets to follow)."""
        args = self._database_read_args(node)
        if self.streaming:
            self.out.comment("STREAMING reads a table once, when the job starts, and holds its rows for the run")
            args.append("held=True")
        self._columns_call(f"{self.v(node.name)} = jdbc.read", args)
        self._view(self.v(node.name), node.name)

    @staticmethod
    def _database_read_args(node: plan.Source) -> list[str]:
        table = node.database
        assert table is not None
        args = ["spark", lit(table.url), "secrets", f"name={lit(table.database)}"]
        args.append(f"table={lit(table.table)}" if table.table else f"query={lit(table.query)}")
        if table.partition_column:
            args += [f"partition_column={lit(table.partition_column)}", f"partitions={table.partitions}"]
        args.append(f"columns={lit(tuple((f.name, f.type) for f in node.schema))}")
        return args

    def _read_by_its_state(self, node: plan.Source) -> bool:
        """STREAMING: a table that only BROADCASTs read is read by each of them itself, when the
        job starts and at each REFRESH (no step of its own)."""
        readers = self.plan.consumers(node.name)
        return self.streaming and node.read_once and bool(readers) and \
            all(isinstance(r, plan.BroadcastState) for r in readers)

    def _refreshed_state(self, node: plan.BroadcastState, source: plan.Source) -> None:
        """STREAMING BROADCAST of a table: read when the job starts and, with REFRESH EVERY d under
        a continuous trigger, every d, the difference applied between micro-batches."""
        o = self.out
        table = source.database
        if table is not None:
            relation = f"TABLE {table.table!r}" if table.table else "QUERY '...'"
            where = f"DATABASE {table.database} {relation}"
        else:
            where = f"{source.connector} {source.path!r} (a stand-in for the table)"
        every = f" REFRESH EVERY {node.refresh_s:g}s" if node.refresh_s else ""
        self.comment([node.line], f"BROADCAST {node.name} FROM {where} KEY {node.key}{every}")
        o.comment("read now, before any data micro-batch" + (
            f", then again every {node.refresh_s:g} s (a continuous trigger): new and changed rows upserted, "
            "missing keys deleted" if node.refresh_s else ""))
        o.line(f"{self.v(node.name)} = refreshed_state.RefreshedState(")
        with o.indent():
            o.line(f"spark, {lit(node.name)}, CHECKPOINT, key={lit(node.key)}, refresh_s={lit(node.refresh_s)},")
            if table is not None:
                self._columns_call("read=lambda: jdbc.read", self._database_read_args(source), tail=",")
            else:
                ddl = ", ".join(f"`{f.name}` {f.type}" for f in source.schema)
                o.line(f"read=lambda: spark.read.format({lit(source.connector.lower())}).schema({lit(ddl)})"
                       f".load(resolve(FOLDER, {lit(source.path)})),")
        o.line(")")
        o.line(f"{self.v(node.name)}.start(TRIGGER, queries)  # reads again while the job's queries run")
