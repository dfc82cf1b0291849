"""Completion, hover, go to definition, document symbols and code lenses through the protocol,
on the examples (real files, real Python modules beside them)."""
from __future__ import annotations

import pytest
from lsp_client import EXAMPLES, completion_labels, doc, hover_text, open_and_wait, position_of
from lsprotocol import types

pytestmark = pytest.mark.asyncio(loop_scope="module")

FRAUD = EXAMPLES / "fraud" / "pipeline.flow"
DEVICES = EXAMPLES / "devices" / "pipeline.flow"


async def _open(client, path, text=None):
    text = path.read_text() if text is None else text
    await open_and_wait(client, path.as_uri(), text)
    return path.as_uri(), text


async def test_completion_offers_keywords_names_and_the_columns_in_scope(client, tmp_path):
    text = FRAUD.read_text() + "STREAM big = SELECT am FROM enr\n"
    path = tmp_path / "pipeline.flow"
    path.write_text(text)
    uri, _ = await _open(client, path, text)
    # a stream name after FROM, then the keyword (in the case typed)
    assert await completion_labels(client, uri, position_of(text, "FROM enr", after=8)) == ["enriched", "enrich"]
    # columns of what the statement reads: `enriched`'s amount, not `rules`' max_amount
    labels = await completion_labels(client, uri, position_of(text, "SELECT am FROM", after=9))
    assert labels[0] == "amount" and "max_amount" not in labels
    # keywords, in the case typed
    line = text.count("\n", 0, text.index("STREAM paid"))
    assert "STREAM" in await completion_labels(client, uri, types.Position(line, 3))
    # after `name.` only that relation's columns
    labels = await completion_labels(client, uri, position_of(text, "enriched.country", after=9))
    assert labels == ["order_id", "customer_id", "amount", "country", "ts", "tier", "risk"]


async def test_completion_with_nothing_typed_offers_the_columns_in_scope_first(client, tmp_path):
    """#48 item 12: Ctrl-Space (triggerKind Invoked) after `SELECT ` returned no items."""
    text = FRAUD.read_text() + "STREAM big = SELECT  FROM rules;\nSTREAM other = SELECT \n"
    path = tmp_path / "pipeline.flow"
    path.write_text(text)
    uri, _ = await _open(client, path, text)
    labels = await completion_labels(client, uri, position_of(text, "big = SELECT ", after=13))
    assert labels[:3] == ["rule_id", "country", "max_amount"]          # `rules`' columns, in order
    assert "amount" not in labels                                       # not a column of `rules`
    assert labels.index("enriched") < labels.index("FROM")              # then names, then keywords
    labels = await completion_labels(client, uri, position_of(text, "other = SELECT ", after=15))
    assert "amount" in labels and "orders" in labels and "SELECT" in labels
    result = await client.text_document_completion_async(types.CompletionParams(
        doc(uri), position_of(text, "big = SELECT ", after=13),
        context=types.CompletionContext(trigger_kind=types.CompletionTriggerKind.Invoked)))
    assert result.items[0].text_edit.range.start == result.items[0].text_edit.range.end   # inserts, replaces nothing


async def test_completion_items_replace_the_word_typed(client):
    uri, text = await _open(client, FRAUD)
    at = position_of(text, "FROM orders", after=8)
    result = await client.text_document_completion_async(types.CompletionParams(doc(uri), at))
    item = next(i for i in result.items if i.label == "orders")
    assert item.kind == types.CompletionItemKind.Class and item.detail == "source (5 columns)"
    assert item.text_edit.range.start.character == at.character - 3 and item.text_edit.new_text == "orders"


async def test_hover_on_a_name_shows_its_line_and_schema(client):
    uri, text = await _open(client, FRAUD)
    shown = await hover_text(client, uri, position_of(text, "ENRICH paid", after=8))
    assert "**stream** `paid`, line 23" in shown
    assert "STREAM paid = SELECT order_id, customer_id, amount, country, ts" in shown
    assert "| amount | DOUBLE |" in shown and "| ts | TIMESTAMP |" in shown
    shown = await hover_text(client, uri, position_of(text, "FROM rule_updates", after=7))
    assert "**source** `rule_updates`, line 12" in shown and "| max_amount | DOUBLE |" in shown
    shown = await hover_text(client, uri, position_of(text, "AGAINST rules", after=9))
    assert "**broadcast** `rules`, line 16" in shown and "| rule_id | STRING |" in shown
    # a column of what the statement reads
    assert await hover_text(client, uri, position_of(text, "CHECK (amount", after=8)) == \
        "column `amount` DOUBLE, from `orders`"
    assert await hover_text(client, uri, position_of(text, "-- Fraud", after=4)) is None


