"""`POST /v1/chat/completions`: the request checked as the API checks it (parameters, ranges,
messages, structured outputs, tools), `n` choices, and `stream` as server-sent events of
`chat.completion.chunk` objects ending in `[DONE]` (usage last with `stream_options.include_usage`)."""
from __future__ import annotations

import asyncio
import hashlib
import json
import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aiohttp import web

from . import messages as chat_messages
from .answers import count_tokens
from .errors import invalid
from .params import CHAT_PARAMETERS, CHAT_RANGES, CHAT_TYPES, check_known, check_ranges, check_types
from .schemas import response_schema, strict_schema_problem

if TYPE_CHECKING:
    from dslc.testing.openai_service import OpenAIService

_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@dataclass(frozen=True)
class ChatRequest:
    """What a checked request asks for."""

    model: str
    messages: list[dict[str, Any]]
    schema: dict[str, Any] | None     # the structured output asked for (None: free text)
    n: int
    stream: bool
    include_usage: bool
    max_tokens: int | None
    forced_tool: dict[str, Any] | None   # the function the answer must call (tool_choice)
    forced_by_name: bool

    @property
    def prompt(self) -> str:
        """What the labeller reads: the user's and developer's text."""
        return "\n".join(chat_messages.text_of(m) for m in self.messages if m["role"] in ("user", "developer"))

    @property
    def text(self) -> str:
        return "\n".join(chat_messages.text_of(m) for m in self.messages)


def parse(body: dict[str, Any]) -> ChatRequest:
    """The request, or the API's 400 for the first thing it refuses."""
    check_known(body, CHAT_PARAMETERS)
    check_types(body, CHAT_TYPES)
    check_ranges(body, CHAT_RANGES)
    chat_messages.check(body.get("messages"))
    schema = response_schema(body["response_format"]) if body.get("response_format") is not None else None
    stream = bool(body.get("stream"))
    if body.get("stream_options") is not None and not stream:
        raise invalid("The 'stream_options' parameter is only allowed when 'stream' is enabled.", "stream_options")
    forced, by_name = _forced_tool(body.get("tools"), body.get("tool_choice"))
    return ChatRequest(model=body["model"], messages=body["messages"], schema=schema, n=body.get("n") or 1,
                       stream=stream, include_usage=bool((body.get("stream_options") or {}).get("include_usage")),
                       max_tokens=body.get("max_completion_tokens", body.get("max_tokens")),
                       forced_tool=forced, forced_by_name=by_name)


def _forced_tool(tools: Any, choice: Any) -> tuple[dict[str, Any] | None, bool]:
    """The tools checked; the function `tool_choice` makes the answer call (None: a plain answer)."""
    if tools is None:
        if choice is not None:
            raise invalid("Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified.",
                          "tool_choice")
        return None, False
    functions = {}
    for i, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(tool, dict) or tool.get("type") != "function" or not isinstance(function, dict):
            raise invalid(f"Missing required parameter: 'tools[{i}].function'.", f"tools[{i}].function",
                          "missing_required_parameter")
        if not isinstance(function.get("name"), str) or not _TOOL_NAME.match(function["name"]):
            raise invalid(f"Invalid 'tools[{i}].function.name': string does not match pattern. Expected a string "
                          "that matches the pattern '^[a-zA-Z0-9_-]+$'.", f"tools[{i}].function.name", "invalid_value")
        parameters = function.get("parameters", {"type": "object", "properties": {}})
        problem = strict_schema_problem(parameters) if function.get("strict") else None
        if problem:
            raise invalid(f"Invalid schema for function '{function['name']}': {problem}", f"tools[{i}].function.parameters")
        functions[function["name"]] = {"name": function["name"], "parameters": parameters}
    if choice in (None, "auto", "none"):
        return None, False
    if choice == "required":
        return next(iter(functions.values())), False
    name = choice.get("function", {}).get("name") if isinstance(choice, dict) else None
    if name not in functions:
        raise invalid(f"Invalid value for 'tool_choice': function '{name}' is not among the tools.", "tool_choice")
    return functions[name], True


SERVICE_TIERS = ("auto", "default", "flex", "scale", "priority")
RESOURCE_UNAVAILABLE = "resource_unavailable"


def service_tier(body: dict[str, Any]) -> str:
    """The tier a request asks for (`service_tier`), checked as the API checks it; "default" when absent."""
    tier = body.get("service_tier")
    if tier is None:
        return "default"
    if tier not in SERVICE_TIERS:
        raise invalid(f"Invalid value: '{tier}'. Supported values are: 'auto', 'default', 'flex', 'scale' and "
                      "'priority'.", "service_tier", "invalid_value")
    return "default" if tier == "auto" else tier


