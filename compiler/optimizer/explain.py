"""`dslc explain --physical`: chains, why each starts and ends, and the optimiser's passes;
as text, JSON, or a Graphviz picture (chains as boxes, operators inside, shuffles as edges)."""
from __future__ import annotations

import json
import shutil
import subprocess

from dslc.compiler.diagnostics import ToolError
from dslc.compiler.optimizer import physical, queries
from dslc.compiler.optimizer.optimize import Options, optimize
from dslc.compiler.plan import logical as plan
from dslc.compiler.plan.explain import _describe
from dslc.compiler.plan.match_keys import equality_keys


def _match_kind(step: physical.MatchJoin, p: plan.Plan) -> str:
    """BATCH: Spark's broadcast join. STREAMING: a lookup in the snapshot pinned for the
    micro-batch, by the condition's equality keys when it has any (runtime/spark/state.py)."""
    if p.settings.mode != "STREAMING":
        return "broadcast join"
    node = step.node
    keys = equality_keys(node, p.node(node.input).schema, p.node(node.state).schema)
    if keys:
        return f"pinned-snapshot lookup by ({', '.join(s for _, s in keys)}) per micro-batch"
    return "pinned-snapshot scan (every entry) per micro-batch"


def _step_line(step: physical.Step, p: plan.Plan) -> str:
    if isinstance(step, physical.Chain):
        ops = " -> ".join(op.name for op in step.operators)
        lines = ", ".join(str(op.line) for op in step.operators)
        where = "line" if len(step.operators) == 1 else "lines"
        return f"chain#{step.index} [{ops}] mapInArrow over '{step.input}'  -- {where} {lines}"
    node = step.node
    kind = _match_kind(step, p) if isinstance(step, physical.MatchJoin) else \
        {physical.Read: "read", physical.State: "state", physical.Sql: "sql"}[type(step)]
    return f"{step.name}: {kind} {_describe(node)}  -- line {node.line}"


def _kept_where(phys: physical.Physical) -> str:
    if phys.plan.settings.mode == "STREAMING":
        return "an exactly-once stage folder under the CHECKPOINT"
    return "Spark's checkpoint folder (DataFrame.checkpoint(eager=True))"


def render_text(phys: physical.Physical) -> str:
    """Passes, then steps in run order, then sinks."""
    out = ["passes:"]
    out += [f"  {name}: {note}" for name, note in phys.passes]
    out.append("steps:")
    for step in phys.steps:
        out.append("  " + _step_line(step, phys.plan))
        if isinstance(step, physical.Chain):
            for op in step.operators:
                out.append(f"      {op.name} := {_describe(op)}")
            if step.input_columns is not None:
                out.append(f"      reads ({', '.join(step.input_columns)})")
            out.append(f"      starts: {step.starts_because}")
            out.append(f"      ends: {step.ends_because}")
            kept = phys.kept_reason(step.name)
            if kept:
                out.append(f"      kept: computed once, then read back from {_kept_where(phys)} ({kept})")
    for sink in phys.plan.sinks:
        out.append(f"  sink {sink.input} -> {sink.connector}" + (f" {sink.path!r}" if sink.path else "")
                   + f"  -- line {sink.line}")
    out += queries.render(phys)
    return "\n".join(out) + "\n"


def render_json(phys: physical.Physical) -> str:
    """Steps and passes as JSON."""
    steps = []
    for step in phys.steps:
        item = {"kind": type(step).__name__, "name": step.name}
        if isinstance(step, physical.Chain):
            item.update(index=step.index, input=step.input, operators=[op.name for op in step.operators],
                        input_columns=list(step.input_columns) if step.input_columns else None,
                        starts_because=step.starts_because, ends_because=step.ends_because,
                        kept=phys.kept_reason(step.name))
        else:
            item.update(line=step.node.line, inputs=list(step.node.inputs))
        steps.append(item)
    data = {"passes": [{"pass": n, "note": t} for n, t in phys.passes], "steps": steps,
            "sinks": [{"input": s.input, "connector": s.connector, "path": s.path} for s in phys.plan.sinks]}
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def _quote(text: str) -> str:
    """A DOT string; a newline becomes DOT's line break."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def render_dot(phys: physical.Physical) -> str:
    """Graphviz: one cluster per chain; an edge into an aggregation is drawn as a shuffle."""
    out = ["digraph pipeline {", "  rankdir=LR;", '  node [shape=box, fontname="Helvetica"];']
    producer: dict[str, str] = {}
    for step in phys.steps:
        if isinstance(step, physical.Chain):
            out.append(f"  subgraph cluster_chain{step.index} {{")
            out.append(f"    label={_quote(f'chain#{step.index} (one mapInArrow)')}; style=rounded;")
            for op in step.operators:
                out.append(f"    {_quote(op.name)} [label={_quote(op.name + chr(10) + type(op).__name__)}];")
                producer[op.name.lower()] = op.name
            for a, b in zip(step.operators, step.operators[1:]):
                out.append(f"    {_quote(a.name)} -> {_quote(b.name)};")
            out.append("  }")
        else:
            shape = "cylinder" if isinstance(step, physical.Read) else "box"
            out.append(f"  {_quote(step.name)} [shape={shape}, label={_quote(step.name + chr(10) + type(step.node).__name__)}];")
            producer[step.name.lower()] = step.name
    for step in phys.steps:
        inputs = [step.input] if isinstance(step, physical.Chain) else list(step.node.inputs)
        target = step.operators[0].name if isinstance(step, physical.Chain) else step.name
        shuffle = isinstance(step, physical.Sql) and step.node.aggregates
        for name in inputs:
            style = ' [style=dashed, label="shuffle"]' if shuffle else ""
            if isinstance(phys.plan.node(name), plan.BroadcastState):
                style = ' [style=dotted, label="broadcast"]'    # state reaches every task, no shuffle
            out.append(f"  {_quote(producer.get(name.lower(), name))} -> {_quote(target)}{style};")
        if isinstance(step, physical.Chain):
            for op in step.operators:
                for state in getattr(op, "states", ()):    # PROCESS ... WITH BROADCAST
                    out.append(f"  {_quote(producer.get(state.lower(), state))} -> {_quote(op.name)} "
                               '[style=dotted, label="broadcast"];')
    for i, sink in enumerate(phys.plan.sinks):
        out.append(f"  sink{i} [shape=note, label={_quote(sink.connector + ' ' + (sink.path or ''))}];")
        out.append(f"  {_quote(producer.get(sink.input.lower(), sink.input))} -> sink{i};")
    out.append("}")
    return "\n".join(out) + "\n"


def render_svg(phys: physical.Physical) -> str:
    """The DOT picture rendered by Graphviz's `dot` program."""
    dot = shutil.which("dot")
    if dot is None:
        raise ToolError("--format svg needs Graphviz's `dot` program: install Graphviz "
                        "(apt-get install graphviz), or use --format dot")
    done = subprocess.run([dot, "-Tsvg"], input=render_dot(phys), capture_output=True, text=True)
    if done.returncode != 0:
        raise ToolError(f"Graphviz's dot failed: {done.stderr.strip()}")
    return done.stdout


def render_physical(p: plan.Plan, fmt: str = "text", options: Options = Options()) -> str:
    """The physical plan of `p` in the given format."""
    phys = optimize(p, options)
    renderers = {"text": render_text, "json": render_json, "dot": render_dot, "svg": render_svg}
    return renderers[fmt](phys)
