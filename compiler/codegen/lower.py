"""Physical plan → one readable, deterministic PySpark job file.

Each block starts with a comment naming the DSL line it comes from. User text (paths, SQL,
URLs, names) only ever enters the file through repr(), so it cannot break out of a literal.
A STREAMING job runs the same operators as streaming DataFrames, split into queries where a
result is shared or dead letters leave it (docs/streaming.md).
"""
from __future__ import annotations

import builtins
import keyword
import os
from dataclasses import dataclass
from pathlib import Path

from sqlglot import exp

from dslc.compiler.codegen import configs
from dslc.compiler.codegen.databases import DatabaseSteps
from dslc.compiler.codegen.emitter import Emitter, StringCall, ident, lit, lit_dict, wrapped
from dslc.compiler.codegen.nearest import NearestLowering
from dslc.compiler.optimizer import physical
from dslc.compiler.plan import logical as plan
from dslc.compiler.plan.match_keys import equality_keys
from dslc.compiler.plan.names import sql_name
from dslc.compiler.plan.streaming import watermarks
from dslc.runtime.secrets import secret_names

# SINK connector -> Spark data source format, for the sinks a job writes with df.write itself
_WRITE_FORMATS = {"PARQUET": "parquet", "JSON": "json", "CSV": "csv", "KAFKA": "kafka"}
_READ_FORMATS = {"JSON": "json", "CSV": "csv", "PARQUET": "parquet", "TEXT": "text", "RATE": "rate",
                 "KAFKA": "kafka", "PYTHON": "dslc_python"}


@dataclass(frozen=True)
class Target:
    """Where the job will live (for the relative path to the .flow folder) and run overrides."""

    job_folder: str
    trigger: str | None = None
    # False: a job that writes nothing (the REPL's :show, `dslc test`): each SINK's DataFrame and
    # each ENRICH's dead letters are handed back by main() in a capture.Captured, BATCH only
    writes: bool = True
    # True (with writes=False): `dslc explain --estimate`'s job, whose chains call nothing: each
    # hands the DataFrame reaching its ENRICHes to captured.chain_inputs (runtime/spark/estimate.py)
    estimate: bool = False
    # (operator, n): the chain that runs this ENRICH/PROCESS reads at most n rows of its input
    row_limits: tuple[tuple[str, int], ...] = ()


def _ddl(schema: plan.Schema) -> str:
    return ", ".join(f"`{f.name.replace('`', '``')}` {f.type}" for f in schema)


def pipeline_secrets(p: plan.Plan) -> tuple[str, ...]:
    """Every `${NAME}` secret the pipeline's calls name, in order of appearance."""
    found: dict[str, None] = {}
    for node in p.nodes:
        if isinstance(node, plan.Enrich):
            found.update(dict.fromkeys(_enrich_secrets(node)))
    for _, url in p.databases:      # DATABASE statements: checked before Spark starts
        found.update(dict.fromkeys(secret_names(url)))
    return tuple(found)


def _enrich_secrets(node: plan.Enrich) -> tuple[str, ...]:
    """The secrets an ENRICH names: its call's, and its ANSWERS location's (a Redis password)."""
    return secret_names((node.call, node.store.location if node.store is not None else ""))


def _user_modules(p: plan.Plan) -> tuple[str, ...]:
    refs: list[str] = []
    for node in p.nodes:
        if isinstance(node, (plan.Enrich, plan.Process)) and isinstance(node.call, plan.PythonCall):
            refs.append(node.call.ref)
        elif isinstance(node, plan.BroadcastState) and node.using:
            refs.append(node.using)
        elif isinstance(node, plan.Source) and node.connector == "PYTHON" and node.path:
            refs.append(node.path)
    refs += [s.path for s in p.sinks if s.connector == "PYTHON" and s.path]
    return tuple(sorted({r.split(":")[0] for r in refs}))


def _is_state(p: plan.Plan, name: str) -> bool:
    return isinstance(p.node(name), plan.BroadcastState)


