"""Stable text and JSON forms of the logical plan, for `dslc explain` and snapshot tests."""
from __future__ import annotations

import json
from dataclasses import fields, is_dataclass
from typing import Any

from dslc.compiler.plan import logical as plan


def _schema(schema: plan.Schema) -> str:
    return "(" + ", ".join(f"{f.name} {f.type}" for f in schema) + ")"


def _headers(call) -> str:
    """HEADERS as written: a secret shows as ${NAME}."""
    if not call.headers:
        return ""
    return " HEADERS (" + ", ".join(f"{k!r} = {v!r}" for k, v in call.headers) + ")"


def _describe(node: plan.PlanNode) -> str:  # noqa: C901 - to be split (#42)
    if isinstance(node, plan.Source):
        text = f"Source[{node.connector}" + (f" {node.path!r}" if node.path else "") + "]"
        if node.database is not None:
            relation = f"TABLE {node.database.table!r}" if node.database.table else f"QUERY {node.database.query!r}"
            text = f"Source[DATABASE {node.database.database} {relation}]"
        if node.watermark:
            text += f" watermark {node.watermark.column} - {node.watermark.delay_s:g}s"
        return text
    if isinstance(node, plan.BroadcastState):
        how = f"key={node.key} op={node.op}" if node.using is None else f"using={node.using!r}"
        every = f" refresh every {node.refresh_s:g}s" if node.refresh_s else ""
        return f"BroadcastState[{node.source}] {how}{every}"
    if isinstance(node, plan.Query):
        kind = "Aggregate" if node.aggregates else "Query"
        return f"{kind}[{', '.join(node.reads)}] " + " ".join(node.sql.split())
    if isinstance(node, plan.Enrich):
        if isinstance(node.call, plan.HttpCall):
            body = f" BODY ({', '.join(node.call.body)})" if node.call.body is not None else ""
            call = f"HTTP {node.call.method} {node.call.url!r}{body}"
            if node.call.headers:   # as written: a secret shows as ${NAME}
                call += " HEADERS (" + ", ".join(f"{k!r} = {v!r}" for k, v in node.call.headers) + ")"
            if node.call.answer:
                call += f" ANSWER {node.call.answer!r}"
            if node.call.ca_file or not node.call.verify:
                call += f" ca_file={node.call.ca_file!r}" if node.call.ca_file else " verify=false"
        elif isinstance(node.call, plan.ModelCall):
            system = f" SYSTEM {node.call.system!r}" if node.call.system is not None else ""
            call = f"MODEL {node.call.model!r} AT {node.call.base_url!r}{_headers(node.call)}{system} PROMPT {node.call.prompt!r}"
        elif isinstance(node.call, plan.SqlCall):     # the URL is the DATABASE's: named, never shown
            call = f"SQL {node.call.database} {node.call.query!r}"
            if node.call.batch_query:
                call += f" batched={node.call.batch_query!r}"
            if node.call.pool != 10:
                call += f" pool={node.call.pool}"
        elif isinstance(node.call, plan.EmbeddingCall):
            call = f"EMBEDDING {node.call.model!r} AT {node.call.base_url!r}{_headers(node.call)} INPUT {node.call.input!r}"
        else:
            call = f"PYTHON {node.call.ref!r}"
        mode = f"{node.mode.value} BY ({', '.join(node.order_by)})" if node.order_by else node.mode.value
        opts = [mode, f"capacity={node.capacity}" + (" adaptive" if node.adaptive else ""), f"timeout={node.timeout_s:g}s"]
        if node.retry:
            opts.append(f"retry={node.retry.attempts}x{node.retry.backoff_s:g}s"
                        + ("exp" if node.retry.exponential else ""))
        if node.cache:
            opts.append(f"cache={node.cache.size}/{node.cache.ttl_s:g}s")
        if node.rate:
            opts.append(f"rate={node.rate.per_second:g}/s" + (f" tokens={node.rate.tokens_per_minute:g}/min"
                                                              if node.rate.tokens_per_minute else ""))
        if node.store:
            opts.append(f"store={node.store.location!r}" + (f" ttl={node.store.ttl_s:g}s" if node.store.ttl_s else ""))
        if node.budget:
            opts.append(f"budget={node.budget.amount} {node.budget.unit}")
        if node.batch:
            opts.append(f"batch={node.batch.size}" + (f" within={node.batch.within_s:g}s" if node.batch.within_s else ""))
        opts += [f"miss={node.on_miss.value}", f"timeout->{node.on_timeout.value}", f"error->{node.on_error.value}"]
        if node.outage:
            opts.append("outage=" + (f"PAUSE {node.outage.pause_s:g}s" if node.outage.action == "PAUSE" else "FAIL"))
        if node.paths:
            opts.append("paths=(" + ", ".join(f"{c}={p!r}" for c, p in node.paths) + ")")
        if node.dead_letter:
            opts.append(f"dlq={node.dead_letter!r}")
        return f"Enrich[{node.input}] {call} " + " ".join(opts)
    if isinstance(node, plan.Match):
        return f"Match[{node.input} x {node.state} AS {node.alias}] " + " ".join(node.predicate.split())
    if isinstance(node, plan.Process):
        states = f" with {', '.join(node.states)}" if node.states else ""
        return f"Process[{node.input}{states}] PYTHON {node.call.ref!r}"
    raise TypeError(f"cannot describe {type(node).__name__}")


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
    for sink in p.sinks:
        target = f" {sink.path!r}" if sink.path else ""
        extra = f" partition_by=({', '.join(sink.partition_by)})" if sink.partition_by else ""
        lines.append(f"sink {sink.input} -> {sink.connector}{target} mode={sink.mode}{extra}  -- line {sink.line}")
    return "\n".join(lines) + "\n"


def _jsonable(value: Any) -> Any:
    if is_dataclass(value):
        out = {"kind": type(value).__name__}
        for f in fields(value):
            if f.name == "span" or not f.repr:    # positions and sqlglot trees are not data
                continue
            out[f.name] = _jsonable(getattr(value, f.name))
        return out
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def render_json(p: plan.Plan) -> str:
    """The plan as JSON (sorted keys, stable)."""
    data = {"settings": _jsonable(p.settings), "nodes": [_jsonable(n) for n in p.nodes],
            "sinks": [_jsonable(s) for s in p.sinks]}
    return json.dumps(data, indent=2, sort_keys=True) + "\n"
