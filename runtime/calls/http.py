"""ENRICH WITH HTTP GET | POST: a JSON object/array body is the result, 404 and JSON null a miss,
anything else an error.

Sessions (calls/sessions.py) are kept per worker process and operator. All coroutines here run
on the worker's event loop.
"""
from __future__ import annotations

import json
import urllib.parse
from collections.abc import Hashable
from typing import Any

import aiohttp
import yarl

from dslc.runtime.config import Enrich, HttpCall
from dslc.runtime.core.operator import Row
from dslc.runtime.limits.retry_after import retry_after_s
from dslc.runtime.schema import provenance
from dslc.runtime.secrets import Secrets, mask_url, masks_nothing, names_in, scrub

from . import error_body, sessions
from .answers import shape_for
from .base import (
    KEY_JSON,
    CallError,
    EnrichCall,
    UnsendableRequest,
    answer_error,
    check_batch_answer,
    check_result_types,
    hashable_key,
    to_json,
)
from .url import UnfillableUrl, fill_url, placeholders, redact_url

# the sessions are shared with the other kinds that speak HTTP (calls/sessions.py)
_sessions = sessions._sessions
_session = sessions.session_for
_close_session = sessions.close_session
close_all_sessions = sessions.close_all_sessions
tls_context = sessions.tls_context
MAX_BODY_BYTES = sessions.MAX_BODY_BYTES


