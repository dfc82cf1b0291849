"""Functions of dslc that carry the runtime to Spark Connect's Python workers themselves.

Spark Connect (pyspark 4.x's server) gives the session's artifacts (`addArtifacts(pyfile=True)`)
to the Python workers of batch jobs only: a query's foreachBatch function runs in a Python worker
of the server's driver, and the Python functions of a streaming query (mapInArrow) run in executor
workers whose `sys.path` lacks the session's files; neither can import dslc. So such a function
travels inside a small bootstrap pickled by value: it carries the runtime zip and the user modules,
unpacks them into a private folder of the worker machine's temp directory (named by their content,
so written once per machine), puts them first on `sys.path`, and only then unpickles the real
function (pickled by reference to `dslc.*`). A foreachBatch worker loads the function once and
keeps it for every micro-batch of the query, so the state it holds lives as long as the query.
"""
from __future__ import annotations

import functools
import hashlib
import os
import pickle
import sys
import tempfile
from pathlib import Path
from typing import Callable

from pyspark import cloudpickle
from pyspark.serializers import CloudPickleSerializer


def portable(function: Callable, files: list[str]) -> Callable:
    """`function` callable the same way in a Python worker that lacks dslc: `files` are the runtime
    zip and the user modules (.py) it needs."""
    payload = CloudPickleSerializer().dumps(function)
    shipped = tuple((Path(path).name, Path(path).read_bytes()) for path in files)
    return functools.partial(_call, payload, shipped, [])


def _call(payload: bytes, files: tuple, loaded: list, *args):
    """In the worker: unpack `files` and load the function on the first call, then call it."""
    if not loaded:
        _unpack(files)
        loaded.append(pickle.loads(payload))
    return loaded[0](*args)


def _unpack(files: tuple) -> None:
    """Write the files into a folder named by their content (reused by later queries) and put it,
    and the zips in it, first on sys.path."""
    digest = hashlib.sha256()
    for name, content in files:
        digest.update(name.encode() + b"\0" + hashlib.sha256(content).digest())
    folder = Path(tempfile.gettempdir()) / f"dslc-connect-{os.getuid()}" / digest.hexdigest()[:32]
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    entries = [str(folder)]
    for name, content in files:
        target = folder / name
        if not target.is_file() or target.read_bytes() != content:
            partial = folder / f".{name}.{os.getpid()}.tmp"
            partial.write_bytes(content)
            os.replace(partial, target)      # atomic: a worker starting at the same time never reads half
        if name.endswith(".zip"):
            entries.append(str(target))
    for entry in reversed(entries):
        if entry not in sys.path:
            sys.path.insert(0, entry)


# The bootstrap must reach the worker by value: that worker cannot import dslc.
cloudpickle.register_pickle_by_value(sys.modules[__name__])
