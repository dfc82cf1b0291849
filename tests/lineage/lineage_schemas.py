"""OpenLineage's published JSON schemas (openlineage_spec/, a copy) as one validator: an event
against the core schema, and each of its facets against the facet schema that defines it."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
from referencing import Registry, Resource

SPEC = Path(__file__).resolve().parent / "openlineage_spec"


def _load() -> tuple[dict[str, Any], dict[str, dict[str, Any]], Registry]:
    core = json.loads((SPEC / "OpenLineage.json").read_text())
    facets = {p.stem: json.loads(p.read_text()) for p in sorted((SPEC / "facets").glob("*.json"))}
    resources = [(core["$id"], Resource.from_contents(core))]
    resources += [(schema["$id"], Resource.from_contents(schema)) for schema in facets.values()]
    return core, facets, Registry().with_resources(resources)


CORE, FACETS, REGISTRY = _load()
#: facet key (as an event holds it: "schema", "columnLineage") -> the schema that defines it
BY_KEY = {key: schema for schema in FACETS.values() for key in schema.get("properties", {})}


def problems(event: dict[str, Any]) -> list[str]:
    """Every way `event` breaks the published schemas (empty: it validates)."""
    found = [f"event: {e.message}" for e in jsonschema.Draft202012Validator(CORE, registry=REGISTRY).iter_errors(event)]
    for where, facets in _facets(event):
        for key, facet in facets.items():
            schema = BY_KEY.get(key)
            if schema is None:
                found.append(f"{where}: no published schema defines the facet {key!r}")
                continue
            validator = jsonschema.Draft202012Validator(schema, registry=REGISTRY)
            found += [f"{where}.{key}: {e.message}" for e in validator.iter_errors({key: facet})]
    return found


def _facets(event: dict[str, Any]):
    yield "run", (event.get("run") or {}).get("facets") or {}
    yield "job", (event.get("job") or {}).get("facets") or {}
    for side in ("inputs", "outputs"):
        for i, dataset in enumerate(event.get(side) or []):
            yield f"{side}[{i}]", dataset.get("facets") or {}