class HttpEnrichCall(EnrichCall):
    """HTTP GET or POST; a JSON object/array body is the result, 404 and JSON null a miss,
    anything else an error. POST sends a JSON object of the BODY columns (BATCH: an array)."""

    def __init__(self, config: Enrich) -> None:
        assert isinstance(config.call, HttpCall)
        self.config = config
        self.url = config.call.url
        self.post = config.call.method == "POST"
        self.body = config.call.body
        self.columns = placeholders(self.url)
        self._session: aiohttp.ClientSession | None = None   # the worker's, looked up once
        # `${NAME}` secrets: filled here, on the executor, from the values the driver shipped;
        # error messages show the URL as written (`${NAME}`), never the filled one
        self.secrets = config.secrets or Secrets()
        # a value in the URL is percent-encoded, as a placeholder's value is (encoded once here)
        self._url_secrets = Secrets({n: urllib.parse.quote(v, safe="") for n, v in self.secrets.items()}) \
            if names_in(self.url) else None
        headers = {name: self.secrets.fill(value) for name, value in config.call.headers}
        self._get_headers = headers or None
        self._post_headers = {**_JSON_HEADERS, **headers}
        self.shape = shape_for(config, self.result_check)
        self.notes = config.provenance is not None    # PROVENANCE: each answer says its status and URL
        # ... masked, unless no URL of this template has anything to mask (checked once, not per answer)
        self._masked_url = not masks_nothing(self.url)

    def _secret_url(self, url: str) -> str:
        """The URL with its secrets filled (percent-encoded, as a placeholder's value is)."""
        return url if self._url_secrets is None else self._url_secrets.fill(url)

    def cache_key(self, row: Row) -> Hashable | None:
        if self.post:   # what the request carries: placeholders and body
            return hashable_key((tuple(row.get(c) for c in self.columns), tuple(self._body(row).items())))
        return hashable_key(tuple(row.get(c) for c in self.columns))

    def request_columns(self) -> tuple[str, ...] | None:
        """The URL's placeholders and the BODY columns (a POST without BODY sends the whole row)."""
        if self.post and self.body is None:
            return None
        return tuple(dict.fromkeys(self.columns + (tuple(self.body) if self.post else ())))

    def request_key(self, row: Row) -> str | None:
        """The method, the URL with its placeholders filled and the JSON body (POST)."""
        try:
            url = fill_url(self.url, row)
        except UnfillableUrl:
            return None
        try:
            return KEY_JSON.encode([self.config.call.method, url, *((self._body(row),) if self.post else ())])
        except (TypeError, ValueError):
            return None

    def _body(self, row: Row) -> dict[str, Any]:
        return dict(row) if self.body is None else {c: row.get(c) for c in self.body}

    def _client(self) -> aiohttp.ClientSession:
        session = self._session
        if session is None or session.closed:
            session = self._session = _session(self.config.name, self.config.capacity, self.config.call)
        return session

    async def __call__(self, row: Row) -> Any:
        url = fill(self.url, row)
        data = to_json(self._body(row)) if self.post else None
        status, body = await self._request(url, data)
        if status == 404:
            return None
        value = _parse(body)
        if self.shape is not None:      # ANSWER / PATH: the result is found in the answer
            result = self.shape.result(value)
        elif value is None:
            return None         # JSON null: no result, a miss (as None from a Python function)
        elif not isinstance(value, (dict, list)):
            raise answer_error(f"response body is JSON {type(value).__name__}, expected an object or array")
        else:
            result = check_result_types(value, self.result_check)
        return self._noted(result, status, url) if self.notes else result

    def _noted(self, result: Any, status: int, url: str) -> Any:
        """PROVENANCE: the answer with its status and URL, as written (`${NAME}`) and masked."""
        if self._masked_url:
            url = scrub(mask_url(url), self.secrets)
        elif self.secrets:
            url = self.secrets.mask(url)   # a row value that is a secret's value (what `scrub` does first)
        return provenance.noted(result, provenance.note(status=status, url=url))

    async def call_batch(self, rows: list[Row]) -> list[Any]:
        """BATCH: POST a JSON array of the rows' bodies; the answer (what ANSWER finds in it) is an
        array of as many items, each made a result here (PATHs read) or a BadItem."""
        status, body = await self._request(self.url, to_json([self._body(row) for row in rows]))
        if status == 404:
            raise CallError(f"HTTP 404 from {redact_url(self.url)}: a batch endpoint must answer every batch")
        if self.shape is not None:
            items = [self.shape.item(item) for item in self.shape.batch(_parse(body), len(rows))]
        else:
            items = check_batch_answer(_parse(body), len(rows))
        return self._noted(items, status, self.url) if self.notes else items

    async def _request(self, url: str, data: bytes | None) -> tuple[int, bytes]:
        """Status and body of one request (a 2xx or 404); other statuses raise CallError. `url`
        is as written (secrets as `${NAME}`): it is filled just before sending."""
        session = self._client()
        # encoded=True: send exactly the bytes built above, no re-quoting or normalisation
        target = yarl.URL(self._secret_url(url), encoded=True)
        request = (session.post(target, data=data, headers=self._post_headers, allow_redirects=True)
                   if data is not None else session.get(target, headers=self._get_headers, allow_redirects=True))
        async with request as response:
            if response.status == 404:
                await response.release()
                return 404, b""
            if not 200 <= response.status < 300:
                # the secrets masked in the whole body before it is cut (the error's message shown)
                text = error_body.shown(await error_body.read(response), self.secrets)
                error = CallError(f"HTTP {response.status} from {redact_url(url)}: {text}", response.status,
                                  retry_after_s(response.headers.get("Retry-After")))
                error.general = f"HTTP {response.status} from {redact_url(self.url)}: {text}"
                raise error
            return response.status, await sessions.read_body(response)

    async def aclose_clients(self) -> None:
        self._session = None
        await _close_session(self.config.name)


_JSON_HEADERS = {"Content-Type": "application/json"}


def _parse(body: bytes) -> Any:
    try:
        return json.loads(body)
    except ValueError as exc:
        raise answer_error(f"response body is not JSON: {exc}") from None


def fill(template: str, row: Row) -> str:
    """`fill_url`, with a value that cannot fill it made the element's error (never a call)."""
    try:
        return fill_url(template, row)
    except UnfillableUrl as exc:
        raise UnsendableRequest(str(exc)) from None
