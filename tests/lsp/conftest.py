"""A real `dslc lsp` process per test module, driven over stdio by pytest-lsp's client."""
from __future__ import annotations

import pytest_lsp
from lsp_client import EXAMPLES, SERVER, RecordingClient, recording_client
from lsprotocol import types
from pytest_lsp import ClientServerConfig


@pytest_lsp.fixture(scope="module", config=ClientServerConfig(server_command=SERVER, client_factory=recording_client))
async def client(lsp_client: RecordingClient):
    await lsp_client.initialize_session(types.InitializeParams(
        capabilities=types.ClientCapabilities(), root_uri=EXAMPLES.as_uri(),
        workspace_folders=[types.WorkspaceFolder(EXAMPLES.as_uri(), "examples")]))
    yield
    await lsp_client.shutdown_session()


