"""`dslc lsp` with Spark's analyzer on (the initialization option `spark: true`): the fast
diagnostics of a version come first, as without it; then the same version is published again
with Spark's analyzer's diagnostics added; a result for a version that is no longer the newest
is dropped; hover shows Spark's types; the setting `dslc.spark` turns it off. One server, so
one JVM, for the module."""
from __future__ import annotations

import asyncio

import pytest
import pytest_lsp
from lsp_client import EXAMPLES, SERVER, RecordingClient, hover_text, position_of, recording_client
from lsprotocol import types
from pytest_lsp import ClientServerConfig

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.spark]

SPARK = "dslc (Spark's analyzer)"
WAIT_S = 240        # the JVM starts once, in the background, on a shared machine

HEAD = """\
SOURCE orders FROM JSON 'data/orders/'
  SCHEMA (order_id STRING, amount DOUBLE, country STRING);
"""
SPARK_ONLY = HEAD + """\
STREAM sorted = SELECT order_id, sort_array(amount) AS s FROM orders;
STREAM typo = SELECT order_id, amout FROM orders;
STREAM parsed = SELECT from_csv(order_id, 'a INT, b STRING') AS row FROM orders;
SINK sorted TO CONSOLE;
SINK typo TO CONSOLE;
SINK parsed TO CONSOLE;
"""


@pytest_lsp.fixture(scope="module", config=ClientServerConfig(server_command=SERVER, client_factory=recording_client))
async def client(lsp_client: RecordingClient):
    await lsp_client.initialize_session(types.InitializeParams(
        capabilities=types.ClientCapabilities(), root_uri=EXAMPLES.as_uri(),
        initialization_options={"spark": True}))
    yield
    await lsp_client.shutdown_session()


def from_spark(params: types.PublishDiagnosticsParams) -> list[types.Diagnostic]:
    return [d for d in params.diagnostics if d.source == SPARK]


async def published(client: RecordingClient, uri: str, version: int, *, spark: bool) -> types.PublishDiagnosticsParams:
    """The first publish of `version` with (or without) Spark's diagnostics in it."""
    async def wait() -> types.PublishDiagnosticsParams:
        while True:
            for params in client.published:
                if params.uri == uri and params.version == version and bool(from_spark(params)) == spark:
                    return params
            client.arrived.clear()
            await client.arrived.wait()
    return await asyncio.wait_for(wait(), WAIT_S)


def where(d: types.Diagnostic) -> tuple[str, int, int]:
    return d.code, d.range.start.line + 1, d.range.start.character + 1


def open_doc(client, uri: str, text: str, version: int = 1) -> None:
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        types.TextDocumentItem(uri=uri, language_id="flow", version=version, text=text)))


def change(client, uri: str, text: str, version: int) -> None:
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        types.VersionedTextDocumentIdentifier(uri=uri, version=version),
        [types.TextDocumentContentChangeWholeDocument(text=text)]))


async def test_sparks_diagnostics_follow_the_fast_ones_for_the_same_version(client: RecordingClient, tmp_path):
    uri = (tmp_path / "p.flow").as_uri()
    open_doc(client, uri, SPARK_ONLY)
    with_spark = await published(client, uri, 1, spark=True)
    ours = [p for p in client.published if p.uri == uri]
    first = ours[0]
    # the fast check's diagnostics came first, on their own: the JVM never held them up
    assert first.version == 1 and [where(d) for d in first.diagnostics] == [("E0204", 4, 32)]
    assert ours.index(first) < ours.index(with_spark)
    # then the same version again: the fast check's error and Spark's, at its place, in the DSL's terms
    assert [(where(d), d.source) for d in with_spark.diagnostics] == [
        (("E0212", 3, 34), SPARK), (("E0204", 4, 32), "dslc")]
    spark_error = from_spark(with_spark)[0]
    assert "Spark rejects this query (DATATYPE_MISMATCH.UNEXPECTED_INPUT_TYPE)" in spark_error.message
    assert spark_error.range.end.character - spark_error.range.start.character == len("sort_array(amount)")
    assert "hint: Spark's analyzer found this" in spark_error.message
    # hover: the types Spark's analyzer gives, said to be Spark's
    text = await hover_text(client, uri, position_of(SPARK_ONLY, "STREAM parsed", after=8))
    assert "types from Spark's analyzer" in text and "| row | STRUCT<a: INT, b: STRING> |" in text


async def test_a_result_for_an_older_version_is_dropped(client: RecordingClient, tmp_path):
    uri = (tmp_path / "q.flow").as_uri()
    open_doc(client, uri, SPARK_ONLY)
    await published(client, uri, 1, spark=True)
    # version 3 arrives as soon as version 2's fast diagnostics are out, while Spark analyzes version 2:
    # version 2's Spark result must not be published after anything of version 3
    v2 = SPARK_ONLY.replace("sort_array(amount)", "sort_array(array(amount))")
    v3 = v2.replace("SELECT order_id, amout FROM orders", "SELECT order_id, size(amount) FROM orders")
    change(client, uri, v2, 2)
    await published(client, uri, 2, spark=False)
    change(client, uri, v3, 3)
    final = await published(client, uri, 3, spark=True)
    assert [(where(d), d.source) for d in final.diagnostics] == [(("E0212", 4, 32), SPARK)]
    assert 'Cannot resolve "size(amount)"' in final.diagnostics[0].message
    await asyncio.sleep(1.0)        # anything still under way for version 2 has had its chance
    versions = [p.version for p in client.published if p.uri == uri]
    assert versions == sorted(versions), versions       # nothing older published after newer
    assert versions[-1] == 3


async def test_the_setting_turns_sparks_analyzer_off(client: RecordingClient, tmp_path):
    uri = (tmp_path / "r.flow").as_uri()
    open_doc(client, uri, SPARK_ONLY)
    await published(client, uri, 1, spark=True)
    count = len(client.published)
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"dslc": {"spark": False}}))

    async def republished() -> types.PublishDiagnosticsParams:
        while True:
            for params in client.published[count:]:
                if params.uri == uri:
                    return params
            client.arrived.clear()
            await client.arrived.wait()

    again = await asyncio.wait_for(republished(), 60)
    assert [where(d) for d in again.diagnostics] == [("E0204", 4, 32)] and not from_spark(again)
    text = await hover_text(client, uri, position_of(SPARK_ONLY, "STREAM parsed", after=8))
    assert "Spark's analyzer" not in text


async def test_dslc_lsp_spark_turns_it_on_from_the_start():
    """`dslc lsp --spark` (for clients that cannot pass initialization options): on from the start,
    the JVM started at `initialize`; plain `dslc lsp` leaves it off."""
    from dslc.compiler.cli.main import parse_args
    from dslc.compiler.lsp.server import build_server

    assert parse_args(["lsp", "--spark"]).spark is True and parse_args(["lsp"]).spark is False
    assert build_server(spark=True).spark.enabled is True
    assert build_server().spark.enabled is False
