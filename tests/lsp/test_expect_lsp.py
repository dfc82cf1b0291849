"""EXPECT in the editor, through the protocol: its errors are `dslc check`'s, at their place;
hovering its keywords or a constraint's name shows each constraint's action, where it runs and
what the model is asked; a column inside CHECK shows its type; the outline lists its constraints."""
from __future__ import annotations

import pytest
from lsp_client import doc, hover_text, open_and_wait, position_of
from lsprotocol import types
from test_diagnostics import as_check, dslc_check

pytestmark = pytest.mark.asyncio(loop_scope="module")

TEXT = """\
SOURCE tickets FROM JSON 'data/' SCHEMA (ticket_id STRING, subject STRING);
STREAM labelled = ENRICH tickets
  WITH MODEL 'gpt-4.1-mini' AT 'http://127.0.0.1:9/v1' PROMPT 'Subject: {subject}'
  RETURNS (category STRING, urgency INT);
EXPECT ON labelled
  CONSTRAINT known_category CHECK (category IN ('billing', 'account', 'other'))
  CONSTRAINT urgency_range CHECK (urgency BETWEEN 1 AND 5) ON VIOLATION DROP
  ON VIOLATION QUARANTINE 'target/quarantine/labelled';
SINK labelled TO PARQUET 'target/out/labelled';
"""


async def test_expect_errors_are_dslc_checks(client, tmp_path):
    text = TEXT.replace("CHECK (urgency BETWEEN", "CHECK (urgncy BETWEEN")
    path = tmp_path / "pipeline.flow"
    path.write_text(text)
    diagnostics = await open_and_wait(client, path.as_uri(), text)
    assert as_check(diagnostics) == dslc_check(path)
    assert [(d.code, d.range.start.line + 1) for d in diagnostics] == [("E0204", 7)]
    assert "did you mean 'urgency'?" in diagnostics[0].message


async def test_hover_on_an_expect_shows_its_constraints_where_it_runs_and_what_the_model_is_asked(client, tmp_path):
    path = tmp_path / "pipeline.flow"
    path.write_text(TEXT)
    uri = path.as_uri()
    await open_and_wait(client, uri, TEXT)
    shown = await hover_text(client, uri, position_of(TEXT, "known_category CHECK", after=2))
    assert "**EXPECT ON** `labelled`" in shown
    assert "| known_category | QUARANTINE 'target/quarantine/labelled' | 6 |" in shown
    assert "| urgency_range | DROP | 7 |" in shown
    assert "runs as Spark expressions on the output of chain#1" in shown
    assert "- category: enum ['billing', 'account', 'other'] (constraint known_category)" in shown
    assert "- urgency: minimum 1 (constraint urgency_range)" in shown
    assert shown == await hover_text(client, uri, position_of(TEXT, "EXPECT ON", after=1))
    assert await hover_text(client, uri, position_of(TEXT, "(urgency BETWEEN", after=2)) == \
        "column `urgency` INT, from `labelled`"
    symbols = await client.text_document_document_symbol_async(types.DocumentSymbolParams(doc(uri)))
    expect = next(s for s in symbols if s.detail == "EXPECT ON")
    assert expect.name == "✓ labelled" and [c.name for c in expect.children] == ["known_category", "urgency_range"]
