"""The provider's Files and Batches API (OpenAI's, which OpenAI-compatible providers copy), as TIER
BATCH uses it from the job's driver: upload a JSONL file (`POST {AT}/files`, multipart, purpose
`batch`), create a batch (`POST {AT}/batches`, completion window 24h), retrieve, find (list batches or files),
cancel, and download a file's content (`GET {AT}/files/{id}/content`).

The operator's HEADERS go with every request (its `${NAME}` secrets filled from the values the
driver read), never into a message: errors name the AT as written. A request the provider
cannot take now (429, 5xx, a dropped connection) is sent again after a growing pause, a few
times; other refusals are BatchApiError at once.
"""
from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

import aiohttp
import yarl

from dslc.runtime.calls import error_body, sessions
from dslc.runtime.calls.url import redact_url
from dslc.runtime.config import EmbeddingCall, ModelCall
from dslc.runtime.secrets import Secrets

ATTEMPTS = 6
PAUSE_S = (0.5, 20.0)


class BatchApiError(RuntimeError):
    """The provider refused a Files or Batches request (or could not be reached)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class BatchApi:
    """One operator's client of the provider's Files and Batches API (an async context manager)."""

    def __init__(self, call: ModelCall | EmbeddingCall, secrets: Secrets | None = None) -> None:
        secrets = self.secrets = secrets or Secrets()
        self.base_url = secrets.fill(call.base_url.rstrip("/"))
        self.shown_url = redact_url(call.base_url.rstrip("/"))
        # the JSON headers are aiohttp's to set (multipart uploads have their own Content-Type)
        self.headers = {name: secrets.fill(value) for name, value in call.headers
                        if name.lower() not in ("content-type", "accept")}
        self._session: aiohttp.ClientSession | None = None
        self._call = call

    async def __aenter__(self) -> BatchApi:
        # the CAs trusted as online calls trust them: OPTIONS (ca_file = ...) / (verify = 'false')
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None, sock_connect=30,
                                                                            sock_read=600),
                                              connector=aiohttp.TCPConnector(ssl=sessions.tls_context(self._call)))
        return self

    async def __aexit__(self, *exc: Any) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    @property
    def url_path(self) -> str:
        """The path every batch line's `url` starts with: the AT URL's (`/v1`)."""
        return yarl.URL(self.base_url).path.rstrip("/")

    async def _request(self, method: str, path: str, *, json: Any = None, data: Any = None,
                       params: dict[str, str] | None = None, raw: bool = False) -> Any:
        assert self._session is not None, "BatchApi used outside `async with`"
        pause = PAUSE_S[0]
        for attempt in range(1, ATTEMPTS + 1):
            body = data() if callable(data) else data      # a multipart form is read once: made anew each time
            try:
                async with self._session.request(method, self.base_url + path, json=json, data=body, params=params,
                                                 headers=self.headers) as response:
                    if response.status == 429 or response.status >= 500:
                        if attempt < ATTEMPTS:
                            await asyncio.sleep(pause)
                            pause = min(PAUSE_S[1], pause * 2)
                            continue
                    if not 200 <= response.status < 300:
                        text = error_body.shown(await error_body.read(response), self.secrets)
                        raise BatchApiError(f"HTTP {response.status} from {self.shown_url}{_shown(path)}: {text}",
                                            response.status)
                    return await response.read() if raw else await response.json(content_type=None)
            except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
                if attempt == ATTEMPTS:
                    raise BatchApiError(f"{self.shown_url}{_shown(path)} cannot be reached: {type(exc).__name__}: "
                                        f"{self.secrets.mask(str(exc))}") from None
                await asyncio.sleep(pause)
                pause = min(PAUSE_S[1], pause * 2)
        raise AssertionError("unreachable")   # pragma: no cover

    async def upload(self, name: str, content: bytes) -> dict[str, Any]:
        """Upload a batch input file; the File object."""
        def form() -> aiohttp.FormData:
            made = aiohttp.FormData()
            made.add_field("purpose", "batch")
            made.add_field("file", content, filename=name, content_type="application/jsonl")
            return made

        return await self._request("POST", "/files", data=form)

    async def create(self, file_id: str, endpoint: str, metadata: dict[str, str]) -> dict[str, Any]:
        """Create a batch over an uploaded file; the Batch object."""
        return await self._request("POST", "/batches", json={"input_file_id": file_id, "endpoint": endpoint,
                                                              "completion_window": "24h", "metadata": metadata})

    async def retrieve(self, batch_id: str) -> dict[str, Any]:
        return await self._request("GET", f"/batches/{batch_id}")

    async def cancel(self, batch_id: str) -> dict[str, Any]:
        return await self._request("POST", f"/batches/{batch_id}/cancel")

    async def _listed(self, path: str, params: dict[str, str], pages: int) -> AsyncIterator[dict[str, Any]]:
        """The items of a list endpoint (`GET /batches`, `GET /files`), newest first, from at most
        `pages` pages: the next page is the one `after` the last item's id, while the provider says
        it `has_more` (OpenAI's cursor paging, which the SDK's CursorPage follows too)."""
        after = None
        for _ in range(pages):
            page = await self._request("GET", path, params={**params, **({"after": after} if after else {})})
            items = page.get("data") or []
            for item in items:
                yield item
            if not page.get("has_more") or not items:
                return
            after = items[-1]["id"]

    async def find(self, file_id: str, local_id: str, pages: int = 20) -> dict[str, Any] | None:
        """The batch created over `file_id` (or marked with dslc's `local_id`), looked for among the
        newest `pages` pages of the list: a batch created by a run killed before it wrote its id."""
        # the Batches list pages by `after` and `limit` (1 to 100) only, newest first
        async with aclosing(self._listed("/batches", {"limit": "100"}, pages)) as batches:
            async for batch in batches:
                if batch.get("input_file_id") == file_id or (batch.get("metadata") or {}).get("dslc_batch") == local_id:
                    return batch
        return None

    async def find_file(self, name: str, size: int, pages: int = 10) -> dict[str, Any] | None:
        """The batch input file called `name` of `size` bytes, looked for among the newest `pages`
        pages of the list: a file uploaded by a run killed before it wrote the file's id."""
        # the Files list also takes `purpose` and `order` (newest first, `desc`, is its default, said anyway)
        # and a `limit` of 1 to 10,000
        params = {"purpose": "batch", "limit": "1000", "order": "desc"}
        async with aclosing(self._listed("/files", params, pages)) as files:
            async for file in files:
                if file.get("filename") == name and file.get("bytes") == size:
                    return file
        return None

    async def content(self, file_id: str) -> bytes:
        """A file's bytes (a batch's output or error file)."""
        return await self._request("GET", f"/files/{file_id}/content", raw=True)


def _shown(path: str) -> str:
    return path.split("?")[0]
