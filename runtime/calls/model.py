"""ENRICH WITH MODEL: one chat completion per element from an OpenAI-compatible API, asked for
JSON that fits RETURNS (structured output: `response_format` of type `json_schema`, strict).

The answer's message content is parsed and checked against the schema. A refusal, a truncated
answer (`finish_reason` `length`), content that is not JSON or does not fit RETURNS is a
CallError of class `answer` (calls/errors.py: not retried, the same prompt would be paid again
for the same answer) that keeps the content (`raw`), so ON ERROR decides and a dead letter shows
what the model said. Empty content with no refusal is an error too; a model has no "miss".
"""
from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from dslc.runtime.config import Enrich, ModelCall
from dslc.runtime.core.operator import Row
from dslc.runtime.limits.tokens import message_tokens
from dslc.runtime.schema import provenance
from dslc.runtime.schema.json_schema import mismatch, returns_schema

from .base import CallError, answer_error, check_result_types, key_text
from .openai_api import OpenAICompatibleCall


def schema_name(operator: str) -> str:
    """The json_schema `name` (letters, digits, _ and -, at most 64) for an operator."""
    return (re.sub(r"[^A-Za-z0-9_-]", "_", operator) or "result")[:64]


class ModelEnrichCall(OpenAICompatibleCall):
    """`POST {AT}/chat/completions` with the SYSTEM and PROMPT messages and RETURNS as the schema."""

    def __init__(self, config: Enrich) -> None:
        assert isinstance(config.call, ModelCall)
        super().__init__(config)
        self.call = config.call
        self.schema = returns_schema(config.returns, config.call.limits)
        self.response_format = {"type": "json_schema", "json_schema": {
            "name": schema_name(config.name), "strict": True, "schema": self.schema}}
        self.notes = provenance.notes(config)

    def messages(self, row: Row) -> list[dict[str, str]]:
        """The request's messages for a row (UnsendableRequest when a placeholder is null)."""
        out = []
        if self.call.system is not None:
            out.append({"role": "system", "content": self.fill(self.call.system, row)})
        out.append({"role": "user", "content": self.fill(self.call.prompt, row)})
        return out

    endpoint = "/chat/completions"

    def request(self, row: Row) -> tuple[dict[str, Any], int]:
        """The request body for a row and its prompt's tokens (UnsendableRequest: a null
        placeholder): what is sent online, and what a provider batch's line carries."""
        return self._request_of(self.messages(row))

    def _request_of(self, messages: list[dict[str, str]]) -> tuple[dict[str, Any], int]:
        body = {"model": self.call.model, "messages": messages, "response_format": self.response_format}
        return body, message_tokens([m["content"] for m in messages])

    def keyed_request(self, row: Row) -> tuple[str, Callable[[], tuple[dict[str, Any], int]]] | None:
        """The row's request key and a maker of its request, the messages filled once for both (a
        provider batch's lines, runtime/batches/): the same key as `request_key` (the answer store
        is shared by online and batch runs) and the same request as `request`. None: no key (a
        null placeholder)."""
        filled = self.call.call_key(row)
        values = tuple(filled.values())
        if None in values:
            return None
        key = key_text(self, values)
        if key is None:
            return None
        system = filled.get("system", self.call.system)
        messages = ([{"role": "system", "content": system}] if system is not None else []) + \
            [{"role": "user", "content": filled["prompt"]}]
        return key, lambda: self._request_of(messages)

    async def __call__(self, row: Row) -> Any:
        body, tokens = self.request(row)
        if self.flex:
            body["service_tier"] = "flex"
        return self.answer(await self.post(self.endpoint, body, tokens, completes=True), body)

    def answer(self, answer: dict[str, Any], body: dict[str, Any] | None = None) -> Any:
        """An answer's RETURNS values, checked as every answer is (CallError: the element's error);
        with `body` (the request as sent), the note of the model as answered and the prompt."""
        result = self.result(answer)
        if self.notes and body is not None:
            provenance.noted(result, provenance.note(
                model=answer.get("model"), system_fingerprint=answer.get("system_fingerprint"),
                prompt_sha256=provenance.sha256(body["messages"][-1]["content"])))
        return result

    def result(self, answer: dict[str, Any]) -> dict[str, Any]:
        """The RETURNS values of a chat completion, checked against their columns' types, else an
        `answer` CallError keeping the content."""
        choices = answer.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise answer_error("the answer has no choices")
        choice = choices[0]
        message = choice.get("message") if isinstance(choice.get("message"), dict) else {}
        content = message.get("content")
        refusal = message.get("refusal")
        if refusal:
            raise answer_error(f"the model refused: {str(refusal)[:200]}", raw=str(refusal))
        finish = choice.get("finish_reason")
        if finish == "length":
            raise answer_error("the model's answer was cut short (finish_reason length)", raw=content)
        if finish == "content_filter":
            raise answer_error("the model's answer was withheld (finish_reason content_filter)", raw=content)
        if not isinstance(content, str) or not content.strip():
            raise answer_error("the model answered no content", raw=content if isinstance(content, str) else None)
        try:
            value = json.loads(content)
        except ValueError as exc:
            raise answer_error(f"the model's content is not JSON: {exc}", raw=content) from None
        problem = mismatch(value, self.schema)
        if problem:
            raise answer_error(f"the model's content does not fit RETURNS: {problem}", raw=content)
        try:        # what JSON Schema cannot say: an INT's range (2^32, 1e20 are integers to it)
            return check_result_types(value, self.result_check)
        except CallError as exc:
            exc.raw = content       # the dead letter shows what the model said
            raise
