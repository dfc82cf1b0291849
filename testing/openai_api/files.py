"""`/v1/files`: upload (multipart, as the SDK's `files.create` sends it), retrieve, list, download
the content and delete, with the File object the API answers (`file-...` ids, `bytes`,
`purpose`, `expires_at` for batch files). The Batch API reads its input from here and writes its
output and error files here (openai_api/batches.py)."""
from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aiohttp import web

from .errors import ApiError, invalid

if TYPE_CHECKING:
    from dslc.testing.openai_service import OpenAIService

PURPOSES = ("assistants", "batch", "fine-tune", "vision", "user_data", "evals")
BATCH_FILE_LIMIT = 200 * 1024 * 1024        # the Batch API's input file limit
BATCH_FILE_TTL_S = 30 * 24 * 3600           # batch files expire after 30 days by default


@dataclass
class StoredFile:
    """An uploaded (or a batch's output) file."""

    id: str
    filename: str
    purpose: str
    data: bytes
    created_at: int

    def object(self) -> dict[str, Any]:
        expires = self.created_at + BATCH_FILE_TTL_S if self.purpose in ("batch", "batch_output") else None
        return {"id": self.id, "object": "file", "bytes": len(self.data), "created_at": self.created_at,
                "filename": self.filename, "purpose": self.purpose, "status": "processed",
                "expires_at": expires, "status_details": None}


def new_id(prefix: str) -> str:
    return prefix + secrets.token_hex(12)


def add_file(service: "OpenAIService", filename: str, purpose: str, data: bytes) -> StoredFile:
    """Keep a file (an upload, or a batch's output or errors)."""
    stored = StoredFile(new_id("file-"), filename, purpose, data, int(time.time()))
    service.files[stored.id] = stored
    return stored


def file_of(service: "OpenAIService", file_id: str) -> StoredFile:
    stored = service.files.get(file_id)
    if stored is None:
        raise ApiError(f"No such File object: {file_id}", "id", status=404)
    return stored


async def _pause(seconds: Callable[[], float]) -> None:
    """Wait until `seconds()` have passed since the call, asking it anew every 50 ms: a test that
    sets the service's delay to 0 ends a wait already begun."""
    started = time.monotonic()
    while time.monotonic() - started < seconds():
        await asyncio.sleep(0.05)


def routes(service: "OpenAIService") -> list[web.RouteDef]:
    endpoint = service.endpoint
    return [web.post("/v1/files", endpoint(upload)), web.get("/v1/files", endpoint(list_files)),
            web.get("/v1/files/{id}", endpoint(retrieve)), web.delete("/v1/files/{id}", endpoint(delete)),
            web.get("/v1/files/{id}/content", endpoint(content))]


async def upload(service: "OpenAIService", request: web.Request) -> web.Response:
    service.authorize(request)
    if not request.content_type.startswith("multipart/"):
        raise invalid("Invalid Content-Type header (application/json), expected multipart/form-data.")
    form = await request.post()
    purpose = form.get("purpose")
    field = form.get("file")
    if not isinstance(purpose, str) or not purpose:
        raise invalid("Missing required parameter: 'purpose'.", "purpose", "missing_required_parameter")
    if purpose not in PURPOSES:
        raise invalid(f"Invalid value for 'purpose': '{purpose}'.", "purpose", "invalid_value")
    if field is None or not hasattr(field, "file"):
        raise invalid("Missing required parameter: 'file'.", "file", "missing_required_parameter")
    data = field.file.read()
    if purpose == "batch":
        if not field.filename.endswith(".jsonl"):
            raise invalid("Invalid file format for Batch API. Must be .jsonl", "file")
        if len(data) > BATCH_FILE_LIMIT:
            raise invalid(f"File is too large ({len(data)} bytes): the Batch API takes up to 200 MB.", "file")
    stored = add_file(service, field.filename, purpose, data)
    service.stats["files_uploaded"] += 1
    service.stats["uploaded_bytes"] += len(data)
    await _pause(lambda: service.upload_delay_s)        # kept, its id not yet told
    return web.json_response(stored.object())


async def retrieve(service: "OpenAIService", request: web.Request) -> web.Response:
    service.authorize(request)
    return web.json_response(file_of(service, request.match_info["id"]).object())


async def delete(service: "OpenAIService", request: web.Request) -> web.Response:
    service.authorize(request)
    stored = file_of(service, request.match_info["id"])
    del service.files[stored.id]
    return web.json_response({"id": stored.id, "object": "file", "deleted": True})


async def list_files(service: "OpenAIService", request: web.Request) -> web.Response:
    service.authorize(request)
    purpose = request.query.get("purpose")
    found = [f for f in service.files.values() if purpose is None or f.purpose == purpose]
    found.sort(key=lambda f: f.created_at, reverse=request.query.get("order", "desc") == "desc")
    limit = int(request.query.get("limit", "10000"))
    after = request.query.get("after")
    if after is not None:
        ids = [f.id for f in found]
        found = found[ids.index(after) + 1:] if after in ids else []
    page = found[:limit]
    return web.json_response({"object": "list", "data": [f.object() for f in page],
                              "first_id": page[0].id if page else None, "last_id": page[-1].id if page else None,
                              "has_more": len(found) > len(page)})


async def content(service: "OpenAIService", request: web.Request) -> web.StreamResponse:
    """The file's bytes; with `download_delay_s` the second half comes that much later (so a
    client can be stopped in the middle of a download; setting it to 0 ends the wait)."""
    service.authorize(request)
    stored = file_of(service, request.match_info["id"])
    service.stats["downloads"] += 1
    response = web.StreamResponse(headers={"Content-Type": "application/octet-stream",
                                           "Content-Length": str(len(stored.data))})
    await response.prepare(request)
    half = len(stored.data) // 2
    await response.write(stored.data[:half])
    await _pause(lambda: service.download_delay_s)
    await response.write(stored.data[half:])
    await response.write_eof()
    return response
