"""Files the editor will certainly see: half-typed statements, binary content, a huge file, an
unsaved buffer, a missing Python module. The server answers each with diagnostics and keeps
serving (every test ends by asking it something else)."""
from __future__ import annotations

import pytest
from lsp_client import EXAMPLES, completion_labels, doc, hover_text, open_and_wait, position_of
from lsprotocol import types

pytestmark = pytest.mark.asyncio(loop_scope="module")

FRAUD = (EXAMPLES / "fraud" / "pipeline.flow").read_text()
# a syntax error in the middle of the file, and a SELECT naming an unknown column after it
BROKEN_MIDDLE = FRAUD.replace("BROADCAST rules FROM rule_updates KEY rule_id OP op;",
                              "BROADCAST rules FROM rule_updates KEY rule_id OP op;\n"
                              "STREAM half = ENRICH paid WITH HTTP 'no method';\n")
BROKEN_MIDDLE = BROKEN_MIDDLE + "STREAM late = SELECT nope, amo FROM enriched;\n"


async def still_serving(client) -> None:
    """The server answers a request about a good file."""
    uri = (EXAMPLES / "devices" / "pipeline.flow").as_uri()
    text = (EXAMPLES / "devices" / "pipeline.flow").read_text()
    assert await open_and_wait(client, uri, text, version=len(client.published) + 1) == []
    assert "| temperature | DOUBLE |" in await hover_text(client, uri, position_of(text, "PROCESS readings", after=9))


async def test_a_syntax_error_in_the_middle_leaves_the_rest_known(client, tmp_path):
    path = tmp_path / "pipeline.flow"
    path.write_text(BROKEN_MIDDLE)
    diagnostics = await open_and_wait(client, path.as_uri(), BROKEN_MIDDLE)
    assert [d.code for d in diagnostics] == ["E0101"]        # dslc check stops at syntax errors too
    uri = path.as_uri()
    # completion and hover after the bad statement, and in the statement after the bad query
    labels = await completion_labels(client, uri, position_of(BROKEN_MIDDLE, "nope, amo", after=9))
    assert labels[0] == "amount"
    shown = await hover_text(client, uri, position_of(BROKEN_MIDDLE, "MATCH enriched", after=8))
    assert "**stream** `enriched`" in shown and "| risk | DOUBLE |" in shown
    assert "| tier | STRING |" in await hover_text(client, uri, position_of(BROKEN_MIDDLE, "FROM enriched;", after=6))
    # the bad statement's own names are still known for definitions and symbols
    symbols = await client.text_document_document_symbol_async(types.DocumentSymbolParams(doc(uri)))
    assert "half" not in [s.name for s in symbols] and "late" in [s.name for s in symbols]
    await still_serving(client)


async def test_a_statement_that_does_not_check_leaves_the_others_known(client):
    text = FRAUD.replace("FROM orders;", "FROM orders WHERE amount > 'x' AND nope > 1;") + \
        "STREAM late = SELECT customer_id FROM paid;\n"
    uri = "untitled:semantic-error"
    diagnostics = await open_and_wait(client, uri, text)
    assert "E0204" in [d.code for d in diagnostics]
    # `paid` does not check: what reads it cannot be typed, what does not read it can
    assert "schema unknown" in await hover_text(client, uri, position_of(text, "FROM paid", after=6))
    assert "| max_amount | DOUBLE |" in await hover_text(client, uri, position_of(text, "FROM rule_updates", after=6))
    assert "orders" in await completion_labels(client, uri, position_of(text, "FROM orders", after=8))


async def test_binary_content_gets_diagnostics(client, tmp_path):
    raw = bytes(range(256)) * 40 + b"\x00\xff\xfe SOURCE ;;; \x1b[31m"
    text = raw.decode("latin-1")
    uri = (tmp_path / "binary.flow").as_uri()
    diagnostics = await open_and_wait(client, uri, text)
    assert diagnostics and all(d.source == "dslc" for d in diagnostics)
    assert {d.code for d in diagnostics} <= {"E0101", "E0102", "E0103", "E0104", "E0105"}
    assert await completion_labels(client, uri, types.Position(0, 3)) is not None
    assert await hover_text(client, uri, types.Position(3, 3)) is None
    await still_serving(client)


async def test_a_five_megabyte_file_gets_a_diagnostic_and_no_check(client, tmp_path):
    statement = "STREAM s{i} = SELECT order_id FROM orders WHERE amount > {i};\n"
    text = FRAUD + "".join(statement.format(i=i) for i in range(80_000))
    assert len(text) > 5_000_000
    uri = (tmp_path / "huge.flow").as_uri()
    diagnostics = await open_and_wait(client, uri, text, timeout=120)
    assert len(diagnostics) == 1 and diagnostics[0].severity == types.DiagnosticSeverity.Warning
    assert "not checked as you type" in diagnostics[0].message and "dslc check" in diagnostics[0].message
    assert await completion_labels(client, uri, types.Position(8, 3)) is not None
    await still_serving(client)


async def test_an_unsaved_buffer_is_checked_against_the_workspace_folder(client):
    text = "SOURCE r FROM PYTHON 'devices:DeviceLogs' SCHEMA (device STRING);\nSINK r TO CONSOLE;\n"
    # the workspace is examples/: devices.py is in examples/devices/, not beside an unsaved buffer
    diagnostics = await open_and_wait(client, "untitled:Untitled-1", text)
    assert [(d.code, d.message.split("\n")[0]) for d in diagnostics] == [("E0201", "unknown Python module 'devices'")]
    good = "SOURCE s FROM JSON 'in/' SCHEMA (k STRING);\nSINK s TO CONSOLE;\n"
    assert await open_and_wait(client, "untitled:Untitled-2", good) == []
    assert (await completion_labels(client, "untitled:Untitled-2", position_of(good, "SINK s", after=6)))[0] == "s"


async def test_python_modules_resolve_beside_the_file(client, tmp_path):
    text = (EXAMPLES / "devices" / "pipeline.flow").read_text()
    path = tmp_path / "pipeline.flow"
    path.write_text(text)
    diagnostics = await open_and_wait(client, path.as_uri(), text)
    # devices.py is not beside this copy: both references are reported, with the hint
    assert [(d.code, d.range.start.line) for d in diagnostics] == [("E0201", 5), ("E0201", 15)]
    assert diagnostics[0].message == "unknown Python module 'devices'\nhint: put devices.py beside pipeline.flow"
    # the module appears beside it, the file is saved: the errors go
    (tmp_path / "devices.py").write_text((EXAMPLES / "devices" / "devices.py").read_text())
    client.text_document_did_save(types.DidSaveTextDocumentParams(doc(path.as_uri())))
    published = len(client.published)
    while len(client.published) == published or client.published[-1].uri != path.as_uri():
        client.arrived.clear()
        await client.arrived.wait()
    assert list(client.published[-1].diagnostics) == []
    await still_serving(client)


async def test_the_server_survives_requests_about_unknown_documents(client):
    unknown = "file:///nowhere/never-opened.flow"
    assert await hover_text(client, unknown, types.Position(0, 0)) is None
    result = await client.workspace_execute_command_async(types.ExecuteCommandParams("dslc.explain", [unknown]))
    assert result == {"ok": False, "text": f"{unknown} is not open in the editor"}
    await still_serving(client)
