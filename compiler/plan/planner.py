"""AST → logical plan: resolve names, order the statements, propagate schemas, check everything.

Every problem is collected, and every check runs whatever else is wrong. A node whose schema is
still known despite a problem (an unknown column type, a bad option) is kept so that the
statements downstream are checked too; a node whose schema is not known gets an unknown schema,
so that one mistake is reported once, not again at every statement downstream.
"""
from __future__ import annotations

import dataclasses
import importlib.machinery
import re
import sys
from collections.abc import Mapping
from pathlib import Path

from dslc.compiler.diagnostics import CompileError, Diagnostic, did_you_mean, error
from dslc.compiler.frontend import ast
from dslc.compiler.plan import (
    answer_store,
    catalog_tables,
    database_rules,
    database_streaming,
    databases,
    expect_model,
    expectations,
    format_options,
    options,
    streaming,
    tiers,
    values,
)
from dslc.compiler.plan import logical as plan
from dslc.compiler.plan.connectors import PIPELINE_MODES, SINK_MODES, SINKS, SOURCES
from dslc.compiler.plan.enrich_options import read_options
from dslc.compiler.plan.model_calls import check_token_rate, model_call
from dslc.compiler.plan.nearest_states import nearest_rights, state_problems
from dslc.compiler.plan.provenance import provenance_column
from dslc.compiler.plan.service_calls import ServiceChecks
from dslc.compiler.source import SourceFile, Span
from dslc.compiler.sparksql.sql import (
    analyze_condition,
    analyze_query,
    duplicate_columns,
    mentions,
    parse_sql,
    relations,
)
from dslc.compiler.sparksql.sqltypes import UNKNOWN, canonical, is_timestamp
from dslc.runtime.calls.url import placeholders

_PYTHON_REF = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*:[A-Za-z_][A-Za-z0-9_]*$")
_COMMON_TYPES = ("STRING", "INT", "BIGINT", "DOUBLE", "FLOAT", "BOOLEAN", "TIMESTAMP", "DATE",
                 "DECIMAL", "BINARY", "SMALLINT", "TINYINT", "ARRAY", "MAP", "STRUCT")

# Other systems' type names that Spark does not know, and the Spark type meant.
_FOREIGN_TYPES = {"DATETIME": "TIMESTAMP", "TEXT": "STRING", "UUID": "STRING", "JSON": "STRING",
                  "NVARCHAR": "STRING", "INT64": "BIGINT", "FLOAT64": "DOUBLE", "BOOL": "BOOLEAN"}

Definition = ast.Source | ast.Broadcast | ast.Select | ast.Enrich | ast.Match | ast.Process


def to_plan(program: ast.Program, source: SourceFile, *, require_sink: bool = True,
            mode: str | None = None) -> plan.Plan:
    """Check a parsed program and build its logical plan; raise CompileError with every problem.
    `mode` overrides the PIPELINE's MODE (as `dslc compile --mode` does)."""
    planner = _Planner(source, mode)
    result = planner.build(program, require_sink=require_sink)
    if planner.problems:
        raise CompileError(source, planner.problems)
    return result


def to_partial_plan(program: ast.Program, source: SourceFile, *, require_sink: bool = True,
                    mode: str | None = None, sql: SqlSteps | None = None) -> tuple[plan.Plan, list[Diagnostic]]:
    """The plan of every statement that checked, and every problem found: what `dslc check
    --spark` hands Spark's analyzer when the fast check already found errors elsewhere. `sql`:
    the sqlglot steps (the editor passes ones that remember results, compiler/lsp/incremental.py)."""
    planner = _Planner(source, mode, sql)
    result = planner.build(program, require_sink=require_sink)
    return result, planner.problems


class SqlSteps:
    """The sqlglot steps of a STREAM's query, the costly part of a check: parse its text, list
    the tables a tree reads, analyze the tree against the schemas it reads. Each is a function of
    its arguments only."""

    parse = staticmethod(parse_sql)
    tables = staticmethod(relations)
    analyze = staticmethod(analyze_query)


