"""Headless Chromium for the report's tests and docs/report_screenshot.py: the page's DOM as the
browser built it, and a screenshot. Flags keep it off the network and away from any profile."""
from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync")


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _run(page: Path, *args: str) -> subprocess.CompletedProcess:
    program = chromium()
    assert program, "chromium is missing: .ci/install installs it"
    with tempfile.TemporaryDirectory(prefix="dslc-chromium-") as profile:
        return subprocess.run([program, *FLAGS, f"--user-data-dir={profile}", *args, page.resolve().as_uri()],
                              capture_output=True, text=True, timeout=120)


def dump_dom(page: Path) -> str:
    """The DOM after the browser loaded the page (what it shows)."""
    done = _run(page, "--dump-dom")
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def screenshot(page: Path, png: Path, size: str = "1280,1600") -> Path:
    done = _run(page, f"--screenshot={png.resolve()}", f"--window-size={size}", "--hide-scrollbars")
    assert png.is_file(), done.stderr[-2000:]
    return png