async def test_hover_on_an_enrich_shows_its_options_and_defaults(client):
    uri, text = await _open(client, FRAUD)
    shown = await hover_text(client, uri, position_of(text, "ENRICH paid", after=2))
    assert "WITH HTTP GET 'http://127.0.0.1:8765/customers/{customer_id}'" in shown
    assert "| ASYNC | UNORDERED |  |" in shown
    assert "| CAPACITY | 50 |  |" in shown and "| TIMEOUT | 2s |  |" in shown
    assert "| RETRY | 2 BACKOFF 20ms EXPONENTIAL |  |" in shown and "| CACHE | 1000 TTL 5m |  |" in shown
    assert "| RATE | none | default |" in shown and "| BATCH | none | default |" in shown
    assert "| ON TIMEOUT | DEAD LETTER 'target/dlq/enrich' |  |" in shown
    assert "| STORE | yes, TTL 1d |  |" in shown
    assert "RETURNS (tier STRING, risk DOUBLE)" in shown
    # the same table on an option keyword
    assert await hover_text(client, uri, position_of(text, "CAPACITY 50", after=3)) == shown
    # an ENRICH with nothing but its call: every option is a default
    bare = "SOURCE s FROM JSON 'in/' SCHEMA (k STRING);\n" \
           "STREAM e = ENRICH s WITH HTTP GET 'http://127.0.0.1:9/{k}' RETURNS (v STRING);\nSINK e TO CONSOLE;\n"
    uri = "untitled:bare-enrich"
    await open_and_wait(client, uri, bare)
    shown = await hover_text(client, uri, position_of(bare, "ENRICH"))
    for row in ("| ASYNC | ORDERED | default |", "| CAPACITY | 100 | default |", "| TIMEOUT | 30s | default |",
                "| RETRY | none | default |", "| ON MISS | NULL | default |", "| ON ERROR | FAIL | default |",
                "| ON OUTAGE | CONTINUE | default |"):
        assert row in shown


async def test_hover_on_a_model_enrich_shows_the_model_and_its_rates(client):
    path = EXAMPLES / "tickets" / "pipeline.flow"
    uri, text = await _open(client, path)
    shown = await hover_text(client, uri, position_of(text, "ENRICH tickets", after=2))
    assert "WITH MODEL 'gpt-4.1-mini' AT 'http://127.0.0.1:8765/v1'" in shown
    assert "| RATE | 10 PER SECOND (600 PER MINUTE), 200000 TOKENS PER MINUTE |  |" in shown
    assert "| CAPACITY | 16 ADAPTIVE |  |" in shown and "| ON OUTAGE | CONTINUE | default |" in shown
    assert "| STORE | no | default |" in shown and "| BUDGET | none | default |" in shown


async def test_definition_of_streams_sources_broadcasts_and_python_functions(client):
    uri, text = await _open(client, FRAUD)

    async def definition(position):
        result = await client.text_document_definition_async(types.DefinitionParams(doc(uri), position))
        return [(r.uri, r.range.start.line, r.range.start.character, r.range.end.character) for r in result]

    line = text[:text.index("STREAM enriched")].count("\n")
    assert await definition(position_of(text, "MATCH enriched", after=8)) == [(uri, line, 7, 15)]
    line = text[:text.index("BROADCAST rules")].count("\n")
    assert await definition(position_of(text, "AGAINST rules", after=10)) == [(uri, line, 10, 15)]
    line = text[:text.index("SOURCE orders")].count("\n")
    assert await definition(position_of(text, "FROM orders;", after=6)) == [(uri, line, 7, 13)]
    assert await definition(position_of(text, "EXPECT ON orders", after=11)) == [(uri, line, 7, 13)]
    assert await definition(position_of(text, "PARQUET", after=2)) == []

    uri, text = await _open(client, DEVICES)
    module = (DEVICES.parent / "devices.py")
    line = module.read_text()[: module.read_text().index("def check")].count("\n")
    assert await definition(position_of(text, "'devices:check'", after=10)) == \
        [(module.resolve().as_uri(), line, 4, 9)]


