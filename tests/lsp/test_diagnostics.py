"""Diagnostics through the protocol are `dslc check`'s: same code, place, message and hint, after
opening a file and again after an edit that fixes one of its errors."""
from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from pathlib import Path

import pytest
from lsp_client import EXAMPLES, change_and_wait, open_and_wait, versions_published, wait_for_version
from lsprotocol import types

pytestmark = pytest.mark.asyncio(loop_scope="module")

BROKEN = """\
SOURCE orders FROM JSON 'data/orders/'
  SCHEMA (order_id STRING, amount DOUBLE, country STRING);
STREAM big = SELECT order_id, amout FROM orders WHERE amount > 100;
STREAM called = ENRICH big WITH HTTP GET 'http://127.0.0.1:9/c/{order_id}'
  RETURNS (tier STRING) ASYNC UNORDERED CAPACITY 10 TIMEOUT 5 RETRY 2 BACKOFF 10ms;
SINK called TO CONSOLE;
"""

_HEADER = re.compile(r"^(?P<file>.+?):(?P<line>\d+):(?P<col>\d+): error\[(?P<code>E\d+)\]: (?P<message>.*)$")


def dslc_check(path: Path) -> list[tuple[str, int, int, str, str | None]]:
    """(code, line, column, message, hint) of every error `dslc check` prints."""
    done = subprocess.run([sys.executable, "-m", "dslc.compiler.cli", "check", str(path)],
                          capture_output=True, text=True, timeout=120)
    found: list[list] = []
    for line in done.stderr.splitlines():
        header = _HEADER.match(line)
        if header:
            found.append([header["code"], int(header["line"]), int(header["col"]), header["message"], None])
        elif line.strip().startswith("= hint: ") and found:
            found[-1][4] = line.split("= hint: ", 1)[1]
    return [tuple(f) for f in found]


def as_check(diagnostics: list[types.Diagnostic]) -> list[tuple[str, int, int, str, str | None]]:
    """The LSP diagnostics in `dslc check`'s terms (1-based line and column, hint apart)."""
    out = []
    for d in diagnostics:
        message, _, hint = d.message.partition("\nhint: ")
        out.append((d.code, d.range.start.line + 1, d.range.start.character + 1, message, hint or None))
    return out


async def test_the_examples_open_without_diagnostics(client):
    examples = sorted(EXAMPLES.glob("*/pipeline.flow"))
    assert len(examples) >= 3
    for path in examples:
        assert await open_and_wait(client, path.as_uri(), path.read_text()) == [], path


async def test_diagnostics_are_dslc_checks_and_follow_an_edit(client, tmp_path):
    path = tmp_path / "broken.flow"
    path.write_text(BROKEN)
    expected = dslc_check(path)
    assert [e[0] for e in expected] == ["E0204", "E0301"]      # the file really has two errors
    diagnostics = await open_and_wait(client, path.as_uri(), BROKEN)
    assert as_check(diagnostics) == expected
    assert all(d.source == "dslc" and d.severity == types.DiagnosticSeverity.Error for d in diagnostics)
    typo = diagnostics[0]
    assert typo.related_information and typo.related_information[0].message == f"hint: {expected[0][4]}"
    assert typo.range.end.character - typo.range.start.character == len("amout")

    fixed = BROKEN.replace("amout", "amount")
    path.write_text(fixed)
    after = await change_and_wait(client, path.as_uri(), fixed, version=2)
    assert as_check(after) == dslc_check(path)
    assert [d.code for d in after] == ["E0301"]

    clean = fixed.replace("TIMEOUT 5 ", "TIMEOUT 5s ")
    assert await change_and_wait(client, path.as_uri(), clean, version=3) == []


async def test_a_burst_of_edits_is_checked_once_for_the_last_version(client, tmp_path):
    uri = (tmp_path / "burst.flow").as_uri()
    await open_and_wait(client, uri, BROKEN)
    for version in range(2, 7):       # typing: no pause between the edits
        client.text_document_did_change(types.DidChangeTextDocumentParams(
            types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            [types.TextDocumentContentChangeWholeDocument(text=BROKEN.replace("amout", "amoun"[: version - 1]))]))
    assert await wait_for_version(client, uri, 6, timeout=60) is not None
    seen = versions_published(client, uri)
    assert seen[0] == 1 and seen[-1] == 6 and seen == sorted(seen)   # never an older version after a newer
    assert len(seen) < 6      # versions typed without a pause in between are not all checked


async def test_edits_during_a_long_check_end_with_the_newest_versions_diagnostics(client, tmp_path):
    """A 300-statement file: edits arrive while the check of the opened text (from scratch, the
    longest) and of later versions run; the checks they overtake stop half-way, and what they
    leave behind does not change the diagnostics of the versions checked after them."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from bench.compiler_scaling import BRANCH_DEPTH, UDFS, generate

    (tmp_path / "udfs.py").write_text(UDFS)
    path = tmp_path / "large.flow"
    text = generate(300, BRANCH_DEPTH)
    path.write_text(text)
    at = text.index("SELECT ", len(text) // 2) + len("SELECT ")
    typo = text[:at] + "nope_" + text[at:]
    uri = path.as_uri()
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        types.TextDocumentItem(uri=uri, language_id="flow", version=1, text=text)))
    for version in range(2, 9):
        await asyncio.sleep(0.03 * version)     # pauses both shorter and longer than the server's
        client.text_document_did_change(types.DidChangeTextDocumentParams(
            types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            [types.TextDocumentContentChangeWholeDocument(text=typo if version % 2 == 0 else text)]))
    last = await wait_for_version(client, uri, 8, timeout=120)
    assert [(d.code, d.range.start.line) for d in last] == [("E0204", typo[:at].count("\n"))]
    assert await change_and_wait(client, uri, text, version=9, timeout=120) == []
    seen = versions_published(client, uri)
    assert seen == sorted(seen) and seen[-2:] == [8, 9]


async def test_ranges_count_utf16_code_units_as_the_protocol_says(client):
    text = "-- café ☕\nSOURCE s FROM JSON 'in/' SCHEMA (k STRING);\n" \
           "STREAM t = SELECT '😀é' AS face, nope FROM s;\nSINK t TO CONSOLE;\n"
    diagnostics = await open_and_wait(client, "untitled:utf16", text)
    assert [d.code for d in diagnostics] == ["E0204"]
    line = text.splitlines()[2]
    prefix = line[: line.index("nope")]
    assert diagnostics[0].range.start == types.Position(2, len(prefix.encode("utf-16-le")) // 2)
    assert diagnostics[0].range.start.character == len(prefix) + 1       # the emoji is two code units
    assert diagnostics[0].range.end.character - diagnostics[0].range.start.character == 4
