"""The runtime's configuration objects (dslc.runtime.config), built by the compiler from the plan.

Building them here runs their validation at compile time, so a value the runtime would refuse
fails `dslc compile`, not the driver of a running job; the emitter then writes each object back
as the keyword constructor call that rebuilds it (`emitter.construct`).
"""
from __future__ import annotations

from dslc.compiler.codegen.emitter import Code
from dslc.compiler.plan import logical as plan
from dslc.runtime import config as C

#: The job's folder, a name in the generated job: user modules are looked up there first.
FOLDER = Code("FOLDER")


def call(node: plan.Enrich) -> C.HttpCall | C.PythonCall:
    """What an ENRICH calls."""
    if isinstance(node.call, plan.HttpCall):
        return C.HttpCall(node.call.url, node.call.method, node.call.body)
    return C.PythonCall(node.call.ref, (FOLDER,))


def enrich(node: plan.Enrich) -> C.Enrich:
    """ENRICH as its async operator's configuration."""
    return C.Enrich(
        name=node.name, line=node.line, call=call(node), returns=node.returns,
        key_columns=node.key_columns, mode=node.mode, order_by=node.order_by,
        capacity=node.capacity, adaptive=node.adaptive, timeout_s=node.timeout_s, retry=node.retry, cache=node.cache, rate=node.rate,
        batch=node.batch,
        on_miss=node.on_miss, on_timeout=node.on_timeout, on_error=node.on_error,
    )


def process(node: plan.Process, upstream: plan.PlanNode) -> C.Process:
    """PROCESS as its operator's configuration; the input's first column names an element in
    error messages."""
    return C.Process(name=node.name, line=node.line, call=C.PythonCall(node.ref, (FOLDER,)),
                     returns=node.schema,     # PROCESS emits its RETURNS columns only
                     states=node.states, key_columns=(upstream.schema[0].name,) if upstream.schema else ())


def watermark(mark: plan.Watermark) -> C.Watermark:
    """A source's WATERMARK as the chain tracks it."""
    return C.Watermark(mark.column, mark.delay_s)
