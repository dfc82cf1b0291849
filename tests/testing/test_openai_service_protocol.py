"""The local OpenAI-compatible service behaves as the real API where #48 item 10 found it did not:
each difference driven by the official `openai` SDK. What the API accepts is accepted (strict
schemas with anyOf/$ref, content as parts, tool calls and results, token-id embedding input,
`n`, `stream`), and what it refuses is refused with its status, `param` and `code`."""
from __future__ import annotations

import json

import pytest

from dslc.testing.openai_service import OpenAIService, embedding_of, keyword_labeller, serve_in_thread, tokens_text

openai = pytest.importorskip("openai")   # the test extra installs it

LABELS = keyword_labeller({"category": [("invoice", "billing"), ("", "other")], "urgency": [("down", 5), ("", 2)]})
FLAT = {"type": "object", "additionalProperties": False, "required": ["category", "urgency"],
        "properties": {"category": {"type": "string"}, "urgency": {"type": "integer"}}}


@pytest.fixture(scope="module")
def running():
    with serve_in_thread(OpenAIService(models=("gpt-test", "emb"), labeller=LABELS)) as service:
        yield service


@pytest.fixture
def client(running):
    return openai.OpenAI(base_url=running.base_url, api_key="sk-test", max_retries=0)


def _structured(name: str, schema: dict) -> dict:
    return {"type": "json_schema", "json_schema": {"name": name, "strict": True, "schema": schema}}


def test_strict_schemas_with_anyof_defs_and_recursive_refs_are_answered_as_they_say(client):
    """The API takes anyOf, $defs, $ref and `#` recursion in strict mode; the service refused them."""
    node = {"type": "object", "additionalProperties": False, "required": ["label", "children"],
            "properties": {"label": {"type": "string"},
                           "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}
    schema = {"type": "object", "additionalProperties": False, "required": ["ticket", "tree", "note"],
              "$defs": {"ticket": FLAT, "node": node},
              "properties": {"ticket": {"$ref": "#/$defs/ticket"}, "tree": {"$ref": "#/$defs/node"},
                             "note": {"anyOf": [{"type": "string"}, {"type": "null"}]}}}
    answer = client.chat.completions.create(model="gpt-test", response_format=_structured("nested", schema),
                                            messages=[{"role": "user", "content": "my invoice"}])
    value = json.loads(answer.choices[0].message.content)
    ticket = value["ticket"]
    assert set(ticket) == {"category", "urgency"} and isinstance(ticket["category"], str) \
        and isinstance(ticket["urgency"], int)
    assert value["note"] is None or isinstance(value["note"], str)

    def fits(tree, depth=0):
        assert set(tree) == {"label", "children"} and isinstance(tree["label"], str) and depth < 10
        for child in tree["children"]:
            fits(child, depth + 1)
    fits(value["tree"])
    with pytest.raises(openai.BadRequestError, match="was not found in the schema") as refused:
        client.chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": "x"}],
                                       response_format=_structured("a", {**schema, "$defs": {"ticket": FLAT}}))
    assert refused.value.body["param"] == "response_format"
    with pytest.raises(openai.BadRequestError, match="root of the schema must be an object"):
        client.chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": "x"}],
                                       response_format=_structured("a", {"anyOf": [FLAT]}))


def test_content_as_a_list_of_parts_is_read_and_counted(client, running):
    parts = [{"type": "text", "text": "Subject: invoice"}, {"type": "text", "text": "the site is down"},
             {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}]
    answer = client.chat.completions.create(model="gpt-test", response_format=_structured("t", FLAT), messages=[
        {"role": "system", "content": [{"type": "text", "text": "You label tickets."}]},
        {"role": "user", "content": parts}])
    assert json.loads(answer.choices[0].message.content) == {"category": "billing", "urgency": 5}
    plain = client.chat.completions.create(model="gpt-test", response_format=_structured("t", FLAT), messages=[
        {"role": "system", "content": "You label tickets."},
        {"role": "user", "content": "Subject: invoice\nthe site is down"}])
    assert answer.usage.prompt_tokens == plain.usage.prompt_tokens + 85        # an image's tokens
    with pytest.raises(openai.BadRequestError) as refused:    # a system message takes text parts only
        client.chat.completions.create(model="gpt-test", messages=[
            {"role": "system", "content": [{"type": "image_url", "image_url": {"url": "x"}}]},
            {"role": "user", "content": "x"}])
    assert refused.value.body["param"] == "messages[0].content[0].type" and refused.value.code == "invalid_value"