class _Planner:
    def __init__(self, source: SourceFile, mode: str | None = None, sql: SqlSteps | None = None):
        self.source = source
        self.sql = sql or SqlSteps()
        self.mode_override = mode
        self._trees: dict[int, tuple[object | None, list[Diagnostic]]] = {}
        self.problems: list[Diagnostic] = []
        self.defs: dict[str, Definition] = {}
        self.nodes: dict[str, plan.PlanNode | None] = {}
        self.settings = plan.Settings()
        self._repeated: dict[str, dict[str, Span]] = {}   # query → its repeated output names
        self._reported: set[str] = set()                  # queries whose repeated names were reported
        self.databases: dict[str, databases.Database] = {}  # DATABASE statements by lower-case name

    def line(self, span: Span) -> int:
        return self.source.line_col(span.start)[0]

    def add(self, diagnostic: Diagnostic) -> None:
        self.problems.append(diagnostic)

    # ---- driver
    def build(self, program: ast.Program, *, require_sink: bool) -> plan.Plan:
        sinks_ast: list[ast.Sink] = []
        expects_ast: list[ast.Expect] = []
        conf: list[tuple[str, str]] = []
        pipeline_seen = False
        for stmt in program.statements:
            if isinstance(stmt, ast.Pipeline):
                if pipeline_seen:
                    self.add(error("E0210", stmt.span, hint="keep one PIPELINE statement"))
                pipeline_seen = True
                self._pipeline(stmt)
            elif isinstance(stmt, ast.SetConf):
                conf.append((stmt.key.value, values.literal_text(stmt.value)))
            elif isinstance(stmt, ast.Sink):
                sinks_ast.append(stmt)
            elif isinstance(stmt, ast.Database):
                databases.define(stmt, self.source, self.databases, self.problems)
            elif isinstance(stmt, ast.Expect):
                expects_ast.append(stmt)
            else:
                self._define(stmt)
        self.settings = plan.Settings(self.settings.name, self.mode_override or self.settings.mode,
                                      self.settings.checkpoint, self.settings.trigger, tuple(conf),
                                      answers=self.settings.answers)
        for name in self._order():
            self.nodes[name] = self._node(self.defs[name])
        built, checked = self._sinks(sinks_ast)
        sinks = tuple(built)
        if require_sink and not sinks_ast:
            where = program.statements[-1].span.sub(0, 1) if program.statements else Span(0, 0)
            self.add(error("E0208", where, hint="add e.g. SINK <stream> TO CONSOLE;"))
        expects = self._expects(expects_ast, sinks)
        ordered = tuple(n for n in self.nodes.values() if n is not None)
        result = plan.Plan(self.source.path, self.settings, ordered, sinks, str(self.source.folder),
                           databases=tuple((d.name, d.url) for d in self.databases.values()),
                           expects=expects)
        sql_of = {name: stmt.sql for name, stmt in self.defs.items() if isinstance(stmt, ast.Select)}
        self.problems.extend(streaming.check(result, checked, sql_of))
        self.problems.extend(state_problems(result, sql_of))
        self.problems.extend(database_streaming.static_only(result, [(c.sink, c.span) for c in checked]))
        return dataclasses.replace(result, remarks=tuple(database_streaming.notes(result)))

    def _expects(self, statements: list[ast.Expect], sinks: tuple[plan.Sink, ...]) -> tuple:
        """The EXPECTs that check; a MODEL's answers are asked to keep what they can say
        (expect_model.py: the ENRICH's call carries the limits)."""
        taken = {s.path.rstrip("/"): f"SINK {s.input}" for s in sinks if s.path}
        taken.update({n.dead_letter.rstrip("/"): f"the dead letters of '{n.name}'" for n in self.nodes.values()
                      if isinstance(n, plan.Enrich) and n.dead_letter})
        checked = expectations.check_all(self, statements, taken)
        for expect in checked:
            node = self.nodes.get(expect.on.lower())
            limits = expect_model.limits(expect_model.pushable(expect, node)) if isinstance(node, plan.Enrich) else ()
            if limits:
                self.nodes[expect.on.lower()] = dataclasses.replace(
                    node, call=dataclasses.replace(node.call, limits=limits))
        return checked

    def _sinks(self, statements: list[ast.Sink]) -> tuple[list[plan.Sink], list[streaming.Checked]]:
        """The SINKs that check, and every SINK that reads a known stream through a known connector
        for the STREAMING checks, which then report their problems too, whatever else is wrong with
        the SINK (a MODE OVERWRITE does not hide a missing CHECKPOINT)."""
        built, checked = [], []
        for stmt in statements:
            before = len(self.problems)
            sink = self._sink(stmt)
            if sink is None:
                continue
            mode = next((o.span for o in stmt.options if o.key == "mode"), stmt.span.sub(0, 4))
            checked.append(streaming.Checked(sink, stmt.span, mode, stmt.input.value.lower() in self.nodes
                                             and self.nodes[stmt.input.value.lower()] is not None))
            overwrite = sink.mode == "OVERWRITE" and self.settings.mode == "STREAMING"     # streaming.check's E0304
            if len(self.problems) == before and not overwrite:
                built.append(sink)
        return built, checked

    def _define(self, stmt: Definition) -> None:
        key = stmt.name.value.lower()
        if key in self.defs:
            first = self.line(self.defs[key].name.span)
            self.add(error("E0202", stmt.name.span, name=stmt.name.value,
                           hint=f"first defined on line {first}; pick another name"))
            return
        self.defs[key] = stmt

    # ---- names and order
    def _inputs(self, stmt: Definition) -> list[ast.Name]:
        if isinstance(stmt, ast.Source):
            return []
        if isinstance(stmt, ast.Broadcast):
            return [stmt.source] if stmt.database is None else []
        if isinstance(stmt, ast.Select):
            return self._sql_tables(stmt.sql)
        if isinstance(stmt, ast.Match):
            return [stmt.input, stmt.state]
        if isinstance(stmt, ast.Process):
            return [stmt.input, *stmt.states]
        return [stmt.input]

    def _parsed(self, sql: ast.Sql) -> tuple[object | None, list[Diagnostic]]:
        """The sqlglot tree of a query and its syntax errors, parsed once per statement."""
        if sql.span.start not in self._trees:
            problems: list[Diagnostic] = []
            self._trees[sql.span.start] = (self.sql.parse(sql, problems), problems)
        return self._trees[sql.span.start]

    def _sql_tables(self, sql: ast.Sql) -> list[ast.Name]:
        tree, _ = self._parsed(sql)
        if tree is None:
            return []
        return [ast.Name(t.name, sql.span) for t in self.sql.tables(tree) if t.name.lower() in self.defs]

    def _order(self) -> list[str]:
        """Definitions in dependency order (file order where free); cycles reported."""
        order: list[str] = []
        state: dict[str, str] = {}

        def visit(name: str, path: list[str]) -> None:
            if state.get(name) == "done":
                return
            if state.get(name) == "active":
                cycle = path[path.index(name):] + [name]
                stmt = self.defs[name]
                self.add(error("E0203", stmt.name.span, name=stmt.name.value,
                               path=" -> ".join(self.defs[n].name.value for n in cycle),
                               hint="a stream cannot read itself, directly or through others"))
                return
            state[name] = "active"
            for dep in self._inputs(self.defs[name]):
                if dep.value.lower() in self.defs:
                    visit(dep.value.lower(), path + [name])
            state[name] = "done"
            order.append(name)

        for name in self.defs:
            visit(name, [])
        return order

    def _lookup(self, ref: ast.Name, kind: str, want: tuple[type, ...], statement: str) -> plan.PlanNode | None | bool:
        """The node `ref` names; False when the name is wrong (reported), None when it failed."""
        key = ref.value.lower()
        if key not in self.defs:
            pool = [d.name.value for d in self.defs.values() if isinstance(self._kind_of(d), str)]
            self.add(error("E0201", ref.span, kind=kind, name=ref.value, hint=did_you_mean(ref.value, pool)))
            return False
        stmt = self.defs[key]
        if not isinstance(stmt, want):
            actual = "broadcast state" if isinstance(stmt, ast.Broadcast) else "stream"
            expected = "broadcast state" if want == (ast.Broadcast,) else "source or stream"
            self.add(error("E0209", ref.span, name=ref.value, actual=actual, statement=statement,
                           expected=expected))
            return False
        return self.nodes.get(key)

    @staticmethod
    def _kind_of(stmt: Definition) -> str:
        return "state" if isinstance(stmt, ast.Broadcast) else "stream"

    # ---- PIPELINE
    def _pipeline(self, stmt: ast.Pipeline) -> None:
        mode, checkpoint, trigger, answers = "BATCH", None, None, None
        trigger_span = None
        for opt in options.first_of_each(stmt.options, self.problems).values():
            if opt.key == "mode":
                mode = values.choice(opt.args[0], PIPELINE_MODES, "pipeline MODE", self.problems) or mode
            elif opt.key == "checkpoint":
                checkpoint = opt.args[0].value
            elif opt.key == "answers":
                answers = answer_store.location(opt.args[0], self.problems)
            elif opt.key == "trigger":
                trigger_span = opt.span
                if not opt.args:
                    trigger = "available-now"
                else:
                    seconds = values.duration(opt.args[0], self.problems)
                    trigger = f"every={seconds:g}s" if seconds else None
        if trigger_span and mode == "BATCH":
            self.add(error("E0304", trigger_span, first="TRIGGER", second="MODE BATCH",
                           hint="TRIGGER applies to MODE STREAMING"))
        self.settings = plan.Settings(stmt.name.value, mode, checkpoint, trigger, answers=answers)

    # ---- one node per definition
    def _node(self, stmt: Definition) -> plan.PlanNode | None:
        """The node of a definition; None when its schema is not known (each builder decides: a
        problem that leaves the schema intact keeps the node, so later statements are checked)."""
        builder = {ast.Source: self._source, ast.Broadcast: self._broadcast, ast.Select: self._select,
                   ast.Enrich: self._enrich, ast.Match: self._match, ast.Process: self._process}[type(stmt)]
        return builder(stmt)

    def _columns(self, defs: tuple[ast.ColumnDef, ...], where: str) -> plan.Schema:
        fields: list[plan.Column] = []
        seen: set[str] = set()
        for col in defs:
            type_text = canonical(col.type.text)
            if type_text is None:
                base = col.type.text.split("(")[0].split("<")[0]
                hint = f"did you mean '{_FOREIGN_TYPES[base]}'?" if base in _FOREIGN_TYPES \
                    else did_you_mean(base, _COMMON_TYPES)
                self.add(error("E0306", col.type.span, text=col.type.text, hint=hint))
                type_text = UNKNOWN
            if col.name.value.lower() in seen:
                self.add(error("E0211", col.name.span, column=col.name.value, where=where))
            seen.add(col.name.value.lower())
            fields.append(plan.Column(col.name.value, type_text))
        return tuple(fields)

    def _python_ref(self, ref: ast.Str) -> bool:
        if not _PYTHON_REF.match(ref.value):
            self.add(error("E0309", ref.span, text=ref.value, what="Python reference",
                           hint="write 'module:name', e.g. 'fraud_rules:score'"))
            return False
        module = ref.value.split(":")[0]
        beside = self.source.folder / (module.replace(".", "/") + ".py")
        if not beside.is_file() and not _importable(module):
            self.add(error("E0201", ref.span, kind="Python module", name=module,
                           hint=f"put {module.replace('.', '/')}.py beside {Path(self.source.path).name}"))
            return False
        return True

    def _source(self, stmt: ast.Source) -> plan.Source | None:
        kind_name = stmt.connector.kind.value.upper()
        kind = SOURCES.get(kind_name)
        if kind is None:
            self.add(error("E0305", stmt.connector.kind.span, kind="source connector",
                           name=stmt.connector.kind.value, hint=did_you_mean(kind_name, SOURCES)))
            return None
        self._connector_arg(stmt.connector, kind.takes_arg, "SOURCE")
        if kind_name == "PYTHON" and stmt.connector.arg is not None:
            self._python_ref(stmt.connector.arg)
        opts = options.first_of_each(stmt.options, self.problems)
        found = self._source_schema(stmt, kind, opts)
        if found is None:
            return None     # a repeated column: no Source node can hold it
        schema, schema_known = found
        pairs = self._options(stmt.connector, kind_name, kind.required_options, "SOURCE", opts.get("options"))
        watermark = None
        if "watermark" in opts:
            column, delay = opts["watermark"].args
            field = next((f for f in schema if f.name.lower() == column.value.lower()), None)
            seconds = values.duration(delay, self.problems)
            if field is None:
                self.add(error("E0204", column.span, column=column.value, where=f"'{stmt.name.value}'",
                               hint=_column_hint(column.value, [f.name for f in schema], stmt.name.value)))
            elif field.type == UNKNOWN:
                pass        # its unknown type is reported already
            elif not is_timestamp(field.type):
                self.add(error("E0307", column.span, column=column.value, type=field.type,
                               hint="CAST it in a STREAM query, or declare it TIMESTAMP"))
            elif seconds is not None:
                watermark = plan.Watermark(field.name, seconds)
        table = databases.source_table(self, stmt, schema)
        if not schema_known or table is False:
            return None
        schema = _with_corrupt_record(kind_name, schema, pairs)
        return plan.Source(name=stmt.name.value, schema=schema, line=self.line(stmt.span), span=stmt.span,
                           connector=kind_name, path=stmt.connector.arg.value if stmt.connector.arg else None,
                           options=pairs, watermark=watermark, database=table, read_once=table is not None)

    def _source_schema(self, stmt: ast.Source, kind, opts: dict) -> tuple[plan.Schema, bool] | None:
        """A source's columns and whether they are known: its SCHEMA clause, its connector's
        fixed columns, or a database's own; None when the SCHEMA repeats a column."""
        kind_name = stmt.connector.kind.value.upper()
        if kind_name == "TABLE" and not catalog_tables.check_name(self, stmt.connector):
            return (), False
        if kind_name == "TABLE" and "schema" not in opts:     # the local catalog's own columns
            found = catalog_tables.source_schema(self, stmt)
            return found or (), found is not None
        if "schema" in opts:
            if kind.fixed_schema:
                self.add(error("E0304", opts["schema"].span, first="SCHEMA",
                               second=f"{kind_name} source (its columns are fixed: "
                                      + ", ".join(f.name for f in kind.fixed_schema) + ")"))
                return kind.fixed_schema, True
            schema = self._columns(opts["schema"].args, f"SCHEMA of '{stmt.name.value}'")
            return (schema, True) if len({f.name.lower() for f in schema}) == len(schema) else None
        if stmt.connector.database is not None:      # read from the database itself
            live = databases.live_schema(self, stmt.connector, f"SOURCE {stmt.name.value}")
            return live or (), live is not None
        if kind.needs_schema:
            self.add(error("E0310", stmt.connector.span, connector=kind_name, role="SOURCE",
                           what="a SCHEMA (...) clause", hint="add SCHEMA (col TYPE, ...)"))
            return kind.fixed_schema, False
        return kind.fixed_schema, True

    def _options(self, connector: ast.Connector, kind_name: str, required: tuple[str, ...], role: str,
                 opt: ast.Opt | None) -> tuple[tuple[str, str], ...]:
        """A SOURCE's or SINK's OPTIONS as (key, text) pairs: names Spark's reader or writer of the
        format takes (format_options.py), the connector's required ones present."""
        pairs: tuple[tuple[str, str], ...] = ()
        if opt is not None:
            pairs = options.key_values(opt, self.problems)
            format_options.check(kind_name, role, opt, self.settings.mode, self.problems)
        for name in required:
            if name not in dict(pairs):
                self.add(error("E0310", connector.span, connector=kind_name, role=role, what=f"OPTIONS ({name} = ...)"))
        return pairs

    def _connector_arg(self, connector: ast.Connector, takes_arg: bool, role: str) -> None:
        kind = connector.kind.value.upper()
        if takes_arg and connector.arg is None:
            what = "'module:name'" if kind == "PYTHON" else "a path"
            self.add(error("E0310", connector.span, connector=kind, role=role, what=what))
        if not takes_arg and connector.arg is not None:
            self.add(error("E0304", connector.arg.span, first=f"'{connector.arg.value}'",
                           second=f"{kind} {role} (it takes no path)", hint="use OPTIONS (...)"))

    def _broadcast(self, stmt: ast.Broadcast) -> plan.BroadcastState | None:
        if stmt.database is not None:
            return database_rules.broadcast(self, stmt)
        src = self._lookup(stmt.source, "source or stream", (ast.Source, ast.Select, ast.Enrich,
                                                             ast.Process, ast.Match), "BROADCAST")
        if src is False:
            return None
        schema: plan.Schema = ()
        if stmt.using is not None:
            self._python_ref(stmt.using)
        elif src is not None:
            names = {f.name.lower(): f for f in src.schema}
            for column in (stmt.key, stmt.op):
                if column is not None and column.value.lower() not in names:
                    self.add(error("E0204", column.span, column=column.value, where=f"'{src.name}'",
                                   hint=_column_hint(column.value, [f.name for f in src.schema], src.name)))
            op = stmt.op.value.lower() if stmt.op else None
            schema = tuple(f for f in src.schema if f.name.lower() != op)
        refresh = database_rules.refresh_of_source(self, stmt, src)
        return plan.BroadcastState(name=stmt.name.value, source=src.name if src else stmt.source.value,
                                   key=stmt.key.value if stmt.key else None, op=stmt.op.value if stmt.op else None,
                                   using=stmt.using.value if stmt.using else None, schema=schema,
                                   line=self.line(stmt.span), span=stmt.span, refresh_s=refresh or None)

    def _schemas(self, states: frozenset[str] = frozenset()) -> Mapping[str, plan.Schema | None]:
        """Schemas of the relations a query may read, looked up on demand (None: not built yet,
        only possible inside a cycle); a view, so each SELECT costs the same in a long pipeline."""
        return _SchemaView(self.defs, self.nodes, states)

    def _ordinals(self) -> dict[str, bool]:
        """`group_ordinals`/`order_ordinals` False when the pipeline SETs Spark's option false."""
        off = {k.lower() for k, v in self.settings.conf if str(v).strip().lower() == "false"}
        return {name: False for name, key in (("group_ordinals", "spark.sql.groupbyordinal"),
                                             ("order_ordinals", "spark.sql.orderbyordinal")) if key in off}

    def _select(self, stmt: ast.Select) -> plan.Query | None:
        tree, syntax_errors = self._parsed(stmt.sql)
        indexed = nearest_rights(tree) if tree is not None else frozenset()
        schemas = self._schemas(indexed)
        for ref in self._sql_tables(stmt.sql):
            key = ref.value.lower()
            if isinstance(self.defs.get(key), ast.Broadcast) and key not in indexed:
                self.add(error("E0209", stmt.sql.span.sub(0, 6), name=ref.value, actual="broadcast state",
                               statement="a query", expected="source or stream",
                               hint=f"use MATCH ... AGAINST {ref.value} to read a broadcast state, or JOIN "
                                    f"{ref.value} ... NEAREST k BY ... to find its nearest entries"))
                return None
        if tree is None:
            self.problems.extend(syntax_errors)
            return None
        extended = any(k in ('spark.sql.extensions', 'spark.jars.packages', 'spark.jars') for k, _ in self.settings.conf)
        info = self.sql.analyze(stmt.sql, tree, schemas, self.problems, functions=not extended,
                                **self._ordinals())
        if info is None or info.schema is None:
            return None
        for read in info.reads:
            if mentions(tree, set(self._repeated.get(read, ()))):
                self._unique_names(read, f"STREAM {stmt.name.value} (line {self.line(stmt.span)}) reads it")
        self._repeated[stmt.name.value.lower()] = duplicate_columns(info)
        return plan.Query(name=stmt.name.value, schema=info.schema, line=self.line(stmt.span), span=stmt.span,
                          sql=stmt.sql.text, tree=tree, reads=tuple(self.defs[r].name.value for r in info.reads),
                          aggregates=info.aggregates)

    def _stream_input(self, ref: ast.Name, statement: str) -> plan.PlanNode | None:
        node = self._lookup(ref, "source or stream", (ast.Source, ast.Select, ast.Enrich, ast.Match,
                                                      ast.Process), statement)
        if node not in (False, None) and not self._unique_names(
                ref.value, f"{statement} (line {self.line(ref.span)}) reads its rows by column name"):
            return None
        return node if node not in (False,) else None

    def _unique_names(self, query: str, consumer: str) -> bool:
        """Spark lets a query output one name twice; E0211 (on the producing select item, once)
        when a consumer must tell the columns apart. False when it was reported."""
        repeated = self._repeated.get(query.lower())
        if not repeated:
            return True
        if query.lower() not in self._reported:
            self._reported.add(query.lower())
            for name, span in repeated.items():
                self.add(error("E0211", span, column=name, where=f"the output of '{self.defs[query.lower()].name.value}'",
                               hint=f"{consumer}; give one of them an alias: AS other_name"))
        return False

    def _enrich(self, stmt: ast.Enrich) -> plan.Enrich | None:
        upstream = self._stream_input(stmt.input, "ENRICH")
        returns = self._columns(stmt.returns, f"RETURNS of '{stmt.name.value}'")
        checked = read_options(stmt.options, self.problems)
        check_token_rate(self, stmt, checked)
        tiers.check(self, stmt, checked)
        if isinstance(stmt.call, (ast.ModelCall, ast.EmbeddingCall)):
            call, key_columns = model_call(self, stmt, upstream, returns, checked)
        elif isinstance(stmt.call, ast.SqlCall):
            call, key_columns = databases.sql_call(self, stmt, upstream, returns, checked)
        elif isinstance(stmt.call, ast.HttpCall):
            method = values.choice(stmt.call.method, ("GET", "POST"), "HTTP method", self.problems)
            url = stmt.call.url.value
            if not re.match(r"^https?://", url):
                self.add(error("E0309", stmt.call.url.span, text=url, what="HTTP URL",
                               hint="start it with http:// or https://"))
            holes = placeholders(url)
            body = None
            service = ServiceChecks(self.source, self.problems)
            service.secrets(stmt.call.url)
            headers = service.headers(stmt.call.headers)
            answer = service.jmespath(stmt.call.answer, "ANSWER")
            ca_file, verify = service.call_options(stmt.call.options)
            for clause in stmt.call.repeated:
                self.add(error("E0324", clause.span, clause=options.title(clause.key), hint="keep one of them"))
            if upstream is not None:
                self._check_placeholders(stmt.call.url, holes, upstream)
                if stmt.call.body is not None:
                    body = self._columns_of(stmt.call.body.args, upstream, "BODY")
            if method is None:
                return None
            self._check_http_batch(stmt, method, holes, checked)
            # a BODY with GET was reported just above: the call is built without it
            call: plan.HttpCall | plan.PythonCall | None = plan.HttpCall(
                url, method, body if method == "POST" else None, headers=headers, answer=answer,
                ca_file=ca_file, verify=verify)
            key_columns = tuple(dict.fromkeys(holes + (body or ())))
        else:
            well_formed = self._python_ref(stmt.call.ref) or _PYTHON_REF.match(stmt.call.ref.value)
            call = plan.PythonCall(stmt.call.ref.value) if well_formed else None
            key_columns = (upstream.schema[0].name,) if upstream is not None and upstream.schema else ()
        paths = self._paths(stmt) if not isinstance(stmt.call, ast.SqlCall) else ()
        if (checked.budget is not None and checked.budget.unit == "TOKENS"
                and isinstance(stmt.call, (ast.HttpCall, ast.PythonCall, ast.SqlCall))):
            kind = {ast.HttpCall: "HTTP", ast.PythonCall: "PYTHON"}.get(type(stmt.call), "SQL")  # MODEL, EMBEDDING: counted
            self.add(error("E0304", checked.clauses["budget"].span, first="BUDGET ... TOKENS",
                           second=f"WITH {kind} (tokens are counted from a model's answers)",
                           hint=f"count calls: BUDGET {checked.budget.amount} CALLS"))
        if upstream is None or call is None:
            return None
        existing = {f.name.lower() for f in upstream.schema}
        clash = False
        for col, field in zip(stmt.returns, returns):
            if field.name.lower() in existing:
                clash = True
                self.add(error("E0211", col.name.span, column=field.name, where=f"'{stmt.name.value}'",
                               hint=f"'{upstream.name}' already has it; rename the RETURNS column"))
        added = provenance_column(self, checked.provenance, call, existing | {f.name.lower() for f in returns})
        if clash or added is None or len({f.name.lower() for f in returns}) != len(returns):
            return None     # reported above (or by _columns); an Enrich node cannot hold duplicates
        order_by = self._columns_of(checked.order_by, upstream, "ASYNC ORDERED BY")
        if not key_columns and isinstance(call, plan.HttpCall) and call.method == "POST" and upstream.schema:
            key_columns = (upstream.schema[0].name,)    # as for PYTHON: the whole row is sent
        return plan.Enrich(name=stmt.name.value, schema=upstream.schema + returns + added, line=self.line(stmt.span),
                           span=stmt.span, input=upstream.name, call=call, returns=returns,
                           mode=checked.mode, order_by=order_by, capacity=checked.capacity,
                           adaptive=checked.adaptive,
                           timeout_s=checked.timeout_s,
                           retry=checked.retry, cache=checked.cache, rate=checked.rate,
                           on_miss=checked.on_miss, on_timeout=checked.on_timeout, on_error=checked.on_error,
                           dead_letter=checked.dead_letter, ceiling=checked.ceiling, key_columns=key_columns,
                           batch=checked.batch,
                           paths=paths, outage=checked.outage,
                           store=answer_store.store(checked, self.settings), budget=checked.budget,
                           provenance=added[0].name if added else None,
                           tier=checked.tier, price=checked.price, batch_failure=checked.batch_failure)

    def _paths(self, stmt: ast.Enrich) -> tuple[tuple[str, str], ...]:
        """RETURNS (col TYPE PATH 'jmespath'): read from a service's JSON answer, so HTTP only."""
        found = []
        service = ServiceChecks(self.source, self.problems)
        for col in stmt.returns:
            if col.path is None:
                continue
            if not isinstance(stmt.call, ast.HttpCall):
                self.add(error("E0325", col.path.span, clause="PATH",
                               what="a call that answers JSON (HTTP): a Python function returns its columns by name",
                               hint=f"return the value under the key '{col.name.value}'"))
                continue
            path = service.jmespath(col.path, f"PATH of column '{col.name.value}'")
            if path is not None:
                found.append((col.name.value, path))
        return tuple(found)

    def _check_http_batch(self, stmt: ast.Enrich, method: str, holes: tuple[str, ...], checked) -> None:
        """BATCH sends many rows in one POST to one URL; BODY needs a POST."""
        http = stmt.call
        assert isinstance(http, ast.HttpCall)
        batch = checked.clauses.get("batch")
        if http.body is not None and method != "POST":
            self.add(error("E0304", http.body.span, first="BODY", second=f"HTTP {method} (a GET sends no body)",
                           hint=f"write HTTP POST '{http.url.value}' BODY (...)"))
        if batch is None:
            return
        if method != "POST":
            self.add(error("E0304", batch.span, first="BATCH", second=f"HTTP {method}",
                           hint="a batch travels as one JSON array in a request body: use HTTP POST, "
                                "and send the columns in BODY (...)"))
        elif holes:
            raw = self.source.text[http.url.span.start:http.url.span.end]
            at = raw.find("{" + holes[0])
            span = http.url.span.sub(at, len(holes[0]) + 2) if at >= 0 else http.url.span
            self.add(error("E0304", span, first=f"the URL placeholder {{{holes[0]}}}", second="BATCH (one URL for many rows)",
                           hint=f"drop the placeholder and send {holes[0]} in the body: BODY (..., {holes[0]})"))

    def _columns_of(self, names: tuple[ast.Name, ...], upstream: plan.PlanNode, where: str) -> tuple[str, ...]:
        """Columns of the input named in a clause, as the input spells them; an unknown one is E0204."""
        columns = {f.name.lower(): f.name for f in upstream.schema}
        found: list[str] = []
        for name in names:
            column = columns.get(name.value.lower())
            if column is None:
                self.add(error("E0204", name.span, column=name.value, where=where,
                               hint=did_you_mean(name.value, list(columns.values()))
                               or f"'{upstream.name}' has columns " + ", ".join(columns.values())))
            elif column not in found:
                found.append(column)
        return tuple(found)

    def _check_placeholders(self, url: ast.Str, holes: tuple[str, ...], upstream: plan.PlanNode) -> None:
        columns = [f.name for f in upstream.schema]
        raw = self.source.text[url.span.start:url.span.end]
        for hole in holes:
            if hole.lower() not in {c.lower() for c in columns}:
                at = raw.find("{" + hole)
                span = url.span.sub(at + 1, len(hole)) if at >= 0 else url.span
                self.add(error("E0205", span, column=hole, hint=did_you_mean(hole, columns)
                               or f"'{upstream.name}' has columns " + ", ".join(columns)))

    def _match(self, stmt: ast.Match) -> plan.Match | None:
        upstream = self._stream_input(stmt.input, "MATCH")
        state = self._lookup(stmt.state, "broadcast state", (ast.Broadcast,), "MATCH ... AGAINST")
        if upstream is None or state in (None, False):
            return None
        if state.using is not None:
            self.add(error("E0310", stmt.state.span, connector="MATCH", role="AGAINST",
                           what="a BROADCAST ... KEY state (a USING PYTHON state has no declared columns)",
                           hint="use PROCESS ... WITH BROADCAST to read it from Python"))
            return None
        alias = stmt.alias.value if stmt.alias else state.name
        if not analyze_condition(stmt.predicate, {upstream.name.lower(): upstream.schema,
                                                  alias.lower(): state.schema}, self.problems):
            return None
        renamed = self._state_columns(stmt, upstream, state, alias)
        if renamed is None:
            return None
        schema = upstream.schema + tuple(plan.Column(out, f.type) for (_, out), f in zip(renamed, state.schema))
        return plan.Match(name=stmt.name.value, schema=schema, line=self.line(stmt.span), span=stmt.span,
                          input=upstream.name, state=state.name, alias=alias, predicate=stmt.predicate.text,
                          state_columns=tuple(renamed))

    def _state_columns(self, stmt: ast.Match, upstream: plan.PlanNode, state: plan.BroadcastState,
                       alias: str) -> list[tuple[str, str]] | None:
        """(state column, output name) pairs; a state column the input already has becomes
        `<alias>_<column>`, and a name that is still taken (an earlier MATCH with the same alias,
        or a state column of that name) is reported instead of failing in Spark at run time."""
        taken = {f.name.lower() for f in upstream.schema}
        own = {f.name.lower() for f in state.schema}
        renamed: list[tuple[str, str]] = []
        for f in state.schema:
            out = f"{alias}_{f.name}" if f.name.lower() in taken else f.name
            if out.lower() in taken or (out != f.name and out.lower() in own):
                where = f"'{upstream.name}'" if out.lower() in taken else f"state '{state.name}'"
                at = stmt.alias.span if stmt.alias else stmt.state.span
                self.add(error("E0211", at, column=out, where=f"the output of MATCH '{stmt.name.value}' "
                               f"({where} already has it)",
                               hint=f"pick another alias: AGAINST {state.name} AS <other>"))
                return None
            taken.add(out.lower())
            renamed.append((f.name, out))
        return renamed

    def _process(self, stmt: ast.Process) -> plan.Process | None:
        upstream = self._stream_input(stmt.input, "PROCESS")
        states = [self._lookup(s, "broadcast state", (ast.Broadcast,), "PROCESS ... WITH BROADCAST")
                  for s in stmt.states]
        returns = self._columns(stmt.returns, f"RETURNS of '{stmt.name.value}'")
        for col in stmt.returns:
            if col.path is not None:
                self.add(error("E0325", col.path.span, clause="PATH",
                               what="a call that answers JSON (ENRICH ... WITH HTTP): PROCESS returns its columns by name",
                               hint=f"return the value under the key '{col.name.value}'"))
        well_formed = self._python_ref(stmt.ref) or _PYTHON_REF.match(stmt.ref.value)
        if upstream is None or any(s in (None, False) for s in states) or not well_formed:
            return None
        return plan.Process(name=stmt.name.value, schema=returns, line=self.line(stmt.span), span=stmt.span,
                            input=upstream.name, states=tuple(s.name for s in states),
                            call=plan.PythonCall(stmt.ref.value))

    # ---- SINK
    def _sink(self, stmt: ast.Sink) -> plan.Sink | None:
        """The SINK as written (None when its stream or connector is unknown), every problem reported."""
        key = stmt.input.value.lower()
        if key not in self.defs:
            pool = [d.name.value for d in self.defs.values() if not isinstance(d, ast.Broadcast)]
            self.add(error("E0207", stmt.input.span, name=stmt.input.value, hint=did_you_mean(stmt.input.value, pool)))
            return None
        if isinstance(self.defs[key], ast.Broadcast):
            self.add(error("E0209", stmt.input.span, name=stmt.input.value, actual="broadcast state",
                           statement="SINK", expected="source or stream"))
            return None
        upstream = self.nodes.get(key)
        kind_name = stmt.connector.kind.value.upper()
        kind = SINKS.get(kind_name)
        if kind is None:
            self.add(error("E0305", stmt.connector.kind.span, kind="sink connector", name=stmt.connector.kind.value,
                           hint=did_you_mean(kind_name, SINKS)))
            return None
        if kind_name != "CONSOLE":
            self._unique_names(key, f"SINK {stmt.input.value} TO {kind_name} (line {self.line(stmt.span)}) "
                                    "writes columns by name")
        self._connector_arg(stmt.connector, kind.takes_arg, "SINK")
        if kind_name == "PYTHON" and stmt.connector.arg is not None:
            self._python_ref(stmt.connector.arg)
        mode, partition_by, given, key_opt = "APPEND", (), None, None
        for opt in options.first_of_each(stmt.options, self.problems).values():
            if opt.key == "key":
                key_opt = opt
            elif opt.key == "mode":
                mode = values.choice(opt.args[0], SINK_MODES, "SINK MODE", self.problems) or mode
                self._sink_mode(mode, opt)
            elif opt.key == "partition_by":
                partition_by = self._partition_by(opt, kind, kind_name, upstream)
            else:
                given = opt
        pairs = self._options(stmt.connector, kind_name, kind.required_options, "SINK", given)
        table = databases.sink_table(self, stmt, upstream, mode, key_opt)
        if kind_name == "TABLE":
            catalog_tables.sink_checks(self, stmt, mode)
        return plan.Sink(input=self.defs[key].name.value, connector=kind_name,
                         path=stmt.connector.arg.value if stmt.connector.arg else None, options=pairs,
                         mode=mode, partition_by=partition_by, line=self.line(stmt.span), span=stmt.span,
                         database=table)

    def _sink_mode(self, mode: str, opt: ast.Opt) -> None:
        """MODE COMPLETE in BATCH; MODE OVERWRITE in STREAMING is streaming.check's (its hint
        depends on what the stream computes)."""
        if mode == "COMPLETE" and self.settings.mode == "BATCH":
            self.add(error("E0304", opt.span, first="MODE COMPLETE", second="a BATCH pipeline",
                           hint="use MODE OVERWRITE in BATCH mode"))

    def _partition_by(self, opt: ast.Opt, kind, kind_name: str, upstream) -> tuple[str, ...]:
        if not kind.partitions:
            self.add(error("E0304", opt.span, first="PARTITION BY", second=f"a {kind_name} sink"))
            return ()
        if upstream is not None:
            columns = [f.name for f in upstream.schema]
            for col in opt.args:
                if col.value.lower() not in {c.lower() for c in columns}:
                    self.add(error("E0204", col.span, column=col.value, where=f"'{upstream.name}'",
                                   hint=_column_hint(col.value, columns, upstream.name)))
        return tuple(c.value for c in opt.args)



