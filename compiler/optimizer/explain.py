"""`dslc explain --physical`: chains, why each starts and ends, and the optimiser's passes;
as text, JSON, or a Graphviz picture (chains as boxes, operators inside, shuffles as edges)."""
from __future__ import annotations

import json
import shutil
import subprocess

from dslc.compiler.diagnostics import ToolError
from dslc.compiler.optimizer import expect_placement, physical, queries
from dslc.compiler.optimizer.optimize import Options, optimize
from dslc.compiler.plan import logical as plan
from dslc.compiler.plan.explain import _describe
from dslc.compiler.plan.match_keys import equality_keys
from dslc.runtime.secrets import mask_url


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
    if isinstance(step, physical.Nearest):
        return (f"{step.name}: index probe {_describe(node)}  -- line {node.line}\n      index: {index_kind(node)}"
                f"\n      {index_side(node, p)}")
    kind = _match_kind(step, p) if isinstance(step, physical.MatchJoin) else \
        {physical.Read: "read", physical.State: "state", physical.Sql: "sql"}[type(step)]
    return f"{step.name}: {kind} {_describe(node)}  -- line {node.line}"


def index_kind(node: plan.NearestJoin) -> str:
    """The index a NEAREST BY step builds, as runtime/vectors/index.py decides it (its size and
    build time are known when the job builds it: printed then, and in the metrics file)."""
    natural = (node.function == "vector_l2_distance") != node.similarity
    if node.approx and natural and node.function != "vector_inner_product":
        return "hnsw (faiss), M=32, efSearch 256, re-ranked by Spark's FLOATs"
    return "exact (NumPy): one product of matrices, re-ranked by Spark's FLOATs"


