"""Which test files share a server that a session fixture starts in a JVM of its own (the Spark
Connect server, the standalone cluster: tests/e2e/conftest.py), and an xdist scheduler that hands
each such set of files to one worker as one unit of work.

Session fixtures live once per worker process; with `--dist loadfile` the files that ask for the
Connect server used to land on both workers, and each started one (about 15 s of CPU on two
cores). Grouped, the server starts once per test run. Everything else is scheduled file by file
as before, in the order tests/conftest.py gives.
"""
from __future__ import annotations

import re
from pathlib import Path

#: the session fixtures whose server every file asking for it shares (checked in this order)
SHARED_SERVERS = ("connect_server", "standalone_cluster")


def shared_server(path: Path) -> str | None:
    """The first of SHARED_SERVERS that a test function of the file at `path` takes as a
    parameter, or None. Read from the source: xdist's controller schedules node ids and never
    imports the test files."""
    try:
        text = path.read_text()
    except OSError:
        return None
    return next((name for name in SHARED_SERVERS if re.search(rf"def test_\w+\([^)]*\b{name}\b", text)), None)


def scheduler(config, log):
    """xdist's LoadFileScheduling, with the files sharing a server as one scope."""
    from xdist.scheduler import LoadFileScheduling

    groups: dict[str, str | None] = {}

    class SharedServerScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            if path not in groups:
                groups[path] = shared_server(Path(config.rootpath) / path)
            return f"shared server {groups[path]}" if groups[path] else path

    return SharedServerScheduling(config, log)
