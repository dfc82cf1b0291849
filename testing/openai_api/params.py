"""Request parameters as the API checks them: every parameter known (an unknown one is refused, as
the API refuses it), numbers within their ranges, values of the right JSON type."""
from __future__ import annotations

from typing import Any

from .errors import invalid

# the parameters of POST /v1/chat/completions and POST /v1/embeddings the API accepts
CHAT_PARAMETERS = frozenset({
    "messages", "model", "audio", "frequency_penalty", "function_call", "functions", "logit_bias", "logprobs",
    "max_completion_tokens", "max_tokens", "metadata", "modalities", "n", "parallel_tool_calls", "prediction",
    "presence_penalty", "prompt_cache_key", "reasoning_effort", "response_format", "safety_identifier", "seed",
    "service_tier", "stop", "store", "stream", "stream_options", "temperature", "tool_choice", "tools",
    "top_logprobs", "top_p", "user", "verbosity", "web_search_options",
})
EMBEDDING_PARAMETERS = frozenset({"input", "model", "dimensions", "encoding_format", "user"})

# name: (JSON type, minimum, maximum)
CHAT_RANGES: dict[str, tuple[str, float | None, float | None]] = {
    "temperature": ("decimal", 0, 2), "top_p": ("decimal", 0, 1),
    "frequency_penalty": ("decimal", -2, 2), "presence_penalty": ("decimal", -2, 2),
    "n": ("integer", 1, 128), "max_tokens": ("integer", 1, None), "max_completion_tokens": ("integer", 1, None),
    "top_logprobs": ("integer", 0, 20), "seed": ("integer", None, None),
}
CHAT_TYPES: dict[str, type | tuple[type, ...]] = {
    "stream": bool, "logprobs": bool, "store": bool, "parallel_tool_calls": bool, "stream_options": dict,
    "metadata": dict, "logit_bias": dict, "tools": list, "user": str, "stop": (str, list),
}
_TYPE_NAMES = {bool: "a boolean", dict: "an object", list: "an array", str: "a string"}


def check_known(body: dict[str, Any], known: frozenset[str]) -> None:
    """The first parameter the API does not know, refused as the API refuses it."""
    for name in body:
        if name not in known:
            raise invalid(f"Unrecognized request argument supplied: {name}")


def check_ranges(body: dict[str, Any], ranges: dict[str, tuple[str, float | None, float | None]]) -> None:
    """Numbers of the right type within their ranges (null is a parameter left out)."""
    for name, (kind, low, high) in ranges.items():
        value = body.get(name)
        if value is None:
            continue
        numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not numeric or (kind == "integer" and not isinstance(value, int)):
            raise invalid(f"Invalid type for '{name}': expected {'an integer' if kind == 'integer' else 'a decimal'}, "
                          f"but got {_json_type(value)} instead.", name, "invalid_type")
        if low is not None and value < low:
            raise invalid(f"Invalid '{name}': {kind} below minimum value. Expected a value >= {low:g}, but got "
                          f"{value:g} instead.", name, f"{kind}_below_min_value")
        if high is not None and value > high:
            raise invalid(f"Invalid '{name}': {kind} above maximum value. Expected a value <= {high:g}, but got "
                          f"{value:g} instead.", name, f"{kind}_above_max_value")


def check_types(body: dict[str, Any], types: dict[str, type | tuple[type, ...]]) -> None:
    for name, kind in types.items():
        value = body.get(name)
        if value is not None and (not isinstance(value, kind) or (kind is not bool and isinstance(value, bool))):
            wanted = kind if isinstance(kind, type) else kind[0]
            raise invalid(f"Invalid type for '{name}': expected {_TYPE_NAMES.get(wanted, wanted.__name__)}, "
                          f"but got {_json_type(value)} instead.", name, "invalid_type")


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a decimal"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object" if isinstance(value, dict) else "null"
