"""A large file under edits (#48 item 24): the server advertises incremental sync and applies
ranged changes; hover and completion answer from the last checked version while the check of a
newer one runs (offsets carried across the edit); a salvage overtaken by a newer version stops,
as a check does."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
from lsp_client import EXAMPLES, SERVER, doc, open_and_wait, position_of, wait_for_version
from lsprotocol import types

from dslc.compiler.lsp.analysis import analyze
from dslc.compiler.lsp.hover import hover
from dslc.compiler.lsp.incremental import EditorCache
from dslc.compiler.lsp.positions import LineIndex
from dslc.compiler.lsp.server import _salvage
from dslc.compiler.lsp.stale import edit_between

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from bench.compiler_scaling import BRANCH_DEPTH, UDFS, generate  # noqa: E402

ASYNC = pytest.mark.asyncio(loop_scope="module")


async def _advertised_sync() -> types.TextDocumentSyncKind:
    """What `dslc lsp` answers to initialize, read by a client of its own."""
    from pygls.lsp.client import LanguageClient

    own = LanguageClient("dslc-test", "1")
    await own.start_io(*SERVER)
    try:
        result = await own.initialize_async(types.InitializeParams(capabilities=types.ClientCapabilities()))
        return result.capabilities.text_document_sync.change
    finally:
        await own.shutdown_async(None)
        own.exit(None)
        await own.stop()


def _range(text: str, start: int, end: int) -> types.Range:
    index = LineIndex(text)
    return types.Range(index.position(start), index.position(end))


@ASYNC
async def test_incremental_sync_is_advertised_and_ranged_edits_are_applied(client, tmp_path):
    assert await _advertised_sync() == types.TextDocumentSyncKind.Incremental     # it was Full: 427 KB an edit
    text = (EXAMPLES / "fraud" / "pipeline.flow").read_text()
    path = tmp_path / "pipeline.flow"
    path.write_text(text)
    uri = path.as_uri()
    assert await open_and_wait(client, uri, text) == []
    at = text.index("SELECT order_id") + len("SELECT ")
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        types.VersionedTextDocumentIdentifier(uri=uri, version=2),
        [types.TextDocumentContentChangePartial(range=_range(text, at, at), text="nope_")]))
    [problem] = await wait_for_version(client, uri, 2, timeout=60)
    assert problem.code == "E0204" and problem.range.start == LineIndex(text).position(at)
    typo = text[:at] + "nope_" + text[at:]
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        types.VersionedTextDocumentIdentifier(uri=uri, version=3),
        [types.TextDocumentContentChangePartial(range=_range(typo, at, at + 5), text="")]))
    assert await wait_for_version(client, uri, 3, timeout=60) == []


@ASYNC
async def test_hover_answers_from_the_last_checked_version_while_a_newer_one_is_checked(client, tmp_path):
    """The edit widens the source's schema, so every query of 1,500 statements is analysed again;
    hover meanwhile answers at once from the version checked before, for the word under the
    cursor in the newest text, and says the line that word's statement has now."""
    (tmp_path / "udfs.py").write_text(UDFS)
    path = tmp_path / "large.flow"
    text = generate(1500, BRANCH_DEPTH)
    path.write_text(text)
    uri = path.as_uri()
    assert await open_and_wait(client, uri, text, timeout=300) == []
    at = text.index("country STRING)") + len("country STRING")
    wider = text[:at] + ", extra INT" + text[at:]
    before = await client.text_document_hover_async(types.HoverParams(doc(uri), position_of(text, "FROM s0", after=6,
                                                                                         nth=40)))
    assert "| country | STRING |" in before.contents.value and "extra" not in before.contents.value
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        types.VersionedTextDocumentIdentifier(uri=uri, version=2),
        [types.TextDocumentContentChangePartial(range=_range(text, at, at), text=", extra INT")]))
    target = position_of(wider, "FROM s0", after=6, nth=40)
    during = await client.text_document_hover_async(types.HoverParams(doc(uri), target))
    published = [p.version for p in client.published if p.uri == uri]
    assert 2 not in published                                  # answered before version 2's check ended
    assert "**source** `s0`, line 1" in during.contents.value                 # its line, as the text is now
    assert "| extra | INT |" not in during.contents.value                     # its schema, as last checked
    assert during.range.start == types.Position(target.line, target.character - 1)   # `s0`, in the newest text
    labels = await client.text_document_completion_async(types.CompletionParams(doc(uri), target))
    assert "s0" in [item.label for item in labels.items]
    assert await wait_for_version(client, uri, 2, timeout=300) == []
    after = await client.text_document_hover_async(types.HoverParams(doc(uri), target))
    assert "| extra | INT |" in after.contents.value                 # the newest version, once checked


def test_hover_carries_offsets_across_the_edit(tmp_path):
    (tmp_path / "udfs.py").write_text(UDFS)
    old = generate(40, BRANCH_DEPTH)
    analysis = analyze(old, str(tmp_path / "p.flow"), str(tmp_path))
    _ = analysis.program, analysis.plan
    new = "-- a comment typed at the top\n" + old.replace("ASYNC UNORDERED CAPACITY 10", "ASYNC UNORDERED CAPACITY 12", 1)
    edit = edit_between(old, new)
    assert new[:edit.start] == old[:edit.start] and new[edit.new_end:] == old[edit.old_end:]
    index = LineIndex(new)
    offset = new.index("FROM s3") + 6
    shown = hover(analysis, index, offset)
    assert shown.contents.value.startswith("**stream** `s3`, line 5") and shown.range.start == index.position(offset - 1)
    enrich = new.index("CAPACITY", new.index("STREAM s14 ="))          # an ENRICH below the edit
    assert "**ENRICH** `s13` → `s14`" in hover(analysis, index, enrich + 2).contents.value


def test_a_salvage_overtaken_by_a_newer_version_stops(tmp_path):
    (tmp_path / "udfs.py").write_text(UDFS)
    text = generate(300, BRANCH_DEPTH).replace("STREAM s150 =", "STREAM s150 = = ", 1)     # a syntax error
    cache = EditorCache()
    analysis = analyze(text, str(tmp_path / "p.flow"), str(tmp_path), cache)
    assert analysis.diagnostics and not analysis.complete
    asked = []
    assert _salvage(analysis, lambda: asked.append(1) or len(asked) < 20) is False
    assert len(asked) == 20 and "program" not in analysis.__dict__       # nothing half-done kept
    assert _salvage(analysis, lambda: True) is True and len(analysis.program.statements) == 299