def test_tool_calls_and_their_results_are_a_conversation(client):
    tools = [{"type": "function", "function": {"name": "route", "strict": True, "parameters": FLAT}}]
    forced = client.chat.completions.create(
        model="gpt-test", tools=tools, tool_choice={"type": "function", "function": {"name": "route"}},
        messages=[{"role": "user", "content": "the invoice page is down"}])
    [call] = forced.choices[0].message.tool_calls
    assert call.function.name == "route" and json.loads(call.function.arguments) == {"category": "billing", "urgency": 5}
    assert forced.choices[0].message.content is None
    conversation = [{"role": "user", "content": "the invoice page is down"},
                    {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
                    {"role": "tool", "tool_call_id": call.id, "content": "routed to billing"}]
    answer = client.chat.completions.create(model="gpt-test", tools=tools, messages=conversation,
                                            response_format=_structured("t", FLAT))
    assert answer.choices[0].finish_reason == "stop" and json.loads(answer.choices[0].message.content)["urgency"] == 5
    with pytest.raises(openai.BadRequestError, match="must be a response to a preceeding message with 'tool_calls'"):
        client.chat.completions.create(model="gpt-test", messages=[conversation[0], conversation[2]])
    with pytest.raises(openai.BadRequestError, match="did not have response messages: " + call.id):
        client.chat.completions.create(model="gpt-test", messages=[*conversation[:2], conversation[0]])


def test_embeddings_take_token_ids(client, running):
    one = client.embeddings.create(model="emb", input=[101, 2023, 102], encoding_format="float")
    many = client.embeddings.create(model="emb", input=[[1, 2, 3], [4, 5]], encoding_format="float")
    assert one.data[0].embedding == embedding_of(tokens_text([101, 2023, 102]))
    assert [d.embedding for d in sorted(many.data, key=lambda d: d.index)] == \
        [embedding_of(tokens_text([1, 2, 3])), embedding_of(tokens_text([4, 5]))]
    assert one.usage.total_tokens == 3 and many.usage.total_tokens == 5
    with pytest.raises(openai.BadRequestError, match=r"'\$.input' is invalid"):
        client.embeddings.create(model="emb", input=[[1, 2], "mixed", []])


def test_n_gives_that_many_choices(client):
    one = client.chat.completions.create(model="gpt-test", response_format=_structured("t", FLAT),
                                         messages=[{"role": "user", "content": "invoice"}])
    three = client.chat.completions.create(model="gpt-test", n=3, response_format=_structured("t", FLAT),
                                           messages=[{"role": "user", "content": "invoice"}])
    assert [c.index for c in three.choices] == [0, 1, 2]
    assert {c.message.content for c in three.choices} == {one.choices[0].message.content}
    assert three.usage.completion_tokens == 3 * one.usage.completion_tokens
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model="gpt-test", n=0, messages=[{"role": "user", "content": "x"}])
    assert (refused.value.body["param"], refused.value.code) == ("n", "integer_below_min_value")


def test_stream_sends_chunks_then_done_with_usage_last(client):
    plain = client.chat.completions.create(model="gpt-test", response_format=_structured("t", FLAT),
                                           messages=[{"role": "user", "content": "invoice, site down"}])
    chunks = list(client.chat.completions.create(
        model="gpt-test", stream=True, stream_options={"include_usage": True}, response_format=_structured("t", FLAT),
        messages=[{"role": "user", "content": "invoice, site down"}]))
    assert len(chunks) > 3 and all(c.object == "chat.completion.chunk" for c in chunks)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == plain.choices[0].message.content
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage.total_tokens == plain.usage.total_tokens
    assert all(c.usage is None for c in chunks[:-1])
    refused = list(client.chat.completions.create(model="gpt-test", stream=True,
                                                  messages=[{"role": "user", "content": "[[refuse]] x"}]))
    assert "".join(c.choices[0].delta.refusal or "" for c in refused if c.choices).startswith("I'm sorry")
    with pytest.raises(openai.BadRequestError, match="only allowed when 'stream' is enabled"):
        client.chat.completions.create(model="gpt-test", stream_options={"include_usage": True},
                                       messages=[{"role": "user", "content": "x"}])


@pytest.mark.parametrize("extra, param, code", [
    ({"temperature": 3}, "temperature", "decimal_above_max_value"),
    ({"temperature": -0.5}, "temperature", "decimal_below_min_value"),
    ({"top_p": 1.5}, "top_p", "decimal_above_max_value"),
    ({"presence_penalty": 2.5}, "presence_penalty", "decimal_above_max_value"),
    ({"temperature": "hot"}, "temperature", "invalid_type"),
    ({"max_tokens": 0}, "max_tokens", "integer_below_min_value"),
])
def test_out_of_range_parameters_are_refused_as_the_api_refuses_them(client, running, extra, param, code):
    before = running.stats["chat_calls"]
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": "x"}],
                                       extra_body=extra)
    assert (refused.value.body["param"], refused.value.code) == (param, code)
    assert refused.value.body["type"] == "invalid_request_error" and running.stats["chat_calls"] == before


def test_unknown_parameters_are_refused(client):
    with pytest.raises(openai.BadRequestError, match="Unrecognized request argument supplied: temprature"):
        client.chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": "x"}],
                                       extra_body={"temprature": 0.2})
    with pytest.raises(openai.BadRequestError, match="Unrecognized request argument supplied: truncate"):
        client.embeddings.create(model="emb", input="x", extra_body={"truncate": True})
    # every parameter the API documents is known
    answer = client.chat.completions.create(
        model="gpt-test", messages=[{"role": "user", "content": "x"}], temperature=0.2, top_p=0.9, seed=7,
        max_completion_tokens=50, presence_penalty=0.1, frequency_penalty=0.1, user="u1", store=False,
        service_tier="flex", parallel_tool_calls=False, tools=[{"type": "function", "function": {"name": "f"}}],
        metadata={"k": "v"}, stop=["\n\n"], logprobs=False)
    assert answer.choices[0].finish_reason == "stop"
