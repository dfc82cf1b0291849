"""Helpers of tests/lsp: the client that records diagnostics, and requests as one-liners."""
from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from lsprotocol import types
from pygls.protocol import default_converter
from pytest_lsp import LanguageClient
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
SERVER = [sys.executable, "-m", "dslc.compiler.cli", "lsp"]


class RecordingClient(LanguageClient):
    """pytest-lsp's client that also keeps every publishDiagnostics, in order, with its version."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.published: list[types.PublishDiagnosticsParams] = []
        self.arrived = asyncio.Event()


def recording_client() -> RecordingClient:
    client = RecordingClient(converter_factory=default_converter)
    features = dict(DEFAULT_CLIENT_FEATURES)

    def published(client: RecordingClient, params: types.PublishDiagnosticsParams) -> None:
        client.diagnostics[params.uri] = params.diagnostics
        client.published.append(params)
        client.arrived.set()

    features[types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS] = published
    register_lsp_features(client, features)
    return client


async def open_and_wait(client: LanguageClient, uri: str, text: str, version: int = 1,
                        timeout: float = 60) -> list[types.Diagnostic]:
    """Open a document and return the diagnostics published for this version."""
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        types.TextDocumentItem(uri=uri, language_id="flow", version=version, text=text)))
    return await wait_for_version(client, uri, version, timeout)


async def change_and_wait(client: LanguageClient, uri: str, text: str, version: int,
                          timeout: float = 60) -> list[types.Diagnostic]:
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        types.VersionedTextDocumentIdentifier(uri=uri, version=version),
        [types.TextDocumentContentChangeWholeDocument(text=text)]))
    return await wait_for_version(client, uri, version, timeout)


async def wait_for_version(client: RecordingClient, uri: str, version: int, timeout: float) -> list[types.Diagnostic]:
    """The diagnostics published for `uri` at `version` (waiting for them if need be)."""
    async def wait() -> list[types.Diagnostic]:
        while True:
            for params in reversed(client.published):
                if params.uri == uri and params.version == version:
                    return list(params.diagnostics)
            client.arrived.clear()
            await client.arrived.wait()

    return await asyncio.wait_for(wait(), timeout)


def versions_published(client: RecordingClient, uri: str) -> list[int | None]:
    return [p.version for p in client.published if p.uri == uri]


def doc(uri: str) -> types.TextDocumentIdentifier:
    return types.TextDocumentIdentifier(uri)


def position_of(text: str, needle: str, *, after: int = 0, nth: int = 1) -> types.Position:
    """The position `after` characters into the nth occurrence of `needle` (ASCII text)."""
    offset = -1
    for _ in range(nth):
        offset = text.index(needle, offset + 1)
    offset += after
    line = text.count("\n", 0, offset)
    return types.Position(line, offset - (text.rfind("\n", 0, offset) + 1))


async def completion_labels(client: LanguageClient, uri: str, position: types.Position) -> list[str]:
    result = await client.text_document_completion_async(types.CompletionParams(doc(uri), position))
    items = result.items if isinstance(result, types.CompletionList) else (result or [])
    return [item.label for item in sorted(items, key=lambda i: i.sort_text or i.label)]


async def hover_text(client: LanguageClient, uri: str, position: types.Position) -> str | None:
    result = await client.text_document_hover_async(types.HoverParams(doc(uri), position))
    return None if result is None else result.contents.value
