"""TIER BATCH before the job's pass: the request keys without a stored answer sent to the
provider's Batch API, and its answers written to the answer store, where the pass finds them.

1. Resume: the operator's batch records in the store are batches of a run that was stopped. A
   record with the provider's batch id is polled again; one with only its input file had its
   batch created (or not) by a run killed in between: the provider's list says which, and the
   batch is created from that file if not; one without a file's id is looked for among the
   provider's files by its name (the kill fell after the upload) and, found, taken up the same
   way; not found, it is dropped, its keys sent anew.
2. The keys: each distinct row's request key (the key an online run would send), those with an
   answer younger than TTL left out, and those in a batch still running.
3. Submit: the keys as JSONL lines (`custom_id` = the key's SHA-256), cut at 50,000 lines or
   200 MB; for each batch the record and its lines are written to the store before its file is
   uploaded, the file's id as soon as it is, the batch's id as soon as it is created. With a
   BUDGET the lines beyond what it still allows wait for the next run.
4. Poll every running batch, with a pause growing from 0.2 s to 30 s while nothing changes,
   reporting its status and counts (live progress); an ended batch is collected: its output and
   error files downloaded, each answer judged as the online call judges one (RETURNS checked),
   stored with what Spark joins it by, its line dropped.
5. A line the batch could not answer (an error status, an answer that does not fit, expired,
   cancelled, missing) is sent once more in a new batch, or left for the job's pass to send
   online (ON BATCH FAILURE ONLINE); a second failure is final: the pass gives the element that
   error and ON ERROR decides.

Nothing here is Spark's: runtime/spark/provider_batches.py hands the rows in and the figures out.
"""
from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from dslc.runtime.config import Enrich
from dslc.runtime.limits.money import NANO, amount_text, budget_counter
from dslc.runtime.limits.tokens import assumed_completion
from dslc.runtime.store.base import AnswerStore, Join
from dslc.runtime.store.ledger import FAILED, ONLINE, SENT, BatchRecord, LineRecord, custom_id
from dslc.runtime.wrappers.joinable import Joinable

from . import lines as batch_lines
from .api import BatchApi

POLL_S = (0.2, 30.0)
TERMINAL = ("completed", "failed", "expired", "cancelled")
ATTEMPTS = 2                   # a line is sent at most twice in one run
_PUT = 50_000                  # answers per write to the store: one transaction per batch of the provider's size

Maker = Callable[[], tuple[dict[str, Any], int]]    # a row's request body and prompt tokens, made when sent


