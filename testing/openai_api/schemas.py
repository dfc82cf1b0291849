"""Structured outputs: the `response_format` of a chat completion and the rules a strict JSON
schema must follow (objects list every property as required and forbid others; `anyOf`, `enum`,
`const`, `$defs` and `$ref`, recursion included, as the API supports them)."""
from __future__ import annotations

import re
from typing import Any

from .errors import invalid

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
TYPES = ("string", "number", "integer", "boolean", "object", "array", "null")
MAX_DEPTH = 10          # levels of nesting the API allows in a strict schema


def response_schema(response_format: Any) -> dict[str, Any] | None:
    """The schema a `response_format` asks the answer to fit (None: free text), or the API's 400."""
    if not isinstance(response_format, dict):
        raise invalid("Invalid type for 'response_format': expected an object.", "response_format", "invalid_type")
    kind = response_format.get("type")
    if kind in ("text", "json_object"):
        return None if kind == "text" else {"type": "object", "properties": {}}
    if kind != "json_schema":
        raise invalid(f"Invalid value: '{kind}'. Supported values are: 'text', 'json_object' and 'json_schema'.",
                      "response_format.type", "invalid_value")
    spec = response_format.get("json_schema")
    if not isinstance(spec, dict):
        raise invalid("Missing required parameter: 'response_format.json_schema'.", "response_format.json_schema",
                      "missing_required_parameter")
    name = spec.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise invalid("Invalid 'response_format.json_schema.name': string does not match pattern. Expected a "
                      "string that matches the pattern '^[a-zA-Z0-9_-]+$'.", "response_format.json_schema.name",
                      "invalid_value")
    schema = spec.get("schema", {})
    if not isinstance(schema, dict):
        raise invalid("Invalid type for 'response_format.json_schema.schema': expected an object.",
                      "response_format.json_schema.schema", "invalid_type")
    if spec.get("strict"):
        problem = strict_schema_problem(schema)
        if problem:
            raise invalid(f"Invalid schema for response_format '{name}': {problem}", "response_format")
    return schema


def strict_schema_problem(schema: Any, where: str = "schema", root: dict[str, Any] | None = None,
                          depth: int = 0) -> str | None:
    """Why a schema is not valid for structured outputs in strict mode (None: it is)."""
    if root is None:
        root = schema
        problem = _root_problem(schema)
        if problem:
            return problem
    if depth > MAX_DEPTH:
        return f"{where} is nested more than {MAX_DEPTH} levels deep"
    if not isinstance(schema, dict):
        return f"{where} must be an object"
    if "$ref" in schema:
        return None if resolve_ref(schema["$ref"], root) is not None else \
            f"reference to component '{schema['$ref']}' which was not found in the schema ({where})"
    if "anyOf" in schema:
        options = schema["anyOf"]
        if not isinstance(options, list) or not options:
            return f"{where}.anyOf must be a non-empty array"
        return next((p for i, o in enumerate(options)
                     if (p := strict_schema_problem(o, f"{where}.anyOf[{i}]", root, depth + 1))), None)
    kind = schema.get("type")
    if kind is None and ("enum" in schema or "const" in schema):
        return None
    kinds = kind if isinstance(kind, list) else [kind]
    if not kinds or any(k not in TYPES for k in kinds):
        return f"{where} has type {kind!r}"
    if "object" in kinds:
        problem = _object_problem(schema, where, root, depth)
        if problem:
            return problem
    if "array" in kinds:
        return strict_schema_problem(schema.get("items"), f"{where}.items", root, depth + 1)
    return None


def _root_problem(schema: Any) -> str | None:
    """The root is an object (not anyOf); the schemas under `$defs` follow the rules too."""
    if not isinstance(schema, dict) or schema.get("type") != "object" or "anyOf" in schema:
        return "the root of the schema must be an object (type 'object', not anyOf)"
    for defs in ("$defs", "definitions"):
        for key, sub in (schema.get(defs) or {}).items():
            problem = strict_schema_problem(sub, f"schema.{defs}.{key}", schema, 1)
            if problem:
                return problem
    return None


def _object_problem(schema: dict[str, Any], where: str, root: dict[str, Any], depth: int) -> str | None:
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return f"{where} is an object without 'properties'"
    if schema.get("additionalProperties") is not False:
        return f"'additionalProperties' is required to be supplied and to be false in {where}"
    if sorted(schema.get("required") or []) != sorted(properties):
        return f"'required' is required to be supplied and to be an array including every key in {where}.properties"
    for key, prop in properties.items():
        problem = strict_schema_problem(prop, f"{where}.properties.{key}", root, depth + 1)
        if problem:
            return problem
    return None


def resolve_ref(ref: Any, root: dict[str, Any]) -> Any:
    """The schema a `$ref` points at inside `root` (`#` itself, `#/$defs/x`, `#/properties/a/...`), or None."""
    if not isinstance(ref, str) or not ref.startswith("#"):
        return None
    node: Any = root
    for part in [p for p in ref[1:].split("/") if p]:
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node
