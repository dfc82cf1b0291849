"""Helpers of the conformance suite (see conftest.py)."""
from __future__ import annotations

import asyncio
import itertools
import json
import os
import runpy
import threading
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dslc.compiler.pipeline import compile_file

_ids = itertools.count()

HEADS = {
    "BATCH": "PIPELINE contract MODE BATCH;",
    "STREAMING": "PIPELINE contract MODE STREAMING CHECKPOINT 'chk' TRIGGER AVAILABLE NOW;",
}


class PipelineFolder:
    """One pipeline in its own folder: data files, user modules (each under a name unique in the
    test run: Spark ships modules by file name and refuses a second, different file of one name),
    and the job run in this process on the shared SparkSession."""

    def __init__(self, spark, folder: Path) -> None:
        self.spark = spark
        self.folder = folder
        self.modules: dict[str, str] = {}

    def rows_file(self, relative: str, rows: list[dict]) -> Path:
        """JSON lines at `relative` (a folder per SOURCE: pass 'in/orders/1.json')."""
        path = self.folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        return path

    def move_in(self, folder: str, name: str, rows: list[dict]) -> None:
        """JSON lines written beside `folder`, then moved in: a streaming source sees the file
        whole, at one moment."""
        staged = self.rows_file(f"staging/{name}", rows)
        target = self.folder / folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(staged, target)

    def text_file(self, relative: str, text: str) -> Path:
        path = self.folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path

    def module(self, name: str, code: str) -> str:
        """Write a user module; `{name}` in later flow texts becomes its unique module name."""
        unique = f"{name}_{next(_ids)}_{os.getpid()}"
        self.modules[name] = unique
        (self.folder / f"{unique}.py").write_text(code)
        return unique

    def text(self, flow: str, mode: str | None = None) -> str:
        for name, unique in self.modules.items():
            flow = flow.replace(f"'{name}:", f"'{unique}:")
        return (HEADS[mode] + "\n" if mode else "") + flow

    def write(self, flow: str, mode: str | None = None) -> Path:
        path = self.folder / "pipeline.flow"
        path.write_text(self.text(flow, mode))
        return path

    def run(self, flow: str, mode: str | None = None, **options: Any) -> str:
        """Compile the pipeline beside its data and run the job; returns the job's text."""
        path = self.write(flow, mode)
        job = self.folder / "job.py"
        code = compile_file(path, job_folder=str(self.folder), **options)
        job.write_text(code)
        os.environ.pop("DSLC_FLOW_FOLDER", None)
        runpy.run_path(str(job), run_name="__main__")
        return code

    def read(self, relative: str, fmt: str = "parquet") -> list[dict]:
        """Every row a sink wrote, as dicts (a streaming micro-batch folder's `batch_id` dropped)."""
        path = self.folder / relative
        if not any(f.is_file() and not f.name.startswith(("_", ".")) and "_spark_metadata" not in f.parts
                   for f in path.rglob("*")):
            return []               # nothing committed (a folder Spark left behind holds no data)
        reader = self.spark.read
        if fmt == "csv":
            reader = reader.option("header", "true")
        df = getattr(reader, fmt)(str(path))
        if "batch_id" in df.columns:
            df = df.drop("batch_id")
        return [r.asDict(recursive=True) for r in df.collect()]

    def committed(self, relative: str) -> list[dict]:
        """A running streaming sink's committed rows so far (none while its first micro-batch
        committed no file)."""
        try:
            return self.read(relative)
        except Exception:          # noqa: BLE001 - UNABLE_TO_INFER_SCHEMA: nothing committed yet
            return []


def by(rows: list[dict], *keys: str) -> list[tuple]:
    """Rows as sorted tuples of `keys`, for order-insensitive comparison."""
    return sorted((tuple(r.get(k) for k in keys) for r in rows), key=repr)


@dataclass
class Reply:
    status: int = 200
    body: Any = "default"       # "default": {"key": key, "value": "v-" + key}; str: sent raw
    delay_s: float = 0.0


class Service:
    """GET /kv/{key}: scripted answers per key (a list is used in turn, the last one repeats),
    call counts per key, the most requests it ever had at once, and the raw paths it saw."""

    def __init__(self) -> None:
        self.server = None
        self.scripts: dict[str, list[Reply]] = {}
        self.calls: Counter[str] = Counter()
        self.raw_paths: list[str] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.port}"

    @property
    def total(self) -> int:
        return sum(self.calls.values())

    def script(self, key: str, *replies: Reply) -> None:
        self.scripts[key] = list(replies)

    def app(self):
        from aiohttp import web

        async def handle(request: web.Request) -> web.StreamResponse:
            key = request.match_info["key"]
            with self._lock:
                n = self.calls[key]
                self.calls[key] += 1
                self.raw_paths.append(request.raw_path)
                self.in_flight += 1
                self.max_in_flight = max(self.max_in_flight, self.in_flight)
            try:
                replies = self.scripts.get(key) or [Reply()]
                reply = replies[min(n, len(replies) - 1)]
                if reply.delay_s:
                    await asyncio.sleep(reply.delay_s)
                body = {"key": key, "value": f"v-{key}"} if reply.body == "default" else reply.body
                text = body if isinstance(body, str) else json.dumps(body)
                return web.Response(status=reply.status, text=text, content_type="application/json")
            finally:
                with self._lock:
                    self.in_flight -= 1

        app = web.Application()
        app.router.add_get("/kv/{key}", handle)
        return app