@dataclass
class Figures:
    """What the batches of one operator did in this run, as the live table and metrics show it."""

    batches: int = 0
    running: int = 0
    lines: int = 0
    done: int = 0
    failed: int = 0
    online: int = 0
    left_out: int = 0          # keys a BUDGET kept out of this run's batches
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None
    statuses: dict[str, str] = field(default_factory=dict)    # provider batch id -> status

    def metrics(self) -> dict[str, Any]:
        """The figures as an operator's metrics (added up with its pass's, runtime/metrics.py)."""
        out: dict[str, Any] = {"batches": self.batches, "batches_running": self.running, "batch_lines": self.lines,
                               "batch_lines_done": self.done, "batch_lines_failed": self.failed,
                               "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                               "total_tokens": self.prompt_tokens + self.completion_tokens}
        if self.cost_usd is not None:
            out["cost_usd"] = round(self.cost_usd, 9)
        return out


class BatchRunner:
    """The provider batches of one TIER BATCH operator in one run."""

    def __init__(self, config: Enrich, call: Any, store: AnswerStore, api: BatchApi, *,
                 report: Callable[[Figures], None] | None = None, say: Callable[[str], None] | None = None,
                 poll_s: tuple[float, float] = POLL_S, max_lines: int = batch_lines.MAX_LINES) -> None:
        assert config.store is not None
        self.config, self.call, self.store, self.api = config, call, store, api
        self.operator = config.name
        self.run_id = config.store.run
        self.url = api.url_path + call.endpoint
        self.joinable = Joinable(config, call)
        self.columns = call.request_columns() or ()
        self.figures = Figures(cost_usd=0.0 if config.price is not None else None)
        self.live: dict[str, BatchRecord] = {}
        self.resend: list[batch_lines.Request] = []
        self._args: dict[str, dict[str, Any]] = {}     # custom_id -> request columns, of this run's lines
        self._report = report or (lambda figures: None)
        self._say = say or (lambda text: None)
        self.poll_s = poll_s
        self.max_lines = max_lines          # lines per batch: the provider's limit (a SET of the Spark setting, runtime/run_env.py)
        self.completion_guess = assumed_completion(config.returns) if call.endpoint == "/chat/completions" else 0

    def say(self, text: str) -> None:
        self._say(f"'{self.operator}' (line {self.config.line}): {text}")

    # ----------------------------------------------------------------- the whole phase

    async def run(self, rows: Iterable[dict[str, Any]]) -> Figures:
        """Send what has no stored answer, collect every batch; the figures."""
        await self.resume()
        await self.submit(await self.to_send(rows), attempt=1)
        pause = self.poll_s[0]
        while self.live:
            changed = await self.poll()
            if self.resend:
                requests, self.resend = self.resend, []
                await self.submit(requests, attempt=ATTEMPTS)
            if self.live:
                pause = self.poll_s[0] if changed else min(self.poll_s[1], pause * 1.5)
                await asyncio.sleep(pause)
        self._report(self.figures)
        return self.figures

    async def resume(self) -> None:
        """Take up the batch records a stopped run left (step 1)."""
        for record in await self.store.batches(self.operator):
            if record.file_id is None:
                await self._find_upload(record)
            if record.batch_id is None and record.file_id is None:
                stale = await self.store.lines_of(self.operator, record.id)      # never uploaded: sent anew
                await self.store.drop_lines(self.operator, list(stale))
                await self.store.drop_batch(self.operator, record.id)
                continue
            if record.batch_id is None:
                found = await self.api.find(record.file_id, record.id)
                batch = found or await self.api.create(record.file_id, record.data["endpoint"], self._metadata(record.id))
                record.data.update(batch_id=batch["id"], status=batch.get("status"))
                await self.store.put_batch(record)
            self.live[record.id] = record
            self.figures.batches += 1
            self.figures.lines += int(record.data.get("lines", 0))
            self.say(f"resuming provider batch {record.batch_id} ({record.data.get('lines')} lines, "
                     f"{record.data.get('status')})")
        self._count_running()

    async def _find_upload(self, record: BatchRecord) -> None:
        """A record without its file's id: the run was killed while uploading, before or after the
        provider had the file. Its name says which record it was made for, so a file that arrived
        is used (its batch created below) instead of uploading the same lines again.

        The search looks at most at the provider's newest 10,000 batch files (BatchApi.find_file:
        10 pages of 1,000). A file older than those (an account uploading that many since) is not
        found: the record's lines are uploaded again in a new file and batch (the run says "provider
        batch ... created"), and the first file stays in the provider's file list, never run, until
        it expires (30 days by default for batch files) or is deleted. The tokens are paid once, as
        no batch ran over the first file; only the upload is repeated."""
        found = await self.api.find_file(_file_name(record.id), int(record.data.get("bytes", -1)))
        if found is not None:
            record.data["file_id"] = found["id"]
            await self.store.put_batch(record)

    async def to_send(self, rows: Iterable[dict[str, Any]]) -> list[batch_lines.Request]:
        """The rows' request keys that need a line (step 2)."""
        keyed: dict[str, tuple[str, dict[str, Any], Maker | None]] = {}
        keyed_request = getattr(self.call, "keyed_request", None)    # the messages filled once (calls/model.py)
        for row in rows:
            if keyed_request is not None:
                made = keyed_request(row)
                key, maker = made if made is not None else (None, None)
            else:
                key, maker = self.call.request_key(row), None
            if key is not None:
                keyed.setdefault(custom_id(key), (key, row, maker))
        answered: set[str] = set()
        keys = [key for key, _, _ in keyed.values()]
        for start in range(0, len(keys), 1000):
            answered.update(await self.store.get_many(self.operator, keys[start:start + 1000],
                                                      self.config.store.ttl_s))
        waiting = [cid for cid, (key, _, _) in keyed.items() if key not in answered]
        known = await self.store.lines(self.operator, waiting)
        out = []
        for cid in waiting:
            line = known.get(cid)
            if line is not None and line.state == SENT and line.batch in self.live:
                continue                       # in a batch still running: collected with it
            request = self._request(cid, *keyed[cid])
            if request is not None:
                out.append(request)
        return out

    def _request(self, cid: str, key: str, row: dict[str, Any], maker: Maker | None = None) -> batch_lines.Request | None:
        try:
            body, tokens = maker() if maker is not None else self.call.request(row)
        except Exception:  # noqa: BLE001 - a row that cannot make its request: the pass gives it its error
            return None
        args = {c: row.get(c) for c in self.columns}
        self._args[cid] = args
        return batch_lines.Request(cid, key, batch_lines.compact(args),
                                   batch_lines.request_line(cid, self.url, body), tokens)

    # ----------------------------------------------------------------- submitting

    async def submit(self, requests: list[batch_lines.Request], attempt: int) -> None:
        """Create batches for the requests (step 3), within what the BUDGET still allows."""
        requests, reserved = await self.within_budget(requests)
        for chunk, units in zip(batch_lines.split(requests, self.max_lines), self._split_units(requests, reserved)):
            await self._create(chunk, attempt, units)
        self._count_running()
        self._report(self.figures)

    async def _create(self, chunk: list[batch_lines.Request], attempt: int, reserved: int) -> None:
        local = uuid.uuid4().hex[:16]
        content = b"".join(r.line for r in chunk)
        record = BatchRecord(self.operator, local, {
            "created": time.time(), "run": self.run_id, "attempt": attempt, "lines": len(chunk),
            "bytes": len(content), "endpoint": self.url, "status": "uploading", "reserved": reserved})
        await self.store.put_batch(record)
        await self.store.put_lines(self.operator, [LineRecord(r.custom_id, r.key, r.args, local, attempt, SENT,
                                                              None, self.run_id) for r in chunk])
        uploaded = await self.api.upload(_file_name(local), content)
        record.data["file_id"] = uploaded["id"]
        await self.store.put_batch(record)
        batch = await self.api.create(uploaded["id"], self.url, self._metadata(local))
        record.data.update(batch_id=batch["id"], status=batch.get("status"))
        await self.store.put_batch(record)
        self.live[local] = record
        self.figures.batches += 1
        self.figures.lines += len(chunk)
        self.say(f"provider batch {batch['id']} created: {len(chunk)} lines"
                 + (f" (sent again: attempt {attempt})" if attempt > 1 else ""))

    def _metadata(self, local: str) -> dict[str, str]:
        return {"dslc_operator": self.operator[:512], "dslc_batch": local}

    # ----------------------------------------------------------------- the budget

    def _units(self, request: batch_lines.Request) -> int:
        """What a request is estimated to spend of the operator's BUDGET."""
        budget, price = self.config.budget, self.config.price
        assert budget is not None
        if budget.unit == "CALLS":
            return 1
        if budget.unit == "TOKENS":
            return request.prompt_tokens + self.completion_guess
        assert price is not None
        return int(price.cost(1, request.prompt_tokens, self.completion_guess) * NANO) + 1

    def _counter(self) -> str:
        budget = self.config.budget
        assert budget is not None
        prefix = {"CALLS": "budget", "TOKENS": "budget-tokens"}.get(budget.unit)
        return f"{prefix}:{self.operator}:{self.run_id}" if prefix else budget_counter(self.operator, self.run_id)

    def _limit(self) -> int:
        budget = self.config.budget
        assert budget is not None
        return round(budget.amount * NANO) if budget.unit == "USD" else int(budget.amount)

    async def within_budget(self, requests: list[batch_lines.Request]) -> tuple[list[batch_lines.Request], list[int]]:
        """The requests the BUDGET still allows (in order) and what each reserved of it; the
        others are left for the next run."""
        if self.config.budget is None or not requests:
            return requests, [0] * len(requests)
        units = [self._units(r) for r in requests]
        left = self._limit() - await self.store.spend(self._counter(), 0)
        taken, total = 0, 0
        while taken < len(requests) and total + units[taken] <= left:
            total += units[taken]
            taken += 1
        if total:
            await self.store.spend(self._counter(), total)
        if taken < len(requests):
            self.figures.left_out += len(requests) - taken
            self.say(f"BUDGET {amount_text(self.config.budget.amount)} {self.config.budget.unit}: "
                     f"{len(requests) - taken} lines wait for the next run")
        return requests[:taken], units[:taken]

    def _split_units(self, requests: list[batch_lines.Request], units: list[int]) -> list[int]:
        """What each batch of `split(requests)` reserved."""
        out, start = [], 0
        for chunk in batch_lines.split(requests, self.max_lines):
            out.append(sum(units[start:start + len(chunk)]))
            start += len(chunk)
        return out

    async def _settle(self, record: BatchRecord, spent: int) -> None:
        """A collected batch's reservation replaced by what it cost (this run's batches only)."""
        if self.config.budget is not None and record.data.get("run") == self.run_id:
            difference = spent - int(record.data.get("reserved", 0))
            if difference:
                await self.store.spend(self._counter(), difference)

    # ----------------------------------------------------------------- polling and collecting

    async def poll(self) -> bool:
        """Look at every running batch once (step 4); True when something changed."""
        changed = False
        for local, record in list(self.live.items()):
            batch = await self.api.retrieve(record.batch_id)
            status, counts = batch.get("status"), batch.get("request_counts") or {}
            if status != record.data.get("status") or counts != record.data.get("counts"):
                changed = True
                if status != record.data.get("status"):
                    self.say(f"provider batch {record.batch_id}: {status} ({counts.get('completed', 0)} of "
                             f"{counts.get('total') or record.data.get('lines')} lines done, {counts.get('failed', 0)} failed)")
                record.data.update(status=status, counts=counts)
                await self.store.put_batch(record)
            self.figures.statuses[record.batch_id] = status
            if status in TERMINAL:
                await self.collect(record, batch)
                del self.live[local]
        self._count_running()
        self._report(self.figures)
        return changed

    def _count_running(self) -> None:
        self.figures.running = len(self.live)

    async def collect(self, record: BatchRecord, batch: dict[str, Any]) -> None:
        """An ended batch's answers into the store; its failed lines sent again or failed (step 5)."""
        sent = await self.store.lines_of(self.operator, record.id)
        found: dict[str, batch_lines.Outcome] = {}
        for file_id in (batch.get("output_file_id"), batch.get("error_file_id")):
            if file_id:
                for outcome in batch_lines.outcomes(await self.api.content(file_id)):
                    if outcome.custom_id in sent:
                        found[outcome.custom_id] = outcome
        answers: list[tuple[str, Any]] = []
        joins: dict[str, Join] = {}
        failures: dict[str, str] = {}
        spent = 0
        for cid, line in sent.items():
            outcome = found.get(cid)
            if outcome is None or outcome.body is None:
                failures[cid] = json.dumps({"message": outcome.error if outcome else _missing(batch)})
                continue
            spent += self._count_usage(outcome.body.get("usage"))
            value, error, raw = batch_lines.judged(self.call, outcome.body)
            if error is not None:
                failures[cid] = json.dumps({"message": error, "raw": raw})
                continue
            answers.append((line.key, value))
            join = self._join(line, value)
            if join is not None:
                joins[line.key] = join
        for start in range(0, len(answers), _PUT):
            part = answers[start:start + _PUT]
            await self.store.put_many(self.operator, part, self.config.store.ttl_s,
                                      {k: joins[k] for k, _ in part if k in joins})
        await self.store.drop_lines(self.operator, [cid for cid in sent if cid not in failures])
        await self._fail(sent, failures)
        await self._settle(record, spent if self.config.budget is None or self.config.budget.unit != "CALLS"
                           else int(record.data.get("reserved", 0)))
        await self.store.drop_batch(self.operator, record.id)
        self.figures.done += len(answers)
        self.say(f"provider batch {record.batch_id} collected: {len(answers)} answers stored, "
                 f"{len(failures)} lines failed")

    def _count_usage(self, usage: Any) -> int:
        """Add an answer's tokens and cost; what it spent of the BUDGET's unit."""
        usage = usage if isinstance(usage, dict) else {}
        prompt = usage.get("prompt_tokens") if isinstance(usage.get("prompt_tokens"), int) else 0
        completion = usage.get("completion_tokens") if isinstance(usage.get("completion_tokens"), int) else 0
        self.figures.prompt_tokens += prompt
        self.figures.completion_tokens += completion
        price = self.config.price
        cost = price.cost(1, prompt, completion) if price is not None else 0.0
        if self.figures.cost_usd is not None:
            self.figures.cost_usd += cost
        budget = self.config.budget
        if budget is None or budget.unit == "CALLS":
            return 1
        return prompt + completion if budget.unit == "TOKENS" else int(cost * NANO) + 1

    def _join(self, line: LineRecord, value: Any) -> Join | None:
        if self.joinable.variant is None or line.args is None:
            return None
        args = self._args.get(line.custom_id)         # made in this run: not parsed back from the store
        entry = self.joinable.entry(args if args is not None else json.loads(line.args), value, line.args)
        return Join(self.joinable.variant, *entry) if entry is not None else None

    async def _fail(self, sent: dict[str, LineRecord], failures: dict[str, str]) -> None:
        """Failed lines: sent again (a first attempt), left to the pass online, or failed for good."""
        if not failures:
            return
        again, kept = [], []
        online = self.config.batch_failure == "ONLINE"
        for cid, error in failures.items():
            line = sent[cid]
            if line.attempt < ATTEMPTS and not online:
                again.append(line)
                continue
            state = ONLINE if online and line.attempt < ATTEMPTS else FAILED
            kept.append(LineRecord(cid, line.key, line.args, "", line.attempt, state, error, self.run_id))
        if kept:
            await self.store.put_lines(self.operator, kept)
            self.figures.failed += sum(1 for line in kept if line.state == FAILED)
            self.figures.online += sum(1 for line in kept if line.state == ONLINE)
        for line in again:
            request = self._request(line.custom_id, line.key, json.loads(line.args) if line.args else {})
            if request is not None:
                self.resend.append(request)
            else:       # cannot be made again here (no request columns kept): failed for good
                await self.store.put_lines(self.operator, [LineRecord(line.custom_id, line.key, line.args, "",
                                                                      line.attempt, FAILED, failures[line.custom_id],
                                                                      self.run_id)])
                self.figures.failed += 1


def _missing(batch: dict[str, Any]) -> str:
    """Why a line of an ended batch has no answer in its files."""
    status = batch.get("status")
    if status == "failed":
        errors = ((batch.get("errors") or {}).get("data") or [{}])
        return f"the provider's batch failed: {errors[0].get('code')}: {errors[0].get('message')}"
    if status == "cancelled":
        return "the provider's batch was cancelled before it answered this line"
    return f"the provider's batch ended {status} without a line for this request"


def _file_name(local: str) -> str:
    """The name a batch record's input file is uploaded under: how a resumed run finds it."""
    return f"dslc-{local}.jsonl"
