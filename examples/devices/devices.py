"""User code of the devices example: a split-based log source and a threshold check.

`DeviceLogs` is a SOURCE FROM PYTHON class: `splits()` enumerates one split per (device, hour)
and `read(split)` generates that hour's readings. The readings are a pure function of the split
and the seed, so a re-read split (a retried task) yields the same rows.
"""
from __future__ import annotations

import random
from collections.abc import Iterator, Mapping
from datetime import datetime, timedelta, timezone

KINDS = ("freezer", "oven", "server")
BASE_TEMPERATURE = {"freezer": -18.0, "oven": 180.0, "server": 45.0}
START = datetime(2026, 11, 20, tzinfo=timezone.utc)


class DeviceLogs:
    """Generated device logs; OPTIONS devices, hours, per_hour and seed choose the size."""

    def __init__(self, options: dict[str, str]):
        self.devices = int(options.get("devices", "6"))
        self.hours = int(options.get("hours", "2"))
        self.per_hour = int(options.get("per_hour", "12"))
        self.seed = int(options.get("seed", "7"))

    def splits(self) -> list[dict]:
        return [{"device": f"dev-{d:02d}", "hour": h} for d in range(self.devices) for h in range(self.hours)]

    def discover(self, known: list[dict]) -> list[dict]:
        return [split for split in self.splits() if split not in known]

    def read(self, split: Mapping) -> Iterator[dict]:
        device, hour = split["device"], split["hour"]
        number = int(device.split("-")[1])
        kind = KINDS[number % len(KINDS)]
        rng = random.Random(f"{self.seed}/{device}/{hour}")
        for i in range(self.per_hour):
            yield {
                "device": device,
                "kind": kind,
                "ts": START + timedelta(hours=hour, minutes=i * 60 // self.per_hour),
                "temperature": round(BASE_TEMPERATURE[kind] + rng.gauss(0.0, 6.0), 2),
            }


def check(row: Mapping, thresholds: Mapping) -> Iterator[dict]:
    """One output row per reading whose kind has a threshold: 'alert' above it, 'ok' otherwise."""
    limit = thresholds.get(row["kind"])
    if limit is None:
        return
    status = "alert" if row["temperature"] > limit["max_temperature"] else "ok"
    yield {"device": row["device"], "ts": row["ts"], "temperature": row["temperature"],
           "max_temperature": limit["max_temperature"], "status": status}
