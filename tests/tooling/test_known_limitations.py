"""docs/operations.md's Known limitations stay true: each names what the code does today
(#33 item 9: "Only HTTP GET; no headers, authentication or request body" outlived POST BODY)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from dslc.compiler.pipeline import check_text

ROOT = Path(__file__).resolve().parents[2]


def _limitations() -> list[str]:
    text = (ROOT / "docs" / "operations.md").read_text()
    section = text.split("## Known limitations\n", 1)[1].split("\n## ", 1)[0]
    return [item.replace("\n", " ") for item in re.split(r"\n- ", "\n" + section)[1:]]


def test_every_file_a_limitation_names_exists():
    named = {p for item in _limitations() for p in re.findall(r"`((?:runtime|compiler|testing)/[\w/]+\.py)", item)}
    assert named, "the limitations name the files that make them true"
    assert sorted(p for p in named if not (ROOT / p).is_file()) == []


@pytest.mark.parametrize("method, body", [("GET", ""), ("POST", " BODY (key)")])
def test_the_http_limitation_names_every_method_the_compiler_accepts(method, body):
    check_text(f"""PIPELINE p MODE BATCH;
SOURCE s FROM JSON 'in/' SCHEMA (key STRING);
STREAM e = ENRICH s WITH HTTP {method} 'http://127.0.0.1:9/x/{{key}}'{body} RETURNS (v STRING);
SINK e TO PARQUET 'out';""")                            # accepted: no CompileError
    http = [item for item in _limitations() if item.startswith("HTTP") or "HTTP `" in item]
    assert len(http) == 1, http
    assert f"`{method}`" in http[0]
    if body:
        assert "BODY" in http[0]
