"""Values the job's driver reads when it starts and ships to the executors inside each operator's
configuration: the `${NAME}` secrets a call names and the CA certificates its OPTIONS point at.

Executors need no environment and no file of their own (a standalone cluster, a Spark Connect
server): the values travel in the pickled chain, like the rest of the configuration. Nothing here
is written into the generated job, a log or a plan; `Secrets` prints as `***`.
"""
from __future__ import annotations

import dataclasses
import sys
import threading

from dslc.runtime import config as C
from dslc.runtime import secrets as S


def required_secrets(names: tuple[str, ...]) -> S.Secrets:
    """The job's secrets, read before Spark starts; one that is set nowhere stops the job with a
    message naming it and where it was looked for (exit code 2, no traceback, no value). A job
    run by another program's thread (the REPL's :show) gets the MissingSecret to report instead."""
    try:
        return S.read(names)
    except S.MissingSecret as exc:
        if S.optional():
            return S.read(tuple(n for n in names if S.is_set(n)))
        if threading.current_thread() is not threading.main_thread():
            raise
        print(f"dslc: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def attach(operators: tuple, secrets: S.Secrets | None) -> tuple:
    """Each ENRICH with the values of the secrets its call names and its CA file's certificates."""
    return tuple(_attach(op, secrets) if isinstance(op, C.Enrich) else op for op in operators)


def _attach(op: C.Enrich, secrets: S.Secrets | None) -> C.Enrich:
    names = op.secret_names
    if names:
        found = (secrets if secrets is not None else required_secrets(names)).only(names)
        op = dataclasses.replace(op, secrets=found)
    call = op.call
    if isinstance(call, C.TRUSTING_CALLS) and call.ca_file and call.ca_data is None:
        with open(call.ca_file, encoding="ascii") as handle:
            op = dataclasses.replace(op, call=dataclasses.replace(call, ca_data=handle.read()))
    return op
