"""The runtime's operator configurations (dslc.runtime.config), built by the compiler from the plan.

The plan already holds the runtime's own call, retry, cache, ... objects; here they are put
together into one operator's configuration, with the job's folder as the first place user
modules are looked up. Building them runs their validation at compile time, so a value the
runtime would refuse fails `dslc compile`, not the driver of a running job; the emitter then
writes each object back as the keyword constructor call that rebuilds it (`emitter.construct`).
"""
from __future__ import annotations

import dataclasses

from dslc.compiler.codegen.emitter import Code
from dslc.compiler.plan import logical as plan
from dslc.runtime import config as C
from dslc.runtime.store.base import is_redis

#: The job's folder, a name in the generated job: user modules are looked up there first.
FOLDER = Code("FOLDER")


def _in_job_folder(call: C.HttpCall | C.PythonCall) -> C.HttpCall | C.PythonCall:
    """A Python call looked up in the job's folder first; the CA file of a call that speaks
    HTTP (HTTP, MODEL, EMBEDDING) beside the .flow file; any other call as it is."""
    if isinstance(call, C.PythonCall):
        return dataclasses.replace(call, search_path=(FOLDER, *call.search_path))
    if isinstance(call, C.TRUSTING_CALLS) and call.ca_file:     # a path beside the .flow file
        return dataclasses.replace(call, ca_file=Code(f"resolve(FOLDER, {call.ca_file!r})"))
    return call


def _store_in_job_folder(store: C.Store | None) -> C.Store | None:
    """The answer store's file beside the .flow file, as every other path (a Redis server as it is)."""
    if store is None or is_redis(store.location):
        return store
    return dataclasses.replace(store, location=Code(f"resolve(FOLDER, {store.location!r})"))


def enrich(node: plan.Enrich) -> C.Enrich:
    """ENRICH as its async operator's configuration."""
    return C.Enrich(
        name=node.name, line=node.line, call=_in_job_folder(node.call), returns=node.returns,
        key_columns=node.key_columns, mode=node.mode, order_by=node.order_by,
        capacity=node.capacity, adaptive=node.adaptive, timeout_s=node.timeout_s,
        retry=node.retry, cache=node.cache, rate=node.rate, batch=node.batch,
        on_miss=node.on_miss, on_timeout=node.on_timeout, on_error=node.on_error,
        paths=node.paths, outage=node.outage, store=_store_in_job_folder(node.store), budget=node.budget,
        ceiling=node.ceiling, provenance=node.provenance,
        tier=node.tier, price=node.price, batch_failure=node.batch_failure,
    )


def process(node: plan.Process, upstream: plan.PlanNode) -> C.Process:
    """PROCESS as its operator's configuration; the input's first column names an element in
    error messages."""
    return C.Process(name=node.name, line=node.line, call=_in_job_folder(node.call),
                     returns=node.schema,     # PROCESS emits its RETURNS columns only
                     states=node.states, key_columns=(upstream.schema[0].name,) if upstream.schema else ())


def expect(node) -> C.Expect:
    """EXPECT (compiler/plan/expectations.Expect) as the runtime judges it: each condition as
    the Spark SQL written and, when it has them, its Python and Arrow forms for a chain."""
    return C.Expect(name=node.on, line=node.line, constraints=tuple(
        C.Constraint(name=c.name, line=c.line, sql=c.condition, action=c.action, path=c.path,
                     python=c.python.python, arrow=c.arrow.python) for c in node.constraints))
