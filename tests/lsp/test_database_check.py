"""`dslc lsp --db`: the editor's diagnostics include the live database's (the same as `dslc check
--db`): a query naming a table the database does not have is underlined at the table's name
inside the query string; fixed, the diagnostic goes away."""
from __future__ import annotations

import asyncio

import pytest
import pytest_lsp
from lsp_client import EXAMPLES, SERVER, RecordingClient, change_and_wait, open_and_wait, recording_client
from lsprotocol import types
from pytest_lsp import ClientServerConfig

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_lsp.fixture(scope="module", config=ClientServerConfig(server_command=[*SERVER, "--db"],
                                                              client_factory=recording_client))
async def client(lsp_client: RecordingClient):
    await lsp_client.initialize_session(types.InitializeParams(
        capabilities=types.ClientCapabilities(), root_uri=EXAMPLES.as_uri()))
    yield
    await lsp_client.shutdown_session()


TEXT = """DATABASE crm AT '{url}';
SOURCE orders FROM JSON 'in/' SCHEMA (order_id STRING, customer_id STRING);
STREAM e = ENRICH orders WITH SQL crm 'SELECT tier FROM {table} WHERE customer_id = {{customer_id}}'
  RETURNS (tier STRING);
SINK e TO CONSOLE;
"""


async def test_a_table_the_database_does_not_have_is_underlined_in_the_query(client, postgres, tmp_path):
    await asyncio.to_thread(postgres.execute, "DROP TABLE IF EXISTS lsp_customers")
    await asyncio.to_thread(postgres.execute, "CREATE TABLE lsp_customers (customer_id TEXT PRIMARY KEY, tier TEXT)")
    uri = (tmp_path / "p.flow").as_uri()
    wrong = TEXT.format(url=postgres.url(), table="lsp_customer")
    found = await open_and_wait(client, uri, wrong)
    assert [(d.code, d.range.start.line, d.range.start.character, d.range.end.character) for d in found] == \
        [("E0336", 2, 56, 56 + len("lsp_customer"))]
    assert 'relation "lsp_customer" does not exist' in found[0].message
    assert "did you mean 'lsp_customers'?" in found[0].message
    assert await change_and_wait(client, uri, TEXT.format(url=postgres.url(), table="lsp_customers"), 2) == []
