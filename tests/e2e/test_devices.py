"""The devices example end to end: a PYTHON split source (one Spark partition per split) and a
PROCESS reading broadcast thresholds; the expected output is computed in plain Python from the
generated logs and the threshold CSV files."""
from __future__ import annotations

import csv
import importlib.util
import json
import shutil
from pathlib import Path

import pytest
from jobs import run_flow

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "devices"
OPTIONS = {"devices": "6", "hours": "2", "per_hour": "12", "seed": "7"}   # as in pipeline.flow
pytestmark = pytest.mark.spark


def _generated_rows() -> list[dict]:
    spec = importlib.util.spec_from_file_location("devices_example", EXAMPLE / "devices.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    logs = module.DeviceLogs(OPTIONS)
    return [row for split in logs.splits() for row in logs.read(split)]


def _thresholds(folder: Path) -> dict[str, float]:
    limits: dict[str, float] = {}
    for path in sorted((folder / "data" / "thresholds").glob("*.csv")):
        for row in csv.DictReader(path.open()):
            if row["op"] == "delete":
                limits.pop(row["kind"], None)
            else:
                limits[row["kind"]] = float(row["max_temperature"])
    return limits


def test_devices_example_matches_plain_python(spark, tmp_path):
    folder = tmp_path / "devices"
    shutil.copytree(EXAMPLE, folder, ignore=shutil.ignore_patterns("target", "__pycache__", "job.py"))
    assert f"OPTIONS (devices = '{OPTIONS['devices']}'" in (folder / "pipeline.flow").read_text()
    run_flow(folder / "pipeline.flow")

    limits = _thresholds(folder)
    rows = [r for r in _generated_rows() if r["kind"] in limits]
    expected_alerts = {(r["device"], r["ts"].replace(tzinfo=None), r["temperature"])
                       for r in rows if r["temperature"] > limits[r["kind"]]}
    expected_counts: dict[str, list[int]] = {}
    for r in rows:
        count = expected_counts.setdefault(r["device"], [0, 0])
        count[0] += 1
        count[1] += r["temperature"] > limits[r["kind"]]

    alerts = spark.read.parquet(str(folder / "target/out/alerts")).collect()
    assert len(alerts) == len(expected_alerts)
    assert {(a.device, a.ts, a.temperature) for a in alerts} == expected_alerts
    assert expected_alerts, "the example should raise some alerts"
    per_device = [json.loads(line) for p in sorted((folder / "target/out/per_device").glob("*.json"))
                  for line in p.read_text().splitlines()]
    assert {d["device"]: [d["readings"], d["alerts"]] for d in per_device} == expected_counts
