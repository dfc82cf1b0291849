"""What the answer store keeps of TIER BATCH's provider batches (runtime/batches/), beside the
answers: so that a run killed at any moment resumes the same batches and never submits a key
twice, and the job's pass knows what a batch could not answer.

- a batch record per provider batch of an operator, written before the batch is created and
  updated as it goes (its input file, the provider's batch id, status, counts, what its lines
  cost and reserved of a BUDGET), dropped once its answers are in the store;
- a line per request key sent in a batch: its `custom_id` (the key's SHA-256), the key, the
  request columns it came from (for Spark's join of stored answers), the batch it is in, its
  attempt, and its state: `sent` (in a batch), `failed` (the batch could not answer it; the
  error says why) or `online` (ON BATCH FAILURE ONLINE: the job's pass sends it). A line is
  dropped once its answer is stored.

Each backend keeps them in its own way (sqlite.py: two tables; redis.py: two hashes per operator).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

SENT, FAILED, ONLINE = "sent", "failed", "online"


def custom_id(key: str) -> str:
    """A batch line's `custom_id`: the request key's SHA-256 (64 hex digits, the API's limit)."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


@dataclass
class BatchRecord:
    """One provider batch of an operator (`id`: dslc's own, known before the provider's)."""

    operator: str
    id: str
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def batch_id(self) -> str | None:
        return self.data.get("batch_id")

    @property
    def file_id(self) -> str | None:
        return self.data.get("file_id")


@dataclass
class LineRecord:
    """One request key sent in a provider batch."""

    custom_id: str
    key: str
    args: str | None          # the request columns as JSON (None: unknown, the answer is not joinable)
    batch: str                # the BatchRecord id ("" once it failed)
    attempt: int
    state: str                # SENT, FAILED or ONLINE
    error: str | None = None
    run: str = ""             # the run that sent it (or decided its failure)

    def to_dict(self) -> dict[str, Any]:
        return {"custom_id": self.custom_id, "key": self.key, "args": self.args, "batch": self.batch,
                "attempt": self.attempt, "state": self.state, "error": self.error, "run": self.run}
