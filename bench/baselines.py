"""What users write instead of ENRICH, for the same enrichment (GET {url}/{id} -> value).

These functions run on Spark's Python workers; they are written as a user would, with one
generous exception: the synchronous ones keep one keep-alive HTTP connection per thread instead
of opening a connection per call.
"""
from __future__ import annotations

import asyncio
import http.client
import json
import threading
import urllib.parse
from collections.abc import Callable, Iterator

import pyarrow as pa

_local = threading.local()


class SyncGet:
    """value = f(id): one blocking GET, on a keep-alive connection of the calling thread."""

    def __init__(self, url_template: str) -> None:
        parts = urllib.parse.urlsplit(url_template)
        self.host, self.port, self.path = parts.hostname, parts.port, parts.path

    def __call__(self, key: str) -> str | None:
        connection = getattr(_local, "connection", None)
        if connection is None:
            connection = _local.connection = http.client.HTTPConnection(self.host, self.port, timeout=30)
        try:
            connection.request("GET", self.path.replace("{id}", urllib.parse.quote(key, safe="")))
            response = connection.getresponse()
            body = response.read()
        except (http.client.HTTPException, OSError):
            _local.connection = None
            connection.close()
            raise
        return json.loads(body)["value"] if response.status == 200 else None


def gather_per_batch(url_template: str, concurrency: int) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The usual hand-written mapInArrow: per Arrow batch, asyncio.gather over its rows behind a
    semaphore of `concurrency` (one event loop and aiohttp session per partition)."""

    def enrich(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import aiohttp

        loop = asyncio.new_event_loop()

        async def open_session() -> aiohttp.ClientSession:
            return aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency))

        session = loop.run_until_complete(open_session())
        semaphore = asyncio.Semaphore(concurrency)

        async def one(key: str) -> str | None:
            async with semaphore:
                async with session.get(url_template.replace("{id}", urllib.parse.quote(key, safe=""))) as response:
                    if response.status != 200:
                        return None
                    return (await response.json())["value"]

        async def gather(keys: list[str]) -> list[str | None]:
            return await asyncio.gather(*(one(k) for k in keys))

        try:
            for batch in batches:
                values = loop.run_until_complete(gather(batch.column("id").to_pylist()))
                yield batch.append_column("value", pa.array(values, pa.string()))
        finally:
            loop.run_until_complete(session.close())
            loop.close()

    return enrich
