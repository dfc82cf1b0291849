"""Run an example end to end: start its local service (if it has one), `dslc run` it, stop the service.

    python examples/run.py fraud [--mode streaming] [-- spark-submit args]
    python examples/run.py tickets/pay_less       # an example's other .flow file (pay_less.flow)
"""
from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _wait_for_service(port: int, settings: Path, service: subprocess.Popen, timeout: float = 60.0) -> None:
    """Until the service answers on `port`, or has written its `settings` (a port of its own)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if settings.is_file() or service.poll() is not None:
            break
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    if not settings.is_file():
        raise SystemExit(f"the example's service did not start (port {port}, or {settings})")


def main(argv: list[str]) -> int:
    name, _, variant = (argv[0] if argv else "").partition("/")
    pipeline = HERE / name / f"{variant or 'pipeline'}.flow"
    if not name or not pipeline.is_file():
        names = sorted(p.parent.name for p in HERE.glob("*/pipeline.flow"))
        print(f"usage: python examples/run.py NAME[/FLOW] [dslc run options]; NAME is one of {', '.join(names)}")
        return 2
    folder = HERE / name
    service = None
    # a service on a port of its own choosing writes its settings here (orders_db: a database)
    settings = folder / "target" / "service.env"
    settings.unlink(missing_ok=True)
    if (folder / "service.py").is_file():
        service = subprocess.Popen([sys.executable, str(folder / "service.py"), "8765"], cwd=folder)
        _wait_for_service(8765, settings, service)
    try:
        extra = argv[1:]
        for secrets in (folder / "secrets.env", settings):
            if secrets.is_file() and "--secrets" not in extra:
                # the example's token for its own local service (a real one stays out of the
                # repository), or the password and port of the database it started
                extra = ["--secrets", str(secrets), *extra]
        command = [sys.executable, "-m", "dslc.compiler.cli", "run", str(pipeline), *extra]
        return subprocess.call(command)
    finally:
        if service is not None:
            service.terminate()
            service.wait(timeout=10)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
