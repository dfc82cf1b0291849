"""Stable text and JSON forms of the logical plan, for `dslc explain` and snapshot tests."""
from __future__ import annotations

import json
from dataclasses import fields, is_dataclass
from typing import Any

from dslc.compiler.plan import expect_explain
from dslc.compiler.plan import logical as plan
from dslc.runtime.secrets import mask_url


def _schema(schema: plan.Schema) -> str:
    return "(" + ", ".join(f"{f.name} {f.type}" for f in schema) + ")"


def _headers(call) -> str:
    """HEADERS as written: a secret shows as ${NAME}."""
    if not call.headers:
        return ""
    return " HEADERS (" + ", ".join(f"{k!r} = {v!r}" for k, v in call.headers) + ")"


def _source(node: plan.Source) -> str:
    text = f"Source[{node.connector}" + (f" {node.path!r}" if node.path else "") + "]"
    if node.database is not None:
        relation = f"TABLE {node.database.table!r}" if node.database.table else f"QUERY {node.database.query!r}"
        text = f"Source[DATABASE {node.database.database} {relation}]"
    if node.watermark:
        text += f" watermark {node.watermark.column} - {node.watermark.delay_s:g}s"
    return text


def _broadcast_state(node: plan.BroadcastState) -> str:
    how = f"key={node.key} op={node.op}" if node.using is None else f"using={node.using!r}"
    every = f" refresh every {node.refresh_s:g}s" if node.refresh_s else ""
    return f"BroadcastState[{node.source}] {how}{every}"


def _query(node: plan.Query) -> str:
    kind = "Aggregate" if node.aggregates else "Query"
    return f"{kind}[{', '.join(node.reads)}] " + " ".join(node.sql.split())


def _http_call(call: plan.HttpCall) -> str:
    body = f" BODY ({', '.join(call.body)})" if call.body is not None else ""
    text = f"HTTP {call.method} {call.url!r}{body}{_headers(call)}"
    if call.answer:
        text += f" ANSWER {call.answer!r}"
    return text + _trust(call)


def _trust(call) -> str:
    """OPTIONS (ca_file = ...) or (verify = 'false') of a call that speaks HTTP; nothing by default."""
    if call.ca_file or not call.verify:
        return f" ca_file={call.ca_file!r}" if call.ca_file else " verify=false"
    return ""


def _model_call(call: plan.ModelCall) -> str:
    system = f" SYSTEM {call.system!r}" if call.system is not None else ""
    return f"MODEL {call.model!r} AT {call.base_url!r}{_headers(call)}{system} PROMPT {call.prompt!r}{_trust(call)}"


def _embedding_call(call: plan.EmbeddingCall) -> str:
    return f"EMBEDDING {call.model!r} AT {call.base_url!r}{_headers(call)} INPUT {call.input!r}{_trust(call)}"


def _sql_call(call: plan.SqlCall) -> str:
    """The URL is the DATABASE's: named, never shown."""
    text = f"SQL {call.database} {call.query!r}"
    if call.batch_query:
        text += f" batched={call.batch_query!r}"
    if call.pool != 10:
        text += f" pool={call.pool}"
    return text


def _python_call(call: plan.PythonCall) -> str:
    return f"PYTHON {call.ref!r}"


_CALLS = {plan.HttpCall: _http_call, plan.ModelCall: _model_call, plan.EmbeddingCall: _embedding_call,
          plan.SqlCall: _sql_call, plan.PythonCall: _python_call}


def _limits(node: plan.Enrich) -> list[str]:
    """The options that bound an ENRICH's calls, those written only."""
    opts = []
    if node.retry:
        opts.append(f"retry={node.retry.attempts}x{node.retry.backoff_s:g}s" + ("exp" if node.retry.exponential else ""))
    if node.cache:
        opts.append(f"cache={node.cache.size}/{node.cache.ttl_s:g}s")
    if node.rate:
        opts.append(f"rate={node.rate.per_second:g}/s" + (f" tokens={node.rate.tokens_per_minute:g}/min"
                                                          if node.rate.tokens_per_minute else ""))
    if node.store:
        opts.append(f"store={mask_url(node.store.location)!r}" + (f" ttl={node.store.ttl_s:g}s" if node.store.ttl_s else ""))
    if node.budget:
        opts.append(f"budget={node.budget.amount} {node.budget.unit}")
    if node.batch:
        opts.append(f"batch={node.batch.size}" + (f" within={node.batch.within_s:g}s" if node.batch.within_s else ""))
    return opts


