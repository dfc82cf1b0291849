"""The `messages` of a chat completion, checked as the API checks them: every role (tool results
answering an assistant's `tool_calls` included), content as a string or as a list of parts."""
from __future__ import annotations

from typing import Any

from .errors import invalid

ROLES = ("system", "developer", "user", "assistant", "tool", "function")
# the kinds of content part each role may send
PARTS = {"system": ("text",), "developer": ("text",), "tool": ("text",), "function": ("text",),
         "user": ("text", "image_url", "input_audio", "file"), "assistant": ("text", "refusal")}
IMAGE_TOKENS = 85        # what a low-detail image costs in the API's count


def check(messages: Any) -> None:
    """Refuse what the API refuses (the first problem, as the API names it)."""
    if not isinstance(messages, list):
        raise invalid("Invalid type for 'messages': expected an array of objects.", "messages", "invalid_type")
    if not messages:
        raise invalid("Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty "
                      "array instead.", "messages", "empty_array")
    pending: dict[str, int] = {}      # tool_call_id -> index of the assistant message that asked
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, dict) or message.get("role") not in ROLES:
            role = message.get("role") if isinstance(message, dict) else None
            raise invalid(f"Invalid value: '{role}'. Supported values are: 'system', 'assistant', 'user', "
                          "'function', 'tool', and 'developer'.", f"{where}.role", "invalid_value")
        role = message["role"]
        if role != "tool" and pending:
            _unanswered(pending, i)
        _check_content(message, role, where)
        if role == "assistant":
            pending = {call["id"]: i for call in _tool_calls(message, where)}
        elif role == "tool":
            call_id = message.get("tool_call_id")
            if not isinstance(call_id, str):
                raise invalid(f"Missing required parameter: '{where}.tool_call_id'.", f"{where}.tool_call_id",
                              "missing_required_parameter")
            if call_id not in pending:
                raise invalid("Invalid parameter: messages with role 'tool' must be a response to a preceeding "
                              "message with 'tool_calls'.", f"messages.[{i}].role")
            del pending[call_id]
        elif role == "function" and not isinstance(message.get("name"), str):
            raise invalid(f"Missing required parameter: '{where}.name'.", f"{where}.name", "missing_required_parameter")
    if pending:
        _unanswered(pending, len(messages))


def _unanswered(pending: dict[str, int], at: int) -> None:
    asked = min(pending.values())
    raise invalid("An assistant message with 'tool_calls' must be followed by tool messages responding to each "
                  f"'tool_call_id'. The following tool_call_ids did not have response messages: "
                  f"{', '.join(sorted(pending))}", f"messages.[{asked}].role")


def _check_content(message: dict[str, Any], role: str, where: str) -> None:
    content = message.get("content")
    if content is None and role == "assistant" and (message.get("tool_calls") or message.get("function_call")
                                                    or message.get("refusal")):
        return
    if isinstance(content, str):
        return
    if not isinstance(content, list):
        raise invalid(f"Invalid type for '{where}.content': expected one of a string or array of objects, but got "
                      f"{'null' if content is None else type(content).__name__} instead.", f"{where}.content",
                      "invalid_type")
    for j, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind not in PARTS[role]:
            allowed = ", ".join(f"'{k}'" for k in PARTS[role])
            raise invalid(f"Invalid value: '{kind}'. Supported values are: {allowed}.", f"{where}.content[{j}].type",
                          "invalid_value")
        _check_part(part, kind, f"{where}.content[{j}]")


def _check_part(part: dict[str, Any], kind: str, where: str) -> None:
    field = {"text": "text", "refusal": "refusal", "image_url": "image_url", "input_audio": "input_audio",
             "file": "file"}[kind]
    value = part.get(field)
    ok = isinstance(value, str) if kind in ("text", "refusal") else isinstance(value, dict)
    if ok and kind == "image_url":
        ok = isinstance(value.get("url"), str)
    if not ok:
        raise invalid(f"Missing required parameter: '{where}.{field}'.", f"{where}.{field}", "missing_required_parameter")


def _tool_calls(message: dict[str, Any], where: str) -> list[dict[str, Any]]:
    calls = message.get("tool_calls") or []
    for k, call in enumerate(calls):
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(call, dict) or not isinstance(call.get("id"), str) or not isinstance(function, dict) \
                or not isinstance(function.get("name"), str) or not isinstance(function.get("arguments"), str):
            raise invalid(f"Missing required parameter: '{where}.tool_calls[{k}]' needs 'id', 'type' and a "
                          "'function' with 'name' and 'arguments'.", f"{where}.tool_calls[{k}]",
                          "missing_required_parameter")
    return calls


def text_of(message: dict[str, Any]) -> str:
    """The text a message carries (its text parts joined; other parts carry none)."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "\n".join(part.get("text") or part.get("refusal") or "" for part in content)


def prompt_tokens(messages: list[dict[str, Any]], count) -> int:
    """The messages' tokens as the service counts them: their text, 4 a message, an image 85."""
    images = sum(1 for m in messages if isinstance(m.get("content"), list)
                 for part in m["content"] if part.get("type") == "image_url")
    return sum(count(text_of(m) or " ") + 4 for m in messages) + IMAGE_TOKENS * images