def index_side(node: plan.NearestJoin, p: plan.Plan) -> str:
    """What the index holds and when it is built; its size and build time are the run's (printed
    when built, and in the metrics: index_rows, index_bytes, index_build_seconds)."""
    where = f"{node.right}.{node.right_vector}"
    if node.state:
        when = ("built on the driver from the state's one version" if p.settings.mode == "BATCH" else
                "rebuilt for each version of the state, in each worker, from the first micro-batch that pins it")
        return f"of: {where} (the BROADCAST's entries), {when}; size and build time: in the metrics"
    when = "read once when the job starts" if p.settings.mode == "STREAMING" else "read once"
    return f"of: {where} ({when}), built on the driver; size and build time: in the metrics"


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
        out += expect_placement.physical_lines(phys, step)
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
        if isinstance(step, physical.Nearest):
            item["index"] = {"kind": index_kind(step.node), "of": f"{step.node.right}.{step.node.right_vector}",
                             "state": step.node.state, "built": index_side(step.node, phys.plan)}
        steps.append(item)
    data = {"passes": [{"pass": n, "note": t} for n, t in phys.passes], "steps": steps,
            "sinks": [{"input": s.input, "connector": s.connector, "path": s.path} for s in phys.plan.sinks]}
    if phys.plan.expects:
        data["expects"] = expect_placement.as_json(phys)
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def _quote(text: str) -> str:
    """A DOT string; a newline becomes DOT's line break."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def render_dot(phys: physical.Physical) -> str:
    """Graphviz: one cluster per chain; an edge into an aggregation is drawn as a shuffle; each
    ENRICH's service and dead letters beside it; a filter the optimiser moved is labelled by what
    it keeps, not by the name it has inside the plan."""
    out = ["digraph pipeline {", "  rankdir=LR;", '  node [shape=box, fontname="Helvetica"];',
           '  edge [fontname="Helvetica", fontsize=10];']
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
            label = _label(step.node, phys.plan)
            shown = _shown_id(step.node, label, {n.name for n in phys.plan.nodes} | set(producer.values()))
            out.append(f"  {_quote(shown)} [shape={shape}, label={_quote(label)}];")
            producer[step.name.lower()] = shown
    out += _edges(phys, producer)
    for i, sink in enumerate(phys.plan.sinks):
        out.append(f"  sink{i} [shape=note, label={_quote(sink.connector + ' ' + (sink.path or ''))}];")
        out.append(f"  {_quote(producer.get(sink.input.lower(), sink.input))} -> sink{i};")
    out += _services_and_dead_letters(phys)
    out.append("}")
    return "\n".join(out) + "\n"


def _shown_id(node: plan.PlanNode, label: str, taken: set[str]) -> str:
    """The DOT id of a step's box, which the SVG shows as its tooltip: the node's name, or for a
    node a rule made (`e__filter`, `m__nearest`) the first line of its label, made unique."""
    if not (isinstance(node, plan.Query) and node.origin) and not isinstance(node, plan.NearestJoin):
        return node.name
    first = label.split("\n")[0]
    shown, n = first, 2
    while shown in taken:
        shown, n = f"{first} ({n})", n + 1
    return shown


def _label(node: plan.PlanNode, p: plan.Plan) -> str:
    """A node's box: its name and kind; a node a rule made (`e__filter`, `m__nearest`) says what
    it does instead of its name inside the plan."""
    if isinstance(node, plan.NearestJoin):
        query = node.name.removesuffix("__nearest")
        return f"index probe for {query}\n{node.k} nearest of {node.right}.{node.right_vector}"
    if isinstance(node, plan.Query) and node.origin:
        where = node.tree.args.get("where")
        kept = " ".join((where.this.sql(dialect="spark") if where is not None else node.sql).split())
        kept = kept if len(kept) <= 60 else kept[:57] + "..."
        before = [n.name for n in p.nodes if node.name in n.inputs]
        return f"filter before {', '.join(before)}\nWHERE {kept}" if before else f"filter\nWHERE {kept}"
    return node.name + "\n" + type(node).__name__


def _edges(phys: physical.Physical, producer: dict[str, str]) -> list[str]:
    """Data edges between steps: shuffles into aggregations, broadcast state as dotted lines."""
    out = []
    for step in phys.steps:
        inputs = [step.input] if isinstance(step, physical.Chain) else list(step.node.inputs)
        target = step.operators[0].name if isinstance(step, physical.Chain) else producer[step.name.lower()]
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
    return out


def service_label(call: object) -> str:
    """What an ENRICH calls, as the picture names it (a URL without its user:password or keys; a
    secret stays `${NAME}`, never its value)."""
    if isinstance(call, plan.HttpCall):
        return f"HTTP {call.method}\n{mask_url(call.url)}"
    if isinstance(call, (plan.ModelCall, plan.EmbeddingCall)):
        kind = "MODEL" if isinstance(call, plan.ModelCall) else "EMBEDDING"
        return f"{kind} {call.model}\n{mask_url(call.base_url)}"
    if isinstance(call, plan.PythonCall):
        return f"PYTHON {call.ref}"
    kind = type(call).__name__.removesuffix("Call").upper()
    named = next((getattr(call, a) for a in ("database", "name", "url") if isinstance(getattr(call, a, None), str)), "")
    return f"{kind} {mask_url(named)}".strip()


def _services_and_dead_letters(phys: physical.Physical) -> list[str]:
    """Each service an ENRICH calls (one box per service, however many call it) and each dead
    letter folder it writes to, linked to the operator."""
    out: list[str] = []
    services: dict[str, str] = {}
    letters: dict[str, str] = {}
    for node in phys.plan.nodes:
        if not isinstance(node, plan.Enrich):
            continue
        label = service_label(node.call)
        if label not in services:
            services[label] = f"service{len(services)}"
            out.append(f"  {services[label]} [shape=component, style=dashed, label={_quote(label)}];")
        out.append(f'  {_quote(node.name)} -> {services[label]} [style=dashed, dir=both, arrowsize=0.6, label="calls"];')
        if node.dead_letter:
            if node.dead_letter not in letters:
                letters[node.dead_letter] = f"dead_letter{len(letters)}"
                out.append(f"  {letters[node.dead_letter]} [shape=note, color=\"#b03030\", fontcolor=\"#b03030\", "
                           f"label={_quote('DEAD LETTER ' + node.dead_letter)}];")
            out.append(f'  {_quote(node.name)} -> {letters[node.dead_letter]} [style=dashed, color="#b03030", '
                       'fontcolor="#b03030", label="dead letters"];')
    return out


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
