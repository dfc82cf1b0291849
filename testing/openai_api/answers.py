"""What the service answers, deterministically: JSON that fits the requested schema (made from
the prompt by a labeller), trigger words for the faults a real model produces, token counts,
and a pseudo-random unit vector per embedding input."""
from __future__ import annotations

import hashlib
import math
import struct
from collections.abc import Callable
from typing import Any

from .schemas import resolve_ref

REFUSE, LENGTH, BAD_JSON, WRONG_TYPE = "[[refuse]]", "[[length]]", "[[badjson]]", "[[wrongtype]]"
REFUSAL_TEXT = "I'm sorry, I cannot help with that request."
EMBEDDING_DIMENSIONS = 8
_DEEP = 3      # below this depth a recursive schema takes its way out (null, an empty array)

Labeller = Callable[[str, dict[str, Any]], dict[str, Any]]


def count_tokens(text: str) -> int:
    """The service's token count of a text: 4 characters a token, rounded up (at least 1)."""
    return max(1, math.ceil(len(text) / 4))


def keyword_labeller(rules: dict[str, list[tuple[str, Any]]] | None = None) -> Labeller:
    """A labeller that fills each schema property from `rules[property]`: the value of the first
    (keyword, value) whose keyword the prompt contains (case-insensitive), else the last rule's
    value; a property without rules gets a value of its type made from the prompt's hash."""
    rules = rules or {}

    def label(prompt: str, schema: dict[str, Any]) -> dict[str, Any]:
        lowered = prompt.lower()
        out = {}
        for name, prop in schema.get("properties", {}).items():
            chosen = rules.get(name)
            if chosen:
                out[name] = next((value for word, value in chosen if word and word.lower() in lowered), chosen[-1][1])
            else:
                out[name] = value_of_type(prop, f"{name}:{prompt}", schema)
        return out

    return label


def value_of_type(schema: dict[str, Any], seed: str, root: dict[str, Any] | None = None, depth: int = 0) -> Any:
    """A deterministic value that fits a JSON schema (`$ref`s resolved in `root`), derived from `seed`."""
    root = schema if root is None else root
    digest = int.from_bytes(hashlib.blake2b(seed.encode(), digest_size=8).digest(), "big")
    if "$ref" in schema:
        target = resolve_ref(schema["$ref"], root)
        return value_of_type(target, seed, root, depth + 1) if isinstance(target, dict) else None
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][digest % len(schema["enum"])]
    if "anyOf" in schema:
        options = schema["anyOf"]
        if depth >= _DEEP:     # deep in a recursive schema: the option that ends it
            options = [o for o in options if "$ref" not in o] or options
        return value_of_type(options[digest % len(options)], seed, root, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"]
        kind = "null" if not kinds or (depth >= _DEEP and "null" in kind) else kinds[0]
    return _of_kind(kind, schema, seed, root, depth, digest)


def _of_kind(kind: Any, schema: dict[str, Any], seed: str, root: dict[str, Any], depth: int, digest: int) -> Any:
    if kind == "string":
        return f"s{digest % 1000}"
    if kind == "integer":
        return digest % 5 + 1
    if kind == "number":
        return round((digest % 1000) / 100, 2)
    if kind == "boolean":
        return bool(digest % 2)
    if kind == "array":
        count = 0 if depth >= _DEEP else digest % 3 + 1
        return [value_of_type(schema.get("items", {}), f"{seed}/{i}", root, depth + 1) for i in range(count)]
    if kind == "object":
        return {k: value_of_type(v, f"{seed}/{k}", root, depth + 1) for k, v in schema.get("properties", {}).items()}
    return None


def embedding_of(text: str, dimensions: int = EMBEDDING_DIMENSIONS) -> list[float]:
    """The unit vector the service answers for a text (same text, same vector), float32 values."""
    raw = hashlib.shake_128(text.encode()).digest(4 * dimensions)
    values = [(b - 127.5) / 127.5 for b in raw[::4]]
    norm = math.sqrt(sum(v * v for v in values)) or 1.0
    return [struct.unpack("<f", struct.pack("<f", v / norm))[0] for v in values]


def tokens_text(tokens: list[int]) -> str:
    """The text the service embeds for an input given as token ids (it has no tokenizer): the same
    ids, the same vector (`embedding_of(tokens_text(ids))`)."""
    return "tokens:" + ",".join(str(t) for t in tokens)