# Names the job itself uses (imports, constants, locals of main and of micro-batch functions),
# Python's keywords and builtins: a relation variable never shadows one of them.
_JOB_NAMES = frozenset({
    "C", "FOLDER", "CHECKPOINT", "secrets", "driver_values", "TRIGGER", "main", "spark", "metrics", "queries", "batch",
    "batch_id", "batch_spark", "captured", "chains", "failure", "sinks", "state", "streaming", "sources", "python_source",
    "capture", "jdbc", "expectations",
    "pinned", "MetricsCollector", "flow_folder", "require_kafka", "resolve", "session", "F", "nearest",
    "nearest_state",
    *keyword.kwlist, *keyword.softkwlist, *dir(builtins),
})


class _Lowering(DatabaseSteps, NearestLowering):
    """Visits the physical steps in order and writes the job."""

    def __init__(self, phys: physical.Physical, target: Target):
        self.phys = phys
        self.plan = phys.plan
        self.target = target
        self.out = Emitter()
        self.streaming = self.plan.settings.mode == "STREAMING"
        self.var: dict[str, str] = {}
        self._taken: set[str] = set(_JOB_NAMES)
        self.watermarks = watermarks(self.plan)   # relation (lower case) -> its source's WATERMARK
        self.clocks: dict[str, str] = {}          # stage (lower case) -> its read with TICK rows
        self.row_limits = {name.lower(): n for name, n in target.row_limits}
        if not target.writes and self.streaming:
            raise ValueError("a job that writes nothing runs in BATCH mode")
        if target.estimate and target.writes:
            raise ValueError("the estimate's job writes nothing")
        for node in self.plan.nodes:     # in definition order, as the user spelt them
            self.v(node.name)
        # relations whose EXPECT runs inside a chain (the others' run as Spark expressions)
        self.fused = {name.lower() for chain in phys.chains for name in chain.expects}

    def v(self, name: str) -> str:
        """The Python variable holding relation `name`: the user's name, with `_df` (then a
        number) only when that name is taken by the job, Python, or another relation."""
        key = name.lower()
        if key not in self.var:
            base = ident(name)
            candidate, n = base, 2
            if candidate in self._taken:
                base = candidate = f"{base}_df"
            while candidate in self._taken:
                candidate, n = f"{base}_{n}", n + 1
            self.var[key] = candidate
            self._taken.add(candidate)
        return self.var[key]

    # ---- file layout
    def lower(self) -> str:
        s = self.plan.settings
        o = self.out
        source_name = Path(self.plan.source_path).name
        o.comment(f"@generated by dslc from {source_name}: do not edit, run `dslc compile` again.")
        o.docstring(f"Pipeline {s.name} ({s.mode} mode), compiled from {source_name}.")
        if self.phys.chains or self.plan.expects:
            o.line("from dslc.runtime import config as C")
        modules = self._runtime_modules()
        if modules:
            o.line(f"from dslc.runtime.spark import {', '.join(modules)}")
        o.line("from dslc.runtime.spark.metrics import MetricsCollector")
        kafka = self._kafka_uses()
        o.line(f"from dslc.runtime.spark.session import flow_folder, {'require_kafka, ' if kafka else ''}resolve, session")
        o.line()
        relative = os.path.relpath(self.plan.folder, self.target.job_folder) if self.plan.folder else "."
        o.line(f"FOLDER = flow_folder(__file__, {lit(Path(relative).as_posix())})")
        if self.streaming:
            o.line(f"CHECKPOINT = resolve(FOLDER, {lit(s.checkpoint or 'target/checkpoint/' + s.name)})")
            o.line(f"TRIGGER = {lit(self.target.trigger or s.trigger)}")
        o.line()
        o.line()
        o.line("def main() -> None:")
        with o.indent():
            conf = lit_dict(s.conf)
            needed = pipeline_secrets(self.plan)
            if needed or self.plan.databases:
                o.comment("the calls' ${NAME} secrets, read now (before Spark starts) from this process's "
                          "environment or the file $DSLC_SECRETS_FILE names; never written in this file")
                o.line(f"secrets = driver_values.required_secrets({lit(needed)})")
            if self.plan.databases:
                o.comment("each DATABASE answers now, or the job stops naming it (before Spark starts)")
                o.line(f"jdbc.reach({lit_dict(self.plan.databases)}, secrets)")
            o.call("spark = session", [lit(s.name), conf, "FOLDER", f"modules={lit(_user_modules(self.plan))}"])
            if kafka:
                o.line(f"require_kafka(spark, {lit(kafka)})")
            o.line("metrics = MetricsCollector(spark)")
            if not self.target.writes:
                o.line("captured = capture.Captured(metrics)  # this job writes nothing: main() returns it")
            if self.streaming:
                o.line("queries = []")
            for step in self.phys.steps:
                if isinstance(step, physical.Read) and self._read_by_its_state(step.node):
                    continue
                o.line()
                self.visit(step)
            for index, sink in enumerate(self.plan.sinks):
                o.line()
                self.visit_sink(index, sink)
            o.line()
            if self.streaming:
                o.line("streaming.await_queries(queries, TRIGGER)")
            o.line("metrics.report()" if self.target.writes else "return captured")
        o.line()
        o.line()
        o.line('if __name__ == "__main__":')
        with o.indent():
            o.line("failure.run_main(main)  # a failure: one clear line (under dslc run, the traceback in its log)")
        return o.text()

    def _kafka_uses(self) -> tuple[str, ...]:
        """The statements that need Spark's Kafka package, as error messages name them."""
        uses = [f"SOURCE {n.name} (line {n.line})" for n in self.plan.nodes
                if isinstance(n, plan.Source) and n.connector == "KAFKA"]
        uses += [f"SINK {k.input} (line {k.line})" for k in self.plan.sinks if k.connector == "KAFKA"]
        return tuple(uses)

    def _runtime_modules(self) -> list[str]:
        """The runtime.spark modules this job calls, so the job imports nothing it does not use."""
        steps = self.phys.steps
        writes_batches = [] if self.streaming else [k for k in self.plan.sinks
                                                if k.connector not in (*_WRITE_FORMATS, "TABLE") and k.database is None]
        used = {"failure", "sinks"} if writes_batches and self.target.writes else {"failure"}
        if not self.target.writes:
            used.add("capture")
        if self.phys.chains:
            used.add("chains")
        if pipeline_secrets(self.plan) or self.plan.databases:
            used.add("driver_values")
        if self.plan.databases:
            used.add("jdbc")
        if any(getattr(n, "connector", None) == "TABLE" for n in (*self.plan.nodes, *self.plan.sinks)):
            used.add("tables")
        if self.plan.expects:
            used.add("expectations")
        if any(isinstance(s, physical.MatchJoin) for s in steps) or \
                (not self.streaming and any(isinstance(s, physical.State) for s in steps)):
            used.add("state")
        if self.streaming:
            used.add("streaming")
            if self._pinned_states():
                used.add("pinned")
            if any(isinstance(s, physical.State) and self._read_once(s.node.source) for s in steps):
                used.add("refreshed_state")
        if any(isinstance(s, physical.Read) and s.node.connector == "PYTHON" for s in steps):
            used.add("python_source")
        used |= self.nearest_modules()
        if self.target.writes or (not self.streaming and any(isinstance(s, physical.Read) and s.node.connector == "RATE"
                                                            for s in steps)):
            used.add("sources")
        if self.target.writes and not self.streaming:
            used.add("sinks")
        return sorted(used)

    def _view(self, var: str, name: str) -> None:
        """Register relation `name` for Spark SQL, when a query reads it (no one else looks);
        first its EXPECT, when it runs in Spark: its readers, queries or not, read what passes."""
        self._expect(var, name)
        if any(isinstance(reader, plan.Query) for reader in self.plan.consumers(name)):
            self.out.line(f"{var}.createOrReplaceTempView({lit(sql_name(name))})")

    def _expect(self, var: str, name: str) -> None:
        """The EXPECT on `name` as Spark expressions over its rows (runtime/spark/expectations.py):
        BATCH writes its quarantine folders at once; STREAMING writes each in a query of its own."""
        expect = self.plan.expectation(name)
        if expect is None or name.lower() in self.fused:
            return
        o = self.out
        paths = expect.quarantine_paths
        self.comment([expect.line], f"EXPECT ON {expect.on}: {len(expect.constraints)} constraint"
                     f"{'s' if len(expect.constraints) != 1 else ''} judged by Spark, each counted; the readers get the rows that pass")
        config = self.v(f"{expect.on}_expect")
        o.value(configs.expect(expect), f"{config} = ")
        if not paths:
            o.line(f"{var} = expectations.check({var}, {config})")
        elif not self.target.writes:
            o.line(f"{var} = captured.hold_quarantine({var}, {config})  # not written")
        elif not self.streaming:
            o.comment("an action: writes the quarantined rows now, keeps the others for what follows")
            self._with_folders(f"{var} = expectations.check({var}, {config}, quarantine=", paths)
        else:
            o.line(f"{var} = expectations.judge({var}, {config})")
            for number, path in enumerate(paths, start=1):
                query = f"quarantine_{ident(expect.on)}" + (f"_{number}" if len(paths) > 1 else "")
                o.comment(f"query {query}: the rows EXPECT ON {expect.on} quarantines to {path}")
                o.call("queries.append(streaming.write_quarantine",
                       [f"expectations.quarantine_of({var}, {config}, {lit(path)})", f"resolve(FOLDER, {lit(path)})",
                        lit(query), "CHECKPOINT", "TRIGGER"], tail=")")
            o.line(f"{var} = expectations.passing({var})")

    def _with_folders(self, head: str, paths) -> None:
        """`head{path: resolve(FOLDER, path), ...})`, a folder a line."""
        o = self.out
        o.line(head + "{")
        with o.indent():
            for path in paths:
                o.line(f"{lit(path)}: resolve(FOLDER, {lit(path)}),")
        o.line("})")

    def _fused_quarantine(self, step: physical.Chain) -> dict[str, str]:
        """QUARANTINE folders of the EXPECTs inside a chain: path → the relation whose EXPECT it is."""
        return {path: name for name in step.expects for path in self.plan.expectation(name).quarantine_paths}

    def comment(self, lines: list[int], what: str) -> None:
        where = "line" if len(lines) == 1 else "lines"
        self.out.comment(f"{where} {', '.join(str(n) for n in lines)}: {what}")

    def visit(self, step: physical.Step, session: str = "spark") -> None:
        getattr(self, f"visit_{type(step).__name__}")(step, session)

    # ---- steps
    def visit_Read(self, step: physical.Read, session: str) -> None:
        node = step.node
        o = self.out
        where = f"{node.connector}" + (f" {node.path!r}" if node.path else "")
        if node.database is not None:
            where = f"DATABASE {node.database.database} " + ("TABLE" if node.database.table else "QUERY") + \
                f" {node.path!r}"
        self.comment([node.line], f"SOURCE {node.name} FROM {where}")
        if node.connector == "RATE" and not self.streaming:
            o.line(f"{self.v(node.name)} = sources.rate_batch(spark, {lit_dict(node.options)})  # Spark's rate source is streaming-only")
            self._count(node)
            self._view(self.v(node.name), node.name)
            return
        if node.database is not None:
            self._read_database(node)
            return
        if node.connector == "TABLE":
            self._read_table(node)
            return
        reader = "readStream" if self.streaming and not node.read_once else "read"
        if node.connector == "PYTHON":
            o.line(f"python_source.register(spark{', streaming=True' if self.streaming else ''})")
        calls: list[str | StringCall] = [f".format({lit(_READ_FORMATS[node.connector])})"]
        if node.connector not in ("TEXT", "RATE", "KAFKA"):
            calls.append(StringCall(".schema", _ddl(node.schema)))
        options = dict(node.options)
        if node.connector == "JSON" and not any(k.lower() == "mode" for k in options):
            # a malformed line fails the job with Spark's message (OPTIONS (mode = 'PERMISSIVE')
            # keeps it in _corrupt_record instead of an all-NULL row)
            options = {"mode": "FAILFAST", **options}
        if node.connector == "PYTHON":
            options = {**options, "dslc.ref": node.path, "dslc.schema": _ddl(node.schema),
                       "dslc.name": node.name, "dslc.line": str(node.line)}
        calls += [StringCall(".option", v, before=f"{lit(k)},") for k, v in options.items()]
        if node.connector == "PYTHON":
            calls.append(".option('dslc.folder', FOLDER)")
        if node.path and node.connector not in ("PYTHON",):
            calls.append(f".load(resolve(FOLDER, {lit(node.path)}))")
        else:
            calls.append(".load()")
        if node.watermark and self.streaming:
            calls.append(f".withWatermark({lit(sql_name(node.watermark.column))}, "
                         f"{lit(f'{node.watermark.delay_s:g} seconds')})")
        o.chain(f"{self.v(node.name)} = spark.{reader}", calls)
        self._count(node)
        self._view(self.v(node.name), node.name)

    def _count(self, node: plan.Source) -> None:
        """A source's rows counted as they are read, for the run's outcome (a job that writes)."""
        if self.target.writes:
            var = self.v(node.name)
            self.out.line(f"{var} = sources.counted({var}, {lit(node.name)})")

    def visit_State(self, step: physical.State, session: str) -> None:
        node = step.node
        o = self.out
        upstream = self.plan.node(node.source)
        if self.streaming and isinstance(upstream, plan.Source) and upstream.read_once:
            self._refreshed_state(node, upstream)
            return
        how = f"KEY {node.key}" + (f" OP {node.op}" if node.op else "") if node.using is None else f"USING PYTHON {node.using!r}"
        self.comment([node.line], f"BROADCAST {node.name} FROM {node.source} {how}")
        source = self.v(node.source)
        if self.streaming:
            o.line(f"{self.v(node.name)} = streaming.StreamingState(")
            with o.indent():
                o.line(f"spark, {lit(node.name)}, CHECKPOINT, key={lit(node.key)}, op={lit(node.op)}, "
                       f"ref={lit(node.using)}, folder=FOLDER,")
            o.line(")")
            o.line(f"queries.append({self.v(node.name)}.start({source}, TRIGGER))")
        elif node.using is None:
            o.comment(f"an action: collects the rows of {node.source} to the driver and applies them in order")
            o.call(f"{self.v(node.name)} = state.changelog_state",
                   [lit(node.name), source, f"key={lit(node.key)}", f"op={lit(node.op)}"])
        else:
            o.comment(f"an action: collects the rows of {node.source} to the driver, applies each with {node.using}")
            o.call(f"{self.v(node.name)} = state.function_state",
                   [lit(node.name), source, f"ref={lit(node.using)}", "folder=FOLDER"])

    def visit_Sql(self, step: physical.Sql, session: str) -> None:
        node = step.node
        o = self.out
        if node.origin is not None and isinstance(node.tree, exp.Select) and node.tree.args.get("where"):
            # a filter an optimiser rule moved: said as what it is, on the DataFrame it filters
            o.comment(f"{node.origin} (fewer rows reach the calls)")
            condition = node.tree.args["where"].this.sql(dialect="spark")
            o.chain(f"{self.v(node.name)} = {self.v(node.reads[0])}", [StringCall(".where", condition)])
            self._view(self.v(node.name), node.name)
            return
        self.comment([node.line], f"STREAM {node.name} = SELECT ...")
        o.line(f"{self.v(node.name)} = {session}.sql(")
        with o.indent():
            o.lines(wrapped(node.sql, o.room()))
        o.line(")")
        self._view(self.v(node.name), node.name)

    def _pinned_states(self) -> bool:
        """True when a streaming job reads broadcast snapshots pinned per micro-batch."""
        return any(isinstance(s, physical.MatchJoin) or any(getattr(op, "states", ()) for op in s.operators)
                   for s in self.phys.steps if isinstance(s, (physical.MatchJoin, physical.Chain)))

    def _states_ref(self, names: list[str]) -> str:
        """BATCH: the snapshots built on the driver; STREAMING: the ones pinned for each micro-batch."""
        if self.streaming:
            return f"pinned.PinnedStates(CHECKPOINT, {lit(tuple(names))})"
        return "{" + ", ".join(f"{lit(s)}: {self.v(s)}" for s in names) + "}"

    def visit_Chain(self, step: physical.Chain, session: str) -> None:
        o = self.out
        names = " -> ".join(op.name for op in step.operators)
        self.comment([op.line for op in step.operators],
                     f"chain#{step.index} [{names}], one mapInArrow pass ({step.ends_because})")
        out_var = self.v(step.name)
        limit = min((self.row_limits[op.name.lower()] for op in step.operators
                     if op.name.lower() in self.row_limits), default=None)
        o.line(f"{out_var} = chains.{'estimate_chain' if self.target.estimate else 'run_chain'}(")
        with o.indent():
            o.line(f"{self.v(step.input)}.limit({limit}),  # only the rows to show reach the calls"
                   if limit is not None else f"{self.v(step.input)},")
            o.line(f"name={lit(f'chain#{step.index}')},")
            o.line("operators=(")
            with o.indent():
                for op in step.operators:
                    self._operator(op)
                    if op.name in step.expects:     # judged right after the operator, in the same pass
                        o.value(configs.expect(self.plan.expectation(op.name)), tail=",")
            o.line("),")
            if step.input_columns is not None:
                o.value(step.input_columns, "columns=", ",")
            watermark = self.watermarks.get(step.input.lower())
            if watermark is not None:
                o.value(watermark, "watermark=", ",")
            states = sorted({s for op in step.operators if isinstance(op, plan.Process) for s in op.states})
            if states:
                o.line(f"states={self._states_ref(states)},")
            o.line("metrics=metrics,")
            if any(isinstance(op, plan.Enrich) and _enrich_secrets(op) for op in step.operators):
                o.line("secrets=secrets,")
            self._estimate_keywords()
        o.line(")")
        dead = {op.name: op.dead_letter for op in step.operators if isinstance(op, plan.Enrich) and op.dead_letter}
        kept = self.phys.kept_reason(step.name)
        if self.streaming:
            self._stage(step, out_var, dead)
            self._view(out_var, step.name)
            return
        if kept:
            if self.target.writes:
                o.comment(f"computed once and kept in Spark's checkpoint folder: {kept}")
                o.line(f"{out_var} = chains.keep({out_var})")
            else:
                o.comment(f"computed once and kept in the executors' memory, no checkpoint folder: {kept}")
                o.line(f"{out_var} = captured.keep({out_var})")
        quarantined = self._fused_quarantine(step)
        if quarantined and not self.target.writes:
            o.line(f"captured.hold_quarantine_letters({out_var}, {lit(tuple(sorted(quarantined)))})  # not written")
        elif quarantined:
            o.comment("an action: writes the rows the chain's EXPECTs quarantined")
            self._with_folders(f"expectations.write_letters({out_var}, ", sorted(quarantined))
        if dead and not self.target.writes:
            o.line(f"{out_var} = captured.hold_dead_letters({out_var}, {lit(tuple(sorted(dead)))})  # not written")
        elif quarantined and not dead:
            o.line(f"{out_var} = chains.without_dead_letters({out_var})")
        elif dead:
            paths = "{" + ", ".join(f"{lit(k)}: resolve(FOLDER, {lit(v)})" for k, v in sorted(dead.items())) + "}"
            o.comment("an action: writes the dead letters now, keeps the other rows for what follows")
            o.call(f"{out_var} = chains.split_dead_letters", [out_var, paths])
        self._view(out_var, step.name)

    def _estimate_keywords(self) -> None:
        """The estimate's job: where its chain hands the rows reaching each ENRICH."""
        if self.target.estimate:
            self.out.line("chain_inputs=captured.chain_inputs,  # recorded for the estimate, nothing is called")

    def _stage(self, step: physical.Chain, out_var: str, dead: dict[str, str]) -> None:
        """STREAMING: a chain computed more than once is written by its own query to an
        exactly-once stage folder under the CHECKPOINT and read back as a stream; its dead
        letters go to their folders through one more query per folder."""
        o = self.out
        self._write_stage(step.name, out_var)
        folders: dict[str, list[str]] = {}
        for operator, path in sorted(dead.items()):
            folders.setdefault(path, []).append(operator)
        for number, (path, operators) in enumerate(sorted(folders.items()), start=1):
            name = f"dead_letters{step.index}" + (f"_{number}" if len(folders) > 1 else "")
            o.comment(f"query {name}: the dead letters of {', '.join(operators)}")
            o.call("queries.append(streaming.write_dead_letters",
                   [out_var, lit(tuple(operators)), f"resolve(FOLDER, {lit(path)})", lit(name), "CHECKPOINT",
                    "TRIGGER"], tail=")")
        quarantined = self._fused_quarantine(step)
        for number, (path, owner) in enumerate(sorted(quarantined.items()), start=1):
            name = f"quarantine{step.index}" + (f"_{number}" if len(quarantined) > 1 else "")
            o.comment(f"query {name}: the rows EXPECT ON {owner} quarantines to {path}")
            o.call("queries.append(streaming.write_quarantine",
                   [f"expectations.quarantine_letters({out_var}, {lit(path)})", f"resolve(FOLDER, {lit(path)})",
                    lit(name), "CHECKPOINT", "TRIGGER"], tail=")")
        if dead or quarantined:
            o.line(f"{out_var} = chains.without_dead_letters({out_var})")

    def _write_stage(self, name: str, var: str) -> None:
        """STREAMING: relation `name`, when kept, computed once by its own query into a stage
        folder under the CHECKPOINT, then read back as a stream by its readers. With a WATERMARK,
        the latest event time of every row of the query's root (its SOURCE, or the stage it
        reads) rides along as TICK rows, so the readers' watermark comes from the source, before
        any filter, as BATCH's end of input does."""
        stage, kept = self.phys.stage(name), self.phys.kept_reason(name)
        if not stage:
            return
        o = self.out
        o.comment(f"query {stage}: computed once into CHECKPOINT/stages/{stage}, read back as a stream ({kept})")
        watermark = self.watermarks.get(name.lower())
        if watermark is not None:
            o.comment("with the latest event time the source read, before any filter (TICK rows)")
            o.line(f"{var} = streaming.with_ticks({var}, {self._clock(name)}, {lit(watermark.column)})")
        o.line(f"queries.append(streaming.write_stage({var}, {lit(stage)}, CHECKPOINT, TRIGGER))")
        if watermark is None:
            o.line(f"{var} = streaming.read_stage(spark, {lit(stage)}, CHECKPOINT, {var}.schema)")
            return
        clock = self.v(f"{name}_clock")
        o.line(f"{clock} = streaming.read_stage(")
        with o.indent():
            o.line(f"spark, {lit(stage)}, CHECKPOINT, {var}.schema,")
            o.line(f"watermark=({lit(sql_name(watermark.column))}, {lit(f'{watermark.delay_s:g} seconds')}),")
        o.line(")")
        o.line(f"{var} = streaming.without_ticks({clock}, {lit(watermark.column)})")
        self.clocks[name.lower()] = clock

    def _clock(self, name: str) -> str:
        """The watermarked root of relation `name` in its query: the SOURCE its WATERMARK comes
        from, or the stage read (with its TICK rows) it follows."""
        key = name.lower()
        if key in self.clocks:
            return self.clocks[key]
        node = self.plan.node(name)
        if isinstance(node, plan.Source):
            return self.v(node.name)
        mark = self.watermarks.get(key)
        parent = next(i for i in node.inputs if not _is_state(self.plan, i) and self.watermarks.get(i.lower()) == mark)
        return self._clock(parent)

    def _operator(self, op: plan.Enrich | plan.Process) -> None:
        """The operator's runtime configuration, built (and so validated) now, written back."""
        config = configs.enrich(op) if isinstance(op, plan.Enrich) else configs.process(op, self.plan.node(op.input))
        self.out.value(config, tail=",")

    def visit_MatchJoin(self, step: physical.MatchJoin, session: str) -> None:
        node = step.node
        state_node = self.plan.node(node.state)
        o = self.out
        self.comment([node.line], f"STREAM {node.name} = MATCH {node.input} AGAINST {node.state} AS {node.alias}")
        o.line(f"{self.v(node.name)} = state.{'match_stream' if self.streaming else 'match'}(")
        with o.indent():
            if self.streaming:    # a snapshot pinned per micro-batch, resolved by the tasks
                o.line(f"{self.v(node.input)}, input_name={lit(node.input)},")
                o.line(f"pinned={self._states_ref([node.state])}, state_name={lit(node.state)}, alias={lit(node.alias)},")
            else:
                o.line(f"{session}, {self.v(node.input)}, input_name={lit(node.input)},")
                o.line(f"state={self.v(node.state)}, state_name={lit(node.state)}, alias={lit(node.alias)},")
            o.keyword("predicate", node.predicate)
            o.keyword("state_schema", _ddl(state_node.schema))
            o.value(node.state_columns, "columns=", ",")   # one pair a line when long
            keys = equality_keys(node, self.plan.node(node.input).schema, state_node.schema) if self.streaming else ()
            if keys:              # the pinned snapshot indexed by these (input, state) columns
                o.line(f"keys={lit(keys)},")
        o.line(")")
        if self.streaming:
            self._write_stage(node.name, self.v(node.name))
        self._view(self.v(node.name), node.name)

    # ---- sinks
    def _sink_kwargs(self, sink: plan.Sink) -> list[str]:
        path = f"resolve(FOLDER, {lit(sink.path)})" if sink.path and sink.connector != "PYTHON" else lit(sink.path)
        return [f"connector={lit(sink.connector)}", f"path={path}", f"mode={lit(sink.mode)}",
                f"partition_by={lit(sink.partition_by)}", f"options={lit_dict(sink.options)}", "folder=FOLDER"]

    def _database_sink(self, index: int, sink: plan.Sink) -> list[str]:
        table = sink.database
        assert table is not None
        return [lit(table.url), "secrets", f"database={lit(table.database)}", f"table={lit(table.table)}",
                f"mode={lit(sink.mode)}", f"key={lit(table.key)}", f"sink={lit(f'SINK {sink.input} (line {sink.line})')}"]

    def _batch_write(self, sink: plan.Sink) -> None:
        """A file or Kafka sink as Spark's own writer; CONSOLE and PYTHON sinks through the
        runtime, which carries their logic (show's options, a function per partition). Inside
        `sinks.writing`: its rows counted, a failed write named by its SINK."""
        o = self.out
        path = lit(sink.path) if sink.path and sink.connector != "PYTHON" else "None"
        o.line(f"with sinks.writing({self.v(sink.input)}, {lit(sink.input)}, {sink.line}, {path}) as rows:")
        with o.indent():
            if sink.database is not None:
                o.call("jdbc.write_batch", ["rows", *self._database_sink(0, sink)])
                return
            if sink.connector == "TABLE":
                o.call("tables.write", ["rows", lit(sink.path), "FOLDER", f"mode={lit(sink.mode)}"])
                return
            if sink.connector not in _WRITE_FORMATS:
                o.call("sinks.write_batch", ["rows", *self._sink_kwargs(sink)])
                return
            calls: list[str | StringCall] = [f".format({lit(_WRITE_FORMATS[sink.connector])})",
                                             f".mode({lit(sink.mode.lower())})"]
            calls += [StringCall(".option", v, before=f"{lit(k)},") for k, v in sink.options]
            if sink.partition_by:
                calls.append(f".partitionBy({', '.join(lit(c) for c in sink.partition_by)})")
            calls.append(f".save(resolve(FOLDER, {lit(sink.path)}))" if sink.path else ".save()")
            o.chain("rows.write", calls)

    def visit_sink(self, index: int, sink: plan.Sink) -> None:
        o = self.out
        self.comment([sink.line], f"SINK {sink.input} TO {sink.connector}" + (f" {sink.path!r}" if sink.path else ""))
        if not self.target.writes:
            o.line(f"captured.output({lit(sink.input)}, {self.v(sink.input)})  # handed back, not written")
            return
        if not self.streaming:
            self._batch_write(sink)
            return
        if sink.database is not None:
            o.call("queries.append(jdbc.write_stream", [self.v(sink.input), lit(f"sink{index}"), "CHECKPOINT", "TRIGGER",
                                                         *self._database_sink(index, sink)], tail=")")
            return
        if sink.connector == "TABLE":
            o.call("queries.append(tables.write_stream", [self.v(sink.input), lit(f"sink{index}"), "CHECKPOINT",
                                                           "TRIGGER", f"table={lit(sink.path)}", "folder=FOLDER"], tail=")")
            return
        o.call("queries.append(streaming.write_stream",
               [self.v(sink.input), lit(f"sink{index}"), "CHECKPOINT", "TRIGGER", *self._sink_kwargs(sink),
                f"stream={lit(sink.input)}", f"line={sink.line}"], tail=")")


def lower(phys: physical.Physical, target: Target) -> str:
    """The job's Python source."""
    return _Lowering(phys, target).lower()
