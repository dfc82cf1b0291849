"""The smallest pipelines compile to valid Python: a job that needs no runtime helper at all (a
SELECT into a file sink, written with Spark's own writer) still imports only what it uses."""
from __future__ import annotations

import ast

import pytest

from dslc.compiler.pipeline import compile_file

PROGRAMS = {
    "source_to_parquet": "SOURCE s FROM JSON 'in/' SCHEMA (id STRING);\nSINK s TO PARQUET 'out';",
    "select_to_json": "SOURCE s FROM JSON 'in/' SCHEMA (id STRING);\nSTREAM t = SELECT id FROM s;\nSINK t TO JSON 'out';",
    "select_to_console": "SOURCE s FROM JSON 'in/' SCHEMA (id STRING);\nSINK s TO CONSOLE;",
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
@pytest.mark.parametrize("mode", ["batch", "streaming"])
def test_minimal_jobs_are_valid_python(name, mode, tmp_path):
    flow = tmp_path / "p.flow"
    text = PROGRAMS[name]
    flow.write_text(("PIPELINE p MODE STREAMING CHECKPOINT 'chk';\n" if mode == "streaming" else "") + text)
    code = compile_file(flow, job_folder=str(tmp_path))
    tree = ast.parse(code)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            assert node.names, f"empty import from {node.module}"