async def test_document_symbols_list_every_statement_with_columns(client):
    uri, _ = await _open(client, FRAUD)
    result = await client.text_document_document_symbol_async(types.DocumentSymbolParams(doc(uri)))
    assert [(s.name, s.detail) for s in result] == [
        ("fraud_alerts", "PIPELINE"), ("orders", "SOURCE"), ("rule_updates", "SOURCE"), ("rules", "BROADCAST"),
        ("✓ orders", "EXPECT ON"), ("paid", "STREAM = SELECT"), ("enriched", "STREAM = ENRICH"),
        ("flagged", "STREAM = MATCH"), ("per_customer", "STREAM = SELECT"), ("→ flagged", "SINK"),
        ("→ per_customer", "SINK")]
    assert [c.name for c in result[4].children] == ["positive_amount"]
    enriched = result[6]
    assert enriched.kind == types.SymbolKind.Function and enriched.range.start.line == 25
    assert [(c.name, c.detail) for c in enriched.children][-2:] == [("tier", "STRING"), ("risk", "DOUBLE")]


async def test_code_lenses_explain_and_run_tests_beside_a_test_file(client, tmp_path):
    uri, text = await _open(client, FRAUD)
    result = await client.text_document_code_lens_async(types.CodeLensParams(doc(uri)))
    assert [(lens.command.title, lens.command.command, list(lens.command.arguments)) for lens in result] == [
        ("Explain", "dslc.explain", [uri]), ("Run tests (pipeline.test.yaml)", "dslc.runTests", [uri])]
    assert result[0].range.start.line == text[:text.index("PIPELINE")].count("\n")
    explained = await client.workspace_execute_command_async(types.ExecuteCommandParams("dslc.explain", [uri]))
    assert explained["ok"] and "enriched := Enrich[paid] HTTP GET" in explained["text"]

    # no test file beside it: only Explain; an unsaved edit is what Explain shows
    alone = tmp_path / "alone.flow"
    alone.write_text(FRAUD.read_text())
    edited = FRAUD.read_text().replace("amount > 0", "amount > 7")
    await open_and_wait(client, alone.as_uri(), edited)
    result = await client.text_document_code_lens_async(types.CodeLensParams(doc(alone.as_uri())))
    assert [lens.command.title for lens in result] == ["Explain"]
    explained = await client.workspace_execute_command_async(
        types.ExecuteCommandParams("dslc.explain", [alone.as_uri()]))
    assert "positive_amount CHECK (amount > 7) -> DROP" in explained["text"]
    # a test file that names the pipeline with `pipeline:` counts too
    (tmp_path / "cases.test.yaml").write_text("pipeline: alone.flow\ncases: []\n")
    result = await client.text_document_code_lens_async(types.CodeLensParams(doc(alone.as_uri())))
    assert [lens.command.title for lens in result] == ["Explain", "Run tests (cases.test.yaml)"]


async def test_explain_of_a_file_with_errors_is_its_diagnostics(client):
    text = "SOURCE s FROM JSON 'in/' SCHEMA (k STRING);\nSTREAM t = SELECT nope FROM s;\nSINK t TO CONSOLE;\n"
    uri = "untitled:explain-errors"
    await open_and_wait(client, uri, text)
    explained = await client.workspace_execute_command_async(types.ExecuteCommandParams("dslc.explain", [uri]))
    assert not explained["ok"]
    assert "untitled:explain-errors:2:19: error[E0204]: unknown column 'nope'" in explained["text"]


TINY = "SOURCE orders FROM JSON 'in/' SCHEMA (id STRING, amount DOUBLE);\n" \
       "STREAM big = SELECT id FROM orders WHERE amount > 10;\nSINK big TO CONSOLE;\n"
TINY_CASES = """\
cases:
  - name: only big orders
    sources:
      orders: [{id: a, amount: 5.0}, {id: b, amount: 50.0}]
    expect:
      big: [{id: b}]
"""


@pytest.mark.slow
@pytest.mark.spark
async def test_the_run_tests_lens_runs_dslc_test_and_returns_its_report(client, tmp_path):
    flow = tmp_path / "tiny.flow"
    flow.write_text(TINY)
    (tmp_path / "tiny.test.yaml").write_text(TINY_CASES)
    await open_and_wait(client, flow.as_uri(), TINY)
    result = await client.workspace_execute_command_async(types.ExecuteCommandParams("dslc.runTests", [flow.as_uri()]))
    assert result["ok"], result["text"]
    assert "tiny.test.yaml" in result["text"] and "1 passed, 0 failed" in result["text"]
    unsaved = await client.workspace_execute_command_async(
        types.ExecuteCommandParams("dslc.runTests", ["untitled:Untitled-9"]))
    assert unsaved == {"ok": False, "text": "save the file first: dslc test runs the test files beside it"}