def _enrich(node: plan.Enrich) -> str:
    mode = f"{node.mode.value} BY ({', '.join(node.order_by)})" if node.order_by else node.mode.value
    opts = [mode, f"capacity={node.capacity}" + (" adaptive" if node.adaptive else ""), f"timeout={node.timeout_s:g}s"]
    opts += _limits(node)
    opts += [f"miss={node.on_miss.value}", f"timeout->{node.on_timeout.value}", f"error->{node.on_error.value}"]
    if node.outage:
        opts.append("outage=" + (f"PAUSE {node.outage.pause_s:g}s" if node.outage.action == "PAUSE" else "FAIL"))
    if node.paths:
        opts.append("paths=(" + ", ".join(f"{c}={p!r}" for c, p in node.paths) + ")")
    if node.dead_letter:
        opts.append(f"dlq={node.dead_letter!r}" + (f" {str(node.ceiling).lower()}" if node.ceiling else ""))
    if node.provenance:
        opts.append(f"provenance={node.provenance}")
    return f"Enrich[{node.input}] {_CALLS[type(node.call)](node.call)} " + " ".join(opts)


def _nearest(node: plan.NearestJoin) -> str:
    how = f"{'APPROX' if node.approx else 'EXACT'} NEAREST {node.k} BY {'SIMILARITY' if node.similarity else 'DISTANCE'}"
    return (f"NearestJoin[{node.left} {'LEFT OUTER ' if node.outer else ''}x {node.right} AS {node.right_alias}] "
            f"{how} {node.function}({node.left_vector}, {node.right_alias}.{node.right_vector}), "
            f"{node.right} {'entries indexed once per version' if node.state else 'read once and indexed'}")


def _match(node: plan.Match) -> str:
    return f"Match[{node.input} x {node.state} AS {node.alias}] " + " ".join(node.predicate.split())


def _process(node: plan.Process) -> str:
    states = f" with {', '.join(node.states)}" if node.states else ""
    return f"Process[{node.input}{states}] PYTHON {node.call.ref!r}"


_DESCRIBE = {plan.Source: _source, plan.BroadcastState: _broadcast_state, plan.Query: _query,
             plan.Enrich: _enrich, plan.Match: _match, plan.Process: _process,
             plan.NearestJoin: _nearest}


def _describe(node: plan.PlanNode) -> str:
    describe = _DESCRIBE.get(type(node))
    if describe is None:
        raise TypeError(f"cannot describe {type(node).__name__}")
    return describe(node)


def render_text(p: plan.Plan) -> str:
    """One line per node (`name := Kind[...]  -- line N`), its schema below, then the sinks."""
    s = p.settings
    head = f"pipeline {s.name} mode={s.mode}"
    if s.checkpoint:
        head += f" checkpoint={s.checkpoint!r}"
    if s.trigger:
        head += f" trigger={s.trigger}"
    lines = [head]
    lines += [f"set {k} = {v!r}" for k, v in s.conf]
    for node in p.nodes:
        lines.append(f"{node.name} := {_describe(node)}  -- line {node.line}")
        lines.append(f"    schema {_schema(node.schema)}")
        lines += expect_explain.logical_lines(p, node)
    for sink in p.sinks:
        target = f" {sink.path!r}" if sink.path else ""
        extra = f" partition_by=({', '.join(sink.partition_by)})" if sink.partition_by else ""
        lines.append(f"sink {sink.input} -> {sink.connector}{target} mode={sink.mode}{extra}  -- line {sink.line}")
    return "\n".join(lines) + "\n"


#: The fields that hold an answer store's location (ANSWERS; a STORE's), shown without user:password.
_STORE_LOCATIONS = ("location", "answers")


def _jsonable(value: Any) -> Any:
    if is_dataclass(value):
        out = {"kind": type(value).__name__}
        for f in fields(value):
            if f.name == "span" or not f.repr:    # positions and sqlglot trees are not data
                continue
            item = getattr(value, f.name)
            if f.name in _STORE_LOCATIONS and isinstance(item, str):
                item = mask_url(item)           # a Redis password: never shown (#48 item 19)
            out[f.name] = _jsonable(item)
        return out
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def render_json(p: plan.Plan) -> str:
    """The plan as JSON (sorted keys, stable)."""
    data = {"settings": _jsonable(p.settings), "nodes": [_jsonable(n) for n in p.nodes],
            "sinks": [_jsonable(s) for s in p.sinks]}
    if p.expects:
        data["expects"] = [_jsonable(e) for e in p.expects]
    return json.dumps(data, indent=2, sort_keys=True) + "\n"
