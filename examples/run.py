"""Run an example end to end: start its local service (if it has one), `dslc run` it, stop the service.

    python examples/run.py fraud [--mode streaming] [-- spark-submit args]
"""
from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _wait_for_port(port: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise SystemExit(f"the example's service did not start on port {port}")


def main(argv: list[str]) -> int:
    if not argv or not (HERE / argv[0] / "pipeline.flow").is_file():
        names = sorted(p.parent.name for p in HERE.glob("*/pipeline.flow"))
        print(f"usage: python examples/run.py NAME [dslc run options]; NAME is one of {', '.join(names)}")
        return 2
    folder = HERE / argv[0]
    service = None
    if (folder / "service.py").is_file():
        service = subprocess.Popen([sys.executable, str(folder / "service.py"), "8765"], cwd=folder)
        _wait_for_port(8765)
    try:
        extra = argv[1:]
        if (folder / "secrets.env").is_file() and "--secrets" not in extra:
            # the example's token for its own local service (a real one stays out of the repository)
            extra = ["--secrets", str(folder / "secrets.env"), *extra]
        command = [sys.executable, "-m", "dslc.compiler.cli", "run", str(folder / "pipeline.flow"), *extra]
        return subprocess.call(command)
    finally:
        if service is not None:
            service.terminate()
            service.wait(timeout=10)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
