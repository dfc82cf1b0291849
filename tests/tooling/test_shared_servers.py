"""The files that share a session fixture's server are one unit of work for xdist (tests/shared_servers.py)."""
from __future__ import annotations

from pathlib import Path

from shared_servers import shared_server

TESTS = Path(__file__).resolve().parents[1]


def test_the_files_asking_for_a_server_are_found_from_their_source(tmp_path):
    assert shared_server(TESTS / "e2e/test_spark_connect_streaming.py") == "connect_server"
    assert shared_server(TESTS / "e2e/test_live_progress.py") == "connect_server"     # one test of several
    assert shared_server(TESTS / "e2e/test_standalone_cluster.py") == "standalone_cluster"
    assert shared_server(TESTS / "e2e/test_store_cluster.py") is None                 # its own local-cluster
    spread = tmp_path / "test_spread.py"
    spread.write_text("def test_a(tmp_path,\n           connect_server):\n    pass\n"
                      "def helper(standalone_cluster):\n    pass\n")
    assert shared_server(spread) == "connect_server"
    spread.write_text("def helper(connect_server):\n    pass\n")
    assert shared_server(spread) is None and shared_server(tmp_path / "missing.py") is None
