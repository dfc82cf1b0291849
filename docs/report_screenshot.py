"""Make docs/images/report.png, the report screenshot of docs/operations.md ("Watching a run"):
a real run of bench/diagnosis.py's `service` case (a local service answering every third request
with HTTP 503) with `dslc run --report`, drawn by headless Chromium.

    .venv/bin/python docs/report_screenshot.py
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "report"))

from browser import screenshot  # noqa: E402

from bench.diagnosis import Service, write_case  # noqa: E402

OUT = ROOT / "docs" / "images" / "report.png"


def main() -> int:
    service = Service()
    try:
        with tempfile.TemporaryDirectory(prefix="dslc-screenshot-") as root:
            flow = write_case("service", Path(root) / "service_503", service.port, rows=1500)
            page = Path(root) / "report.html"
            env = {k: v for k, v in os.environ.items() if k not in ("DSLC_FLOW_FOLDER", "SPARK_REMOTE")}
            subprocess.run([sys.executable, "-m", "dslc.compiler.cli", "run", str(flow), "--report", str(page)],
                           env=env, check=True, timeout=600)
            OUT.parent.mkdir(parents=True, exist_ok=True)
            screenshot(page, OUT, size="1100,1500")
    finally:
        service.stop()
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