def _with_corrupt_record(connector: str, schema: plan.Schema, pairs: tuple[tuple[str, str], ...]) -> plan.Schema:
    """A JSON source read with `OPTIONS (mode = 'PERMISSIVE')` keeps each malformed line whole in
    Spark's corrupt-record column (`_corrupt_record`, or `columnNameOfCorruptRecord`), added as
    a STRING column when the SCHEMA does not declare it; the default mode fails the job
    (codegen: FAILFAST), so a malformed line never becomes an all-NULL row silently."""
    given = {k.lower(): v for k, v in pairs}
    if connector != "JSON" or given.get("mode", "").upper() != "PERMISSIVE":
        return schema
    column = given.get("columnnameofcorruptrecord", "_corrupt_record")
    if any(f.name.lower() == column.lower() for f in schema):
        return schema
    return schema + (plan.Column(column, "STRING"),)


def _column_hint(column: str, columns: list[str], owner: str) -> str:
    """Did-you-mean, or else the columns there are."""
    return did_you_mean(column, columns) or f"'{owner}' has columns " + ", ".join(columns)


def _importable(module: str) -> bool:
    """True when `module` can be imported from sys.path (sys.modules is not consulted: a module
    loaded earlier from another .flow file's folder must not make this one look valid)."""
    top = module.split(".")[0]
    try:
        return importlib.machinery.PathFinder.find_spec(top) is not None or top in sys.builtin_module_names
    except (ImportError, ValueError):
        return False


class _SchemaView(Mapping):
    """relation name (lower case) → schema of every SOURCE and STREAM defined so far, and of the
    broadcast `states` a query names as the right side of a NEAREST BY join (their entries)."""

    def __init__(self, defs: Mapping[str, ast.Statement], nodes: Mapping[str, plan.PlanNode | None],
                 states: frozenset[str] = frozenset()):
        self._defs = defs
        self._nodes = nodes
        self._states = states

    def _readable(self, key: str) -> bool:
        return key in self._defs and (not isinstance(self._defs[key], ast.Broadcast) or key in self._states)

    def __getitem__(self, key: str) -> plan.Schema | None:
        if not self._readable(key):
            raise KeyError(key)
        node = self._nodes.get(key)
        return node.schema if node is not None else None

    def __iter__(self):
        return (key for key in self._defs if self._readable(key))

    def __len__(self) -> int:
        return sum(1 for _ in self)
