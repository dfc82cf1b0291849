"""Live progress plumbing without Spark: tasks' UDP datagrams reach the driver's collector, which
adds them up (running tasks' in flight against their CAPACITY, ended tasks' totals), ignores
datagrams without the run's token, and prints a line when the output is not a terminal."""
from __future__ import annotations

import io
import json
import socket
import time

from dslc.runtime.live_view import cell, format_line
from dslc.runtime.progress import TaskReporter, encode, parse_address
from dslc.runtime.spark.progress import ProgressCollector


def _figures(elements: int, in_flight: int, capacity: int = 10) -> dict:
    return {"enriched": {"elements_in": elements, "elements_out": elements - in_flight, "calls": elements,
                         "errors": 0, "retries": 1, "cache_hits": 0, "in_flight": in_flight, "capacity": capacity,
                         "latency_histogram": {"60": elements}, "store_hits": 2}}


def _wait_for(predicate, seconds: float = 10.0) -> None:
    deadline = time.time() + seconds
    while not predicate() and time.time() < deadline:
        time.sleep(0.05)


def test_tasks_figures_add_up_and_ended_tasks_stay_counted():
    out = io.StringIO()
    collector = ProgressCollector("127.0.0.1", stream=out)
    try:
        figures = {"a": _figures(30, 4), "b": _figures(20, 6)}
        reporters = [TaskReporter(collector.address, "chain#1", lambda t=t: figures[t], interval_s=0.1).start()
                     for t in ("a", "b")]
        _wait_for(lambda: (row := collector.view()["rows"]) and row[0]["elements_in"] == 50)
        [row] = collector.view()["rows"]
        assert (row["operator"], row["elements_in"], row["in_flight"], row["limit"]) == ("enriched", 50, 10, 20)
        # CAPACITY is per task: two tasks of CAPACITY 10 show 10/2x10, not a 10/20 no clause says (#48 item 15)
        assert cell(row, "in_flight") == "10/2x10" and "in_flight=10/2x10 " in format_line(collector.view())
        assert row["store_hits"] == 4 and row["p50_ms"] is not None        # an extra counter adds up too
        figures["a"] = _figures(40, 0)
        reporters[0].stop()                                  # a's last figures, as ended
        _wait_for(lambda: collector.view()["rows"][0]["limit"] == 10)
        [row] = collector.view()["rows"]
        assert (row["elements_in"], row["in_flight"], row["limit"]) == (60, 6, 10)
        assert cell(row, "in_flight") == "6/10"
        reporters[1].stop()
        _wait_for(lambda: collector.view()["rows"][0]["limit"] == 0)
        assert collector.view()["rows"][0]["elements_in"] == 60
    finally:
        collector.close()
    last = out.getvalue().splitlines()[-1]                   # the line printed when the job ends
    assert last.startswith("dslc: progress ") and "enriched elements_in=60 " in last and "store_hits=4" in last
    assert [p["operators"]["enriched"]["elements_in"] for p in collector.timeline][-1] == 60


def test_a_datagram_without_the_runs_token_is_ignored():
    collector = ProgressCollector("127.0.0.1", stream=io.StringIO())
    try:
        host, port, token = parse_address(collector.address)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sender:
            sender.sendto(encode("not-the-token", "t1", "chain#1", _figures(99, 1), False), (host, port))
            sender.sendto(b"{not json", (host, port))
            sender.sendto(encode(token, "t2", "chain#1", _figures(7, 1), False), (host, port))
        _wait_for(lambda: bool(collector.view()["rows"]))
        assert [r["elements_in"] for r in collector.view()["rows"]] == [7]
    finally:
        collector.close()


def test_a_large_snapshot_goes_without_its_histograms():
    operators = {f"op{i}": {**_figures(1, 0)["enriched"], "latency_histogram": {str(b): 1 for b in range(161)}}
                 for i in range(60)}
    data = encode("t", "task", "chain#1", operators, True)
    assert len(data) <= 60_000
    assert "latency_histogram" not in json.loads(data)["operators"]["op0"]
