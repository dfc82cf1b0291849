"""The lifecycle of a user class wherever one is accepted (issue #16 item 8): `open()` before the
first element, `close()` after the last, also after a failure. BROADCAST ... USING PYTHON and
SINK ... TO PYTHON classes, in BATCH and STREAMING; PROCESS beside them as the reference."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from jobs import run_flow

pytestmark = pytest.mark.spark

FLOW = """
PIPELINE life MODE {mode};
SOURCE orders FROM JSON 'in/orders/' SCHEMA (id STRING, country STRING, amount DOUBLE);
SOURCE rule_updates FROM JSON 'in/rules/' SCHEMA (country STRING, max_amount DOUBLE);
BROADCAST rules FROM rule_updates USING PYTHON 'life:Rules';
STREAM flagged = PROCESS orders WITH BROADCAST rules USING PYTHON 'life:Flag' RETURNS (id STRING, over BOOLEAN);
SINK flagged TO PYTHON 'life:Collect';
"""

LIFE = '''
import json, os

EVENTS = {events!r}

def log(who, what, **extra):
    with open(EVENTS, "a") as f:
        f.write(json.dumps({{"pid": os.getpid(), "who": who, "what": what, **extra}}) + "\\n")

class Rules:
    def open(self): log("Rules", "open")
    def close(self): log("Rules", "close")
    def __call__(self, row, rules):
        log("Rules", "apply")
        if row["country"] == "boom":
            raise ValueError("bad rule")
        rules[row["country"]] = {{"max_amount": row["max_amount"]}}

class Flag:
    def open(self): log("Flag", "open")
    def close(self): log("Flag", "close")
    def __call__(self, row, rules):
        limit = rules.get(row["country"])
        return {{"id": row["id"], "over": limit is not None and row["amount"] > limit["max_amount"]}}

class Collect:
    def open(self): log("Collect", "open")
    def close(self): log("Collect", "close")
    def __call__(self, rows):
        for row in rows:
            if row["id"] == "boom":
                raise ValueError("bad row")
            log("Collect", "write", id=row["id"], over=row["over"])
'''


def _setup(tmp_path: Path, mode: str, rules: list[dict], orders: list[dict]) -> Path:
    head = "MODE STREAMING CHECKPOINT 'chk' TRIGGER AVAILABLE NOW" if mode == "STREAMING" else "MODE BATCH"
    # one module name per test: Spark refuses to ship a second, different file of the same name
    module = "life_" + "".join(c if c.isalnum() else "_" for c in tmp_path.name)
    (tmp_path / "pipeline.flow").write_text(FLOW.replace("MODE {mode}", head).replace("'life:", f"'{module}:"))
    (tmp_path / f"{module}.py").write_text(LIFE.format(events=str(tmp_path / "events.jsonl")))
    for folder, rows in (("rules", rules), ("orders", orders)):
        (tmp_path / "in" / folder).mkdir(parents=True)
        (tmp_path / "in" / folder / "1.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return tmp_path / "pipeline.flow"


def _events(tmp_path: Path, who: str) -> list[dict]:
    path = tmp_path / "events.jsonl"
    lines = path.read_text().splitlines() if path.is_file() else []
    return [e for e in map(json.loads, lines) if e["who"] == who]


def _bracketed(events: list[dict], inner: str) -> None:
    """In each process, every `inner` event lies between an open and its close, and each open is closed."""
    assert events, "the class was never called"
    for pid in {e["pid"] for e in events}:
        depth = 0
        for e in (e for e in events if e["pid"] == pid):
            if e["what"] == "open":
                assert depth == 0, f"open twice without close: {events}"
                depth = 1
            elif e["what"] == "close":
                assert depth == 1, f"close without open: {events}"
                depth = 0
            else:
                assert depth == 1, f"{e['what']} outside open()/close(): {events}"
        assert depth == 0, f"never closed: {events}"


RULES = [{"country": "NL", "max_amount": 10.0}, {"country": "DE", "max_amount": 100.0}]
ORDERS = [{"id": "o1", "country": "NL", "amount": 20.0}, {"id": "o2", "country": "DE", "amount": 20.0},
          {"id": "o3", "country": "FR", "amount": 1.0}]


@pytest.mark.parametrize("mode", ["BATCH", "STREAMING"])
def test_broadcast_and_sink_classes_are_opened_before_and_closed_after(spark, tmp_path, mode):
    run_flow(_setup(tmp_path, mode, RULES, ORDERS))
    rules = _events(tmp_path, "Rules")
    _bracketed(rules, "apply")
    assert [e["what"] for e in rules].count("apply") == 2
    sink = _events(tmp_path, "Collect")
    _bracketed(sink, "write")
    assert sorted((e["id"], e["over"]) for e in sink if e["what"] == "write") == \
        [("o1", True), ("o2", False), ("o3", False)]
    _bracketed(_events(tmp_path, "Flag"), "call")


@pytest.mark.parametrize("mode", ["BATCH", "STREAMING"])
def test_a_failing_broadcast_class_is_closed(spark, tmp_path, mode):
    flow = _setup(tmp_path, mode, RULES + [{"country": "boom", "max_amount": 0.0}], ORDERS)
    with pytest.raises(Exception, match="bad rule"):
        run_flow(flow)
    rules = _events(tmp_path, "Rules")
    assert [e["what"] for e in rules][0] == "open" and [e["what"] for e in rules][-1] == "close"


@pytest.mark.parametrize("mode", ["BATCH", "STREAMING"])
def test_a_failing_sink_class_is_closed(spark, tmp_path, mode):
    flow = _setup(tmp_path, mode, RULES, ORDERS + [{"id": "boom", "country": "NL", "amount": 1.0}])
    with pytest.raises(Exception, match="bad row"):
        run_flow(flow)
    sink = _events(tmp_path, "Collect")
    assert sink and sink[0]["what"] == "open"
    _bracketed(sink, "write")
