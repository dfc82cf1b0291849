"""`.ci/install`, the one set-up script of the README and CI: on a machine without Java 17 or
Graphviz it asks apt-get for exactly what is missing (issue #16 item 9). apt-get and java are
stand-ins here (the packages cannot be removed from the test machine); the script is real."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _bin(folder: Path, name: str, body: str) -> None:
    path = folder / name
    path.write_text("#!/bin/bash\n" + body + "\n")
    path.chmod(0o755)


def _system_step(tmp_path: Path, java_version: str | None, node: bool = True, postgres: bool = True) -> list[str]:
    """Run `.ci/install system` with a PATH holding only stand-ins; the apt-get calls it made."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "apt.log"
    _bin(bin_dir, "apt-get", f'echo "$*" >> {log}')
    _bin(bin_dir, "id", "echo 0")
    _bin(bin_dir, "dirname", '/usr/bin/dirname "$@"')
    _bin(bin_dir, "python3", f'exec {sys.executable} "$@"')     # a Python with venv and ensurepip
    if node:    # Node.js and npm are there (the tests of editors/vscode need them)
        _bin(bin_dir, "node", "echo v20.0.0")
        _bin(bin_dir, "npm", "echo 10.0.0")
    jar = tmp_path / "postgresql.jar"
    if postgres:    # PostgreSQL's server and its JDBC driver are there
        _bin(bin_dir, "pg_ctlcluster", "true")
        jar.write_bytes(b"PK")
    if java_version is not None:
        _bin(bin_dir, "java", f"echo 'openjdk version \"{java_version}\" 2024-01-01' >&2")
    result = subprocess.run(["/bin/bash", str(ROOT / ".ci/install"), "system"],
                            env={"PATH": str(bin_dir), "DSLC_JDBC_JAR": str(jar)},
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return log.read_text().splitlines() if log.is_file() else []


@pytest.mark.parametrize("java_version", [None, "11.0.2", "1.8.0_402"])
def test_a_machine_without_java_17_graphviz_redis_or_chromium_gets_them_from_apt(tmp_path, java_version):
    calls = _system_step(tmp_path, java_version)
    assert calls[0] == "update -qq"
    installed = [c.split()[-1] for c in calls[1:]]
    assert installed == ["openjdk-17-jre-headless", "graphviz", "redis-server", "chromium"]
    assert all(c.startswith("install -y") for c in calls[1:])


def test_a_machine_without_node_gets_debians_nodejs_and_npm(tmp_path):
    calls = _system_step(tmp_path, "17.0.15", node=False)
    assert [c.split()[-1] for c in calls[1:]] == ["graphviz", "redis-server", "chromium", "nodejs", "npm"]


def test_a_machine_without_postgresql_gets_debians_server_and_jdbc_driver(tmp_path):
    calls = _system_step(tmp_path, "17.0.15", postgres=False)
    assert [c.split()[-1] for c in calls[1:]] == ["graphviz", "redis-server", "chromium", "postgresql",
                                                  "libpostgresql-jdbc-java"]


def test_java_17_or_newer_is_kept(tmp_path):
    calls = _system_step(tmp_path, "21.0.1")
    assert [c.split()[-1] for c in calls[1:]] == ["graphviz", "redis-server", "chromium"]


def test_readme_starts_with_the_two_commands_and_ci_runs_the_second():
    text = (ROOT / "README.md").read_text()
    block = re.search(r"```bash\n(.*?)```", text, re.S)
    assert block and text.index("```bash") < text.index("\n## ")
    setup, tests = [line.split("#")[0].strip() for line in block.group(1).strip().splitlines()]
    assert setup.startswith(".ci/install && ") and "examples/run.py" in setup
    assert tests == ".venv/bin/python -m pytest -q -n 2 --dist loadfile --durations=25"   # CI logs show the slowest
    ci = (ROOT / ".ci/run").read_text()
    assert ".ci/install" in ci and "README.md" in ci
    assert os.access(ROOT / ".ci/install", os.X_OK) and os.access(ROOT / ".ci/run", os.X_OK)
