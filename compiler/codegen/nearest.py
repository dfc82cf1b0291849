"""The job's lines for a NEAREST BY run with an index (optimizer/rules/nearest.py): the right side
read once and indexed on the driver, the left side probed per partition (runtime/spark/nearest.py).
In STREAMING the right SOURCE is read once, as a batch, when the job starts."""
from __future__ import annotations

from dslc.compiler.codegen.emitter import StringCall, lit
from dslc.compiler.optimizer import physical
from dslc.compiler.optimizer.explain import index_kind
from dslc.compiler.plan import logical as plan

_READ_FORMATS = {"JSON": "json", "CSV": "csv", "PARQUET": "parquet", "TEXT": "text", "KAFKA": "kafka"}


class NearestLowering:
    """Mixed into the job's lowering (codegen/lower.py): `visit_Nearest`."""

    def nearest_modules(self) -> set[str]:
        """The runtime.spark modules the job's NEAREST BY steps call."""
        probes = [s.node for s in self.phys.steps if isinstance(s, physical.Nearest)]
        used = {"nearest"} if any(not (self.streaming and n.state) for n in probes) else set()
        if any(n.state for n in probes):
            used |= {"nearest_state", "pinned"} if self.streaming else {"nearest_state"}
        return used

    def visit_Nearest(self, step: physical.Nearest, session: str) -> None:
        node: plan.NearestJoin = step.node
        o = self.out
        how = f"{'APPROX' if node.approx else 'EXACT'} NEAREST {node.k}"
        self.comment([node.line], f"STREAM {node.line and node.name.removesuffix('__nearest')} = SELECT ... "
                                  f"JOIN {node.right} {how} BY ...: {node.right} read once and indexed")
        if node.state:
            self._state_probe(node)
            return
        right = self._right_once(node) if self.streaming else self.v(node.right)
        index = self.v(f"{node.name}_index")
        o.comment(f"an action: reads {node.right} now and builds its index ({index_kind(node)})")
        o.call(f"{index} = nearest.index_side", [
            right, f"operator={lit(node.name.removesuffix('__nearest'))}", f"line={node.line}",
            f"column={lit(node.right_vector)}", f"function={lit(node.function)}",
            f"similarity={node.similarity}", f"approx={node.approx}"])
        o.comment(f"each row of {node.left} with its {node.k} best rows of {node.right}, probed per partition")
        o.call(f"{self.v(node.name)} = nearest.probe", [
            self.v(node.left), index, f"operator={lit(node.name.removesuffix('__nearest'))}", f"line={node.line}",
            f"vector={lit(node.left_vector)}", f"k={node.k}", f"outer={node.outer}",
            f"alias={lit(node.right_alias)}", "metrics=metrics"])
        self._view(self.v(node.name), node.name)

    def _index_kwargs(self, node: plan.NearestJoin) -> list[str]:
        return [f"operator={lit(node.name.removesuffix('__nearest'))}", f"line={node.line}",
                f"column={lit(node.right_vector)}", f"function={lit(node.function)}",
                f"similarity={node.similarity}", f"approx={node.approx}"]

    def _state_probe(self, node: plan.NearestJoin) -> None:
        """The right side a BROADCAST: BATCH indexes its one version on the driver; STREAMING
        probes the version each micro-batch pinned, indexed once per version in each worker."""
        o = self.out
        state: plan.BroadcastState = self.plan.node(node.right)
        schema = "schema=" + lit(", ".join(f"`{f.name.replace('`', '``')}` {f.type}" for f in state.schema))
        probe = [f"vector={lit(node.left_vector)}", f"k={node.k}", f"outer={node.outer}",
                 f"alias={lit(node.right_alias)}", "metrics=metrics"]
        if self.streaming:
            o.comment(f"each row of {node.left} with its {node.k} best entries of the version of {node.right} "
                      "its micro-batch pinned (indexed once per version)")
            o.call(f"{self.v(node.name)} = nearest_state.probe_state", [
                self.v(node.left), f"pinned.PinnedStates(CHECKPOINT, {lit((node.right,))})",
                f"state_name={lit(node.right)}", schema, *self._index_kwargs(node), *probe])
        else:
            index = self.v(f"{node.name}_index")
            o.comment(f"{node.right}'s entries indexed ({index_kind(node)})")
            o.call(f"{index} = nearest_state.state_side", [
                self.v(node.right), f"state_name={lit(node.right)}", schema, *self._index_kwargs(node)])
            o.comment(f"each row of {node.left} with its {node.k} best entries of {node.right}, probed per partition")
            o.call(f"{self.v(node.name)} = nearest.probe", [
                self.v(node.left), index, f"operator={lit(node.name.removesuffix('__nearest'))}",
                f"line={node.line}", *probe])
        self._view(self.v(node.name), node.name)

    def _right_once(self, node: plan.NearestJoin) -> str:
        """STREAMING: the right SOURCE read as a batch (its files as they are when the job starts)."""
        source: plan.Source = self.plan.node(node.right)
        var = self.v(f"{node.right}_once")
        calls: list[str | StringCall] = [f".format({lit(_READ_FORMATS[source.connector])})"]
        if source.connector not in ("TEXT", "KAFKA"):
            ddl = ", ".join(f"`{f.name.replace('`', '``')}` {f.type}" for f in source.schema)
            calls.append(StringCall(".schema", ddl))
        options = dict(source.options)
        if source.connector == "JSON" and not any(k.lower() == "mode" for k in options):
            options = {"mode": "FAILFAST", **options}
        calls += [StringCall(".option", v, before=f"{lit(k)},") for k, v in options.items()]
        calls.append(f".load(resolve(FOLDER, {lit(source.path)}))" if source.path else ".load()")
        self.out.comment(f"{node.right} read once, as a batch: the index holds its rows as they are now")
        self.out.chain(f"{var} = spark.read", calls)
        return var
