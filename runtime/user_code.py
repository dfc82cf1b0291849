"""Loading user code named 'module:name', once per Python worker.

Modules are looked up in the call's search path (the .flow file's folder) first, then on
sys.path. A class is instantiated once per worker process and reused by every task the worker
runs, as the language contract says; `open()`/`close()` are driven by the operator lifecycle.
"""
from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from dslc.runtime.config import PythonCall

_instances: dict[tuple[str, tuple[str, ...]], Any] = {}
_lock = threading.Lock()


class UserCodeError(RuntimeError):
    """The user module or name could not be loaded."""


def _import(module_name: str, search_path: tuple[str, ...]) -> Any:
    for folder in search_path:
        candidate = Path(folder) / (module_name.replace(".", "/") + ".py")
        if candidate.is_file():
            cached = sys.modules.get(module_name)
            if cached is not None and Path(getattr(cached, "__file__", "") or "").resolve() == candidate.resolve():
                return cached
            spec = importlib.util.spec_from_file_location(module_name, candidate)
            assert spec and spec.loader
            module = importlib.util.module_from_spec(spec)
            sys.modules[module_name] = module
            spec.loader.exec_module(module)
            return module
    try:
        return importlib.import_module(module_name)
    except ImportError as exc:
        where = ", ".join(search_path) or "sys.path"
        raise UserCodeError(f"cannot import module '{module_name}' (looked in {where} and sys.path): {exc}") from exc


def resolve(call: PythonCall) -> Any:
    """Return the function named by `call`, or the worker's single instance of the named class."""
    module_name, _, attr = call.ref.partition(":")
    key = (call.ref, call.search_path)
    with _lock:
        if key in _instances:
            return _instances[key]
        module = _import(module_name, call.search_path)
        try:
            target = getattr(module, attr)
        except AttributeError:
            raise UserCodeError(f"module '{module_name}' has no attribute '{attr}'") from None
        if isinstance(target, type):
            target = target()
        _instances[key] = target
        return target


def lifecycle(target: Any, method: str) -> None:
    """Call target.open()/close() when the user object defines it."""
    hook = getattr(target, method, None)
    if callable(hook):
        hook()


@contextmanager
def opened(target: Any) -> Iterator[Any]:
    """`open()` before the first element, `close()` after the last, also after a failure: the
    lifecycle of a class instance wherever one is accepted (a function has none). A failing
    close() after a failure is noted on the first error, never replaces it."""
    instance = not (inspect.isroutine(target) or isinstance(target, type))
    if instance:
        lifecycle(target, "open")
    try:
        yield target
    except BaseException as exc:
        if instance:
            try:
                lifecycle(target, "close")
            except Exception as close_exc:  # noqa: BLE001 - the first error is the one to see
                exc.add_note(f"close() failed too: {type(close_exc).__name__}: {close_exc}")
        raise
    if instance:
        lifecycle(target, "close")