def answer(service: "OpenAIService", chat: ChatRequest, tier: str) -> tuple[dict[str, Any], dict[str, int]]:
    """The completion a request gets (without its id) and its usage: what the online endpoint
    sends and what a batch's output line carries (openai_api/batches.py)."""
    choices = [_choice(service, chat, i) for i in range(chat.n)]
    prompt_tokens = chat_messages.prompt_tokens(chat.messages, count_tokens)
    completion_tokens = sum(c.pop("_tokens") for c in choices)
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
             "total_tokens": prompt_tokens + completion_tokens}
    return {"object": "chat.completion", "created": int(time.time()), "model": chat.model, "choices": choices,
            "usage": usage, "service_tier": tier, "system_fingerprint": "fp_dslc_test"}, usage


async def handle(service: "OpenAIService", request: web.Request) -> web.StreamResponse:
    body = await service.read_body(request)
    chat = parse(body)
    tier = service_tier(body)
    if tier == "flex":
        refused = service.flex_refusal()       # flex has no capacity now and then: a 429, nothing charged
        if refused is not None:
            return refused
    completion, usage = answer(service, chat, tier)
    denied = await service.serve(usage["total_tokens"], service.latency_s * (service.flex_slowdown if tier == "flex" else 1))
    if denied is not None:
        return denied
    number = service.record_chat(chat.text, usage, tier, chat.schema)
    completion = {"id": f"chatcmpl-{number}", **completion}
    if chat.stream:
        return await _stream(request, completion, chat.include_usage, service.limit_headers())
    return web.json_response(completion, headers=service.limit_headers())


def _choice(service: "OpenAIService", chat: ChatRequest, index: int) -> dict[str, Any]:
    """One choice of the answer (with its completion tokens under `_tokens`)."""
    if chat.forced_tool is not None:
        arguments = json.dumps(service.labeller(chat.prompt, chat.forced_tool["parameters"]))
        digest = hashlib.blake2b(f"{index}:{arguments}".encode(), digest_size=6).hexdigest()
        call = {"id": f"call_{digest}", "type": "function",
                "function": {"name": chat.forced_tool["name"], "arguments": arguments}}
        message = {"role": "assistant", "content": None, "refusal": None, "tool_calls": [call]}
        finish = "stop" if chat.forced_by_name else "tool_calls"     # as the API says it for a named function
        return {"index": index, "finish_reason": finish, "logprobs": None, "message": message,
                "_tokens": count_tokens(arguments)}
    content, refusal, finish = service.complete(chat.prompt, chat.schema)
    tokens = count_tokens(content if content is not None else refusal or "")
    if chat.max_tokens is not None and tokens > chat.max_tokens and content is not None:
        content, tokens, finish = content[:chat.max_tokens * 4], chat.max_tokens, "length"
    message = {"role": "assistant", "content": content, "refusal": refusal}
    return {"index": index, "finish_reason": finish, "logprobs": None, "message": message, "_tokens": tokens}


async def _stream(request: web.Request, answer: dict[str, Any], include_usage: bool,
                  headers: dict[str, str]) -> web.StreamResponse:
    """The answer as the API streams it: a chunk per piece of each choice, then `[DONE]`."""
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache",
                                           **headers})
    await response.prepare(request)
    for chunk in chunks(answer, include_usage):
        await response.write(f"data: {json.dumps(chunk)}\n\n".encode())
        await asyncio.sleep(0)
    await response.write(b"data: [DONE]\n\n")
    await response.write_eof()
    return response


def chunks(answer: dict[str, Any], include_usage: bool) -> list[dict[str, Any]]:
    """The `chat.completion.chunk` objects of an answer, in the order the API sends them."""
    head = {k: answer[k] for k in ("id", "created", "model", "service_tier", "system_fingerprint")}
    head["object"] = "chat.completion.chunk"
    extra = {"usage": None} if include_usage else {}
    out = []
    for choice in answer["choices"]:
        for delta in _deltas(choice["message"]):
            out.append({**head, "choices": [{"index": choice["index"], "delta": delta, "logprobs": None,
                                             "finish_reason": None}], **extra})
        out.append({**head, "choices": [{"index": choice["index"], "delta": {}, "logprobs": None,
                                         "finish_reason": choice["finish_reason"]}], **extra})
    if include_usage:
        out.append({**head, "choices": [], "usage": answer["usage"]})
    return out


def _deltas(message: dict[str, Any]) -> list[dict[str, Any]]:
    """A message cut into the deltas of a stream: the role first, then the text a few tokens at a time."""
    out: list[dict[str, Any]] = [{"role": "assistant", "content": "" if message.get("tool_calls") is None else None,
                                  "refusal": None}]
    for k, call in enumerate(message.get("tool_calls") or []):
        out.append({"tool_calls": [{"index": k, "id": call["id"], "type": "function",
                                    "function": {"name": call["function"]["name"], "arguments": ""}}]})
        out += [{"tool_calls": [{"index": k, "function": {"arguments": piece}}]}
                for piece in _pieces(call["function"]["arguments"])]
    for field in ("content", "refusal"):
        if message.get(field):
            out += [{field: piece} for piece in _pieces(message[field])]
    return out


def _pieces(text: str, size: int = 12) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)]
