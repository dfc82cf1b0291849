"""Generated jobs keep to 100 characters a line, as a Spark user would write them: schemas,
SQL text and option values break into adjacent literals (the same string, so Spark runs what
the user wrote), comments wrap, calls break one argument a line, and every line inside brackets
is indented one level deeper than the line that opened them (its closing bracket back at that
line's level), nested values too."""
from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

import pytest

from dslc.compiler.codegen.emitter import WIDTH, wrapped
from dslc.compiler.pipeline import check_file, compile_file

ROOT = Path(__file__).resolve().parents[2]
JOBS = sorted([*ROOT.glob("examples/*/pipeline.flow"), *ROOT.glob("tests/cases/*/pipeline.flow")])


def _long_lines(code: str) -> list[str]:
    return [line for line in code.splitlines() if len(line) > WIDTH]


def _misindented(code: str) -> list[str]:
    """The lines inside brackets not indented 4 spaces more than the line that opened the
    innermost bracket (a line starting with its closing bracket: as much as that line)."""
    lines = code.splitlines()
    opened: list[int] = []      # per open bracket: the indentation of the line that opened it
    wrong, last_row = [], 0
    for token in tokenize.generate_tokens(io.StringIO(code).readline):
        if token.type in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER):
            continue
        row, column = token.start
        if row != last_row and opened:
            closing = token.type == tokenize.OP and token.string in ")]}"
            expected = opened[-1] + (0 if closing else 4)
            if column != expected:
                wrong.append(f"{row}: {lines[row - 1]!r} (indented {column}, not {expected})")
        last_row = token.end[0]
        if token.type == tokenize.OP and token.string in "([{":
            line = lines[row - 1]
            opened.append(len(line) - len(line.lstrip(" ")))
        elif token.type == tokenize.OP and token.string in ")]}":
            opened.pop()
    return wrong


@pytest.mark.parametrize("flow", JOBS, ids=[f"{f.parent.parent.name}/{f.parent.name}" for f in JOBS])
def test_every_case_and_example_job_fits_in_the_width_and_compiles(flow):
    code = compile_file(flow, job_folder=str(flow.parent))
    assert _long_lines(code) == []
    assert _misindented(code) == []
    compile(code, str(flow.with_name("job.py")), "exec")


def test_the_indentation_check_sees_a_misaligned_nested_value():
    """The system= block the tickets job had before nested values went through the emitter."""
    before = (
        "x = f(\n"
        "    call=g(\n"
        "        system= (\n"
        "    'a '\n"
        "    'b'\n"
        "),\n"
        "    ),\n"
        ")\n"
    )
    assert [line.split(":")[0] for line in _misindented(before)] == ["4", "5", "6"]
    assert _misindented(before.replace("\n    'a '\n    'b'\n),", "\n            'a '\n            'b'\n        ),")) == []


COLUMNS = [f"a_rather_long_column_name_number_{i}" for i in range(8)]
WIDE = f"""
{{pipeline}}
SOURCE orders_with_a_long_name FROM JSON 'data/a/folder/with/a/rather/long/path/to/the/orders/of/the/day/'
  OPTIONS (multiLine = 'true', dateFormat = 'yyyy-MM-dd-and-some-more-text-to-make-it-long-enough')
  SCHEMA ({', '.join(f'{c} STRING' for c in COLUMNS)}, `quoted, with a comma` STRING, ts TIMESTAMP)
  WATERMARK ts DELAY 10s;
STREAM picked = SELECT {', '.join(COLUMNS)}, ts, concat({COLUMNS[0]}, 'a-literal-without-any-space-that-is-far-longer-than-one-line-of-the-job-can-hold-in-the-generated-file') AS joined FROM orders_with_a_long_name WHERE {COLUMNS[1]} = 'it''s' OR {COLUMNS[2]} = 'say "hi"';
SINK picked TO PARQUET 'target/out/a/folder/with/a/rather/long/path/for/the/picked/rows/of/the/day';
"""


@pytest.mark.parametrize("mode", ["BATCH", "STREAMING"])
def test_long_schemas_sql_and_paths_are_broken_into_the_same_strings(tmp_path, mode):
    flow = tmp_path / "pipeline.flow"
    pipeline = "PIPELINE wide MODE STREAMING CHECKPOINT 'chk';" if mode == "STREAMING" else ""
    flow.write_text(WIDE.format(pipeline=pipeline))
    code = compile_file(flow, job_folder=str(tmp_path))
    assert _long_lines(code) == [] and _misindented(code) == []
    tree = ast.parse(code)
    strings = {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)}
    query = check_file(flow).node("picked")
    assert query.sql in strings                                   # the SQL as written, joined back
    assert any(s.startswith("`a_rather_long_column_name_number_0` STRING") and "`quoted, with a comma` STRING" in s
               for s in strings)                                  # the whole schema in one string


@pytest.mark.parametrize("text", [
    "", "a", "a\n", "SELECT x, y\n  FROM t WHERE q = 'it''s'\n", "x" * 250, "word " * 60, '"\\' * 80,
    "a\n\nb", "a\r\nb\rc\u2028d", "é€ö" * 50, "'\"" * 70, "a, " * 40, "`c` STRING, " * 20,
])
@pytest.mark.parametrize("width", [10, 40, 100])
def test_wrapped_literals_join_back_into_the_text_and_fit(text, width):
    pieces = wrapped(text, width)
    assert "".join(ast.literal_eval(p) for p in pieces) == text
    assert all(len(p) <= width for p in pieces)
