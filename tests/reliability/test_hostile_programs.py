"""5. Hostile programs.

- Fuzz: 1,000 generated programs full of hostile text plus 1,200 mutations of them and of the
  front end's valid programs: `check` and `compile` (optimise + generate) never crash (a plan or
  a CompileError), and generated code always parses as Python. (tests/frontend/test_fuzz.py
  fuzzes `check` only, with 550 examples.)
- Injection: string literals, back-quoted identifiers, OPTIONS / SET values with quotes,
  newlines, backslashes and triple quotes compile into a job whose syntax tree holds only the
  names the code generator writes, and every DSL value reaches the runtime call as exactly the
  string the DSL says (paths through resolve(), options, conf, URL, SQL).
- A hostile program runs on Spark and does exactly what it says (and no payload runs).
- `dslc check` / `dslc compile` command lines on hostile files exit 0 or 1, never a traceback.
- URL placeholders: any value, in the path or the query, is one percent-encoded piece that
  cannot change the scheme, host, port, path structure or query keys; a value that would make a
  `.`/`..`/empty path segment is an element error, not a request elsewhere.
"""
from __future__ import annotations

import ast
import re
import urllib.parse
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dslc.compiler.diagnostics import CompileError
from dslc.compiler.pipeline import check_text, lower_plan
from dslc.compiler.plan.names import sql_name

FRONTEND_PROGRAMS = sorted((Path(__file__).parents[1] / "frontend" / "programs").glob("*/pipeline.flow"))
PAYLOADS = [
    "'", '"', '"""', "'''", "\\", "\\\\", "\n", "\r\n", "\t", "\\n", "\\'", '\\"', "{", "}", "{x}", "#", "`",
    "');__import__('os').system('touch PWNED')#", '""";__import__("os").system("touch PWNED");"""',
    "\n__import__('os').system('touch PWNED')\n", "é", "😀", "\u2028", "%s", "{0}", "${x}", "$(id)",
]
FIXED_NAMES = {"C", "chains", "sinks", "state", "streaming", "MetricsCollector", "flow_folder", "resolve",
               "session", "FOLDER", "CHECKPOINT", "TRIGGER", "main", "spark", "metrics", "queries",
               "batch", "batch_id", "batch_spark", "__file__", "__name__"}
GENERATED_NAME = re.compile(r"^micro_batch_\d+$")
FORBIDDEN_ATTRS = {"system", "popen", "exec", "eval", "__import__", "remove", "rmtree", "unlink", "__class__"}


def dsl_string(value: str) -> str:
    """A Spark SQL string literal whose value is `value`."""
    escaped = (value.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n")
               .replace("\r", "\\r").replace("\t", "\\t").replace("\0", "\\0"))
    return "'" + escaped + "'"


def dsl_ident(value: str) -> str:
    return "`" + value.replace("`", "``") + "`"


hostile_text = st.lists(st.one_of(st.sampled_from(PAYLOADS), st.text(min_size=1, max_size=4)),
                        min_size=1, max_size=4).map("".join).filter(lambda s: "\0" not in s)
path_text = hostile_text.map(lambda s: "p/" + s)
name_text = st.lists(st.one_of(st.sampled_from(["'", '"', '"""', "\\", " ", "-", "é", "`", "x"]),
                               st.text(alphabet="abcxyz_", min_size=1, max_size=3)),
                     min_size=1, max_size=4).map("".join).filter(lambda s: "\n" not in s)


@st.composite
def hostile_program(draw) -> tuple[str, dict]:
    """A valid program whose every free-text position holds hostile text; and what it says."""
    streaming = draw(st.booleans())
    said = {
        "source_path": draw(path_text), "sink_path": draw(path_text), "dead_letter": draw(path_text),
        "option": (draw(st.sampled_from(["multiLine", "mode", "x.y"])), draw(hostile_text)),
        "conf": ("spark.dslc.test", draw(hostile_text)),
        "url_query": draw(hostile_text.filter(lambda s: "{" not in s and "}" not in s)),
        "sql_literal": draw(hostile_text),
        "stream": "s" + draw(name_text),
        "column": "c" + draw(name_text), "returned": "r" + draw(name_text),
        "checkpoint": draw(path_text) if streaming else None,
        "mode": draw(st.sampled_from(["ORDERED", "UNORDERED"])),
    }
    url = "http://127.0.0.1:9/svc/{id}?q=" + said["url_query"]
    said["url"] = url
    col, stream, returned = dsl_ident(said["column"]), dsl_ident(said["stream"]), dsl_ident(said["returned"])
    sql_lit = dsl_string(said["sql_literal"])
    said["sql_fragment"] = sql_lit
    pipeline = (f"PIPELINE p MODE STREAMING CHECKPOINT {dsl_string(said['checkpoint'])} TRIGGER AVAILABLE NOW;\n"
                if streaming else "PIPELINE p MODE BATCH;\n")
    text = (
        pipeline
        + f"SET spark.dslc.test = {dsl_string(said['conf'][1])};\n"
        + f"SOURCE src FROM JSON {dsl_string(said['source_path'])}\n"
        + f"  OPTIONS ({said['option'][0]} = {dsl_string(said['option'][1])})\n"
        + f"  SCHEMA (id STRING, {col} DOUBLE);\n"
        + f"STREAM {stream} = SELECT id, {col} FROM src WHERE id <> {sql_lit};\n"
        + f"STREAM enriched = ENRICH {stream} WITH HTTP GET {dsl_string(url)} RETURNS ({returned} STRING)\n"
        + f"  ASYNC {said['mode']} CAPACITY 3 TIMEOUT 1s ON ERROR DEAD LETTER {dsl_string(said['dead_letter'])};\n"
        + f"SINK enriched TO PARQUET {dsl_string(said['sink_path'])};\n"
    )
    return text, said


def _compile(text: str, path: str = "/tmp/hostile/pipeline.flow") -> str | None:
    """check + optimise + generate; None for a CompileError (a clean rejection)."""
    try:
        plan = check_text(text, path)
    except CompileError as exc:
        assert exc.diagnostics
        exc.render()
        return None
    assert plan.sinks                  # an empty program is E0208 (test_empty_program_is_rejected)
    code = lower_plan(plan, job_folder="/tmp/hostile")
    ast.parse(code)                    # generated code is always valid Python
    return code


def _string_constants(tree: ast.AST) -> set[str]:
    return {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}


def assert_only_generated_code(code: str) -> ast.Module:
    """The job's syntax tree holds nothing but what the code generator writes."""
    tree = ast.parse(code)
    imported = {alias.asname or alias.name for stmt in tree.body if isinstance(stmt, ast.ImportFrom)
                and (stmt.module or "").startswith("dslc.runtime") for alias in stmt.names}
    for stmt in tree.body:
        if isinstance(stmt, ast.ImportFrom):
            assert stmt.module and stmt.module.startswith("dslc.runtime"), ast.dump(stmt)
        elif isinstance(stmt, ast.Assign):
            assert [t.id for t in stmt.targets] in (["FOLDER"], ["CHECKPOINT"], ["TRIGGER"]), ast.dump(stmt)
        elif isinstance(stmt, ast.FunctionDef):
            assert stmt.name == "main"
        elif isinstance(stmt, ast.If):
            assert ast.unparse(stmt.test) == "__name__ == '__main__'"
        else:
            assert isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant), ast.dump(stmt)
    # Relation variables carry the user's names (raw-orders -> raw_orders): a name the job reads
    # must be fixed, imported, or bound by one of the job's own assignments.
    bound = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            assert (node.id in FIXED_NAMES or node.id in imported or node.id in bound
                    or GENERATED_NAME.match(node.id)), node.id
        elif isinstance(node, ast.Attribute):
            assert node.attr not in FORBIDDEN_ATTRS, node.attr
        elif isinstance(node, (ast.Import, ast.Lambda, ast.Global, ast.Nonlocal, ast.Delete)):
            raise AssertionError(f"unexpected {type(node).__name__} in generated code")
    return tree


def _call_args(tree: ast.AST, func: str) -> list[list]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
            if name == func:
                found.append([ast.literal_eval(a) if not isinstance(a, ast.Name) else a.id for a in node.args])
    return found


@pytest.mark.slow
@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(hostile_program())
def test_hostile_text_compiles_into_exactly_what_the_dsl_says(case):
    text, said = case
    code = _compile(text)
    assert code is not None, text           # every generated program is valid
    tree = assert_only_generated_code(code)
    constants = _string_constants(tree)
    resolved = {args[1] for args in _call_args(tree, "resolve")}
    expected_paths = {said["source_path"], said["sink_path"], said["dead_letter"]}
    if said["checkpoint"] is not None:
        expected_paths.add(said["checkpoint"])
    assert resolved == expected_paths
    assert [said["url"]] == [ast.literal_eval(k.value) for n in ast.walk(tree) if isinstance(n, ast.Call)
                             and getattr(n.func, "attr", "") == "HttpCall" for k in n.keywords if k.arg == "url"]
    # reader options, one .option(k, v) each; a JSON source without a mode fails on a malformed line
    failfast = [] if said["option"][0].lower() == "mode" else [["mode", "FAILFAST"]]
    assert sorted(_call_args(tree, "option")) == sorted([list(said["option"])] + failfast)
    [session_call] = _call_args(tree, "session")
    assert session_call[1] == {said["conf"][0]: said["conf"][1]}
    assert any(said["sql_fragment"] in c and c.startswith("SELECT id") for c in constants)
    assert _call_args(tree, "createOrReplaceTempView") == [["src"]]   # a view only for what SQL reads
    assert any(said["returned"] in c for c in constants)
    assert any(said["column"] in c or sql_name(said["column"]) in c for c in constants)   # raw, or in Spark DDL
    assert "PWNED" not in "".join(ast.unparse(n) for n in ast.walk(tree) if isinstance(n, ast.Name))


@st.composite
def mutated_program(draw) -> str:
    if draw(st.booleans()):
        text = draw(hostile_program())[0]
    else:
        text = draw(st.sampled_from(FRONTEND_PROGRAMS)).read_text()
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["delete", "insert", "duplicate", "cut", "payload", "swap"]))
        n = len(text)
        i = draw(st.integers(0, max(n - 1, 0)))
        j = min(n, i + draw(st.integers(1, 30)))
        if kind == "delete":
            text = text[:i] + text[j:]
        elif kind == "insert":
            text = text[:i] + draw(st.text(max_size=6)) + text[i:]
        elif kind == "duplicate":
            text = text[:j] + text[i:j] + text[j:]
        elif kind == "cut":
            text = text[:i]
        elif kind == "payload":
            text = text[:i] + draw(st.sampled_from(PAYLOADS)) + text[i:]
        else:
            text = text[i:j] + text[:i] + text[j:]
    return text


@pytest.mark.slow
@settings(max_examples=1200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(mutated_program())
def test_mutated_programs_never_crash_check_or_compile(text):
    path = str(FRONTEND_PROGRAMS[0])               # user modules beside it resolve
    code = _compile(text, path)
    if code is not None:
        assert_only_generated_code(code)


IN_DIR, OUT_DIR = "in'\"\"\"x", "out'\"\"\"\\"
WEIRD, TAG, PAYLOAD = "we'ird \"col\"\"\"", "a'b\"\"\"c\\d\ne", "');__import__('os').system('touch PWNED')#"
HOSTILE_RUN = "\n".join([
    "SET spark.sql.shuffle.partitions = '2';",
    f"SOURCE src FROM JSON {dsl_string(IN_DIR)}",
    f"  SCHEMA (id STRING, {dsl_ident(WEIRD)} DOUBLE);",
    # relation names stay plain here: Spark's createOrReplaceTempView rejects `str'eam` (reported)
    f"STREAM {dsl_ident(STREAM_NAME := 'str_eam')} = SELECT id, {dsl_ident(WEIRD)} AS amount,",
    f"  {dsl_string(TAG)} AS tag FROM src WHERE id <> {dsl_string(PAYLOAD)};",
    f"SINK {dsl_ident(STREAM_NAME)} TO JSON {dsl_string(OUT_DIR)} MODE OVERWRITE;",
    "",
])


@pytest.mark.spark
def test_hostile_program_runs_and_does_exactly_what_it_says(spark, tmp_path):
    import json
    import os

    from reliability_support import run_flow, write_jsonl

    folder = tmp_path / "h"
    folder.mkdir()
    write_jsonl(folder / IN_DIR / "rows.json",
                [{"id": "a", WEIRD: 1.5}, {"id": PAYLOAD, WEIRD: 2.0}, {"id": "b", WEIRD: None}])
    (folder / "pipeline.flow").write_text(HOSTILE_RUN)
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        run_flow(folder / "pipeline.flow")
    finally:
        os.chdir(cwd)
    out = sorted((json.loads(line) for p in (folder / OUT_DIR).glob("part-*") for line in p.read_text().splitlines()),
                 key=lambda r: r["id"])
    assert out == [{"id": "a", "amount": 1.5, "tag": TAG}, {"id": "b", "tag": TAG}]
    assert not (folder / "PWNED").exists() and not (tmp_path / "PWNED").exists() and not Path("PWNED").exists()


def test_command_line_on_hostile_files_exits_0_or_1(tmp_path, capsys):
    from dslc.compiler.cli.main import main

    good = tmp_path / "good.flow"
    good.write_text(HOSTILE_RUN)
    bad = tmp_path / "bad.flow"
    bad.write_text(HOSTILE_RUN.replace("SINK", "SINK '''\"\"\"\\"))
    assert main(["check", str(good)]) == 0
    assert main(["compile", str(good), "-o", str(tmp_path / "job.py")]) == 0
    assert_only_generated_code((tmp_path / "job.py").read_text())
    assert main(["check", str(bad)]) == 1
    assert main(["compile", str(bad)]) == 1
    err = capsys.readouterr().err
    assert "error" in err and "Traceback" not in err


# ---------------------------------------------------------------------------- URL placeholders

any_value = st.one_of(st.text(), st.sampled_from(["..", ".", "", "%2e%2e", "a/../b", "@evil:81", "x?y=1#z",
                                                  "//evil.example/", "\\..\\", " ", "%00"]))


@settings(max_examples=300, deadline=None)
@given(path_value=any_value, query_value=any_value)
def test_placeholders_cannot_change_host_path_or_query_keys(path_value, query_value):
    from dslc.runtime.calls.http import CallError, fill

    template = "http://svc.internal:8080/v1/users/{a}/profile?tag={b}&fixed=1"
    try:
        url = fill(template, {"a": path_value, "b": query_value})
    except CallError as exc:
        assert path_value in ("", ".", ".."), exc           # only a dot or empty path segment is refused
        assert "segment" in str(exc)
        return
    assert path_value not in ("", ".", "..")
    parts = urllib.parse.urlsplit(url)
    assert (parts.scheme, parts.netloc, parts.fragment) == ("http", "svc.internal:8080", "")
    segments = parts.path.split("/")
    assert segments[:4] == ["", "v1", "users", segments[3]] and segments[4:] == ["profile"]
    assert urllib.parse.unquote(segments[3]) == path_value
    assert [k for k, _ in urllib.parse.parse_qsl(parts.query, keep_blank_values=True)] == ["tag", "fixed"]
    assert urllib.parse.parse_qs(parts.query, keep_blank_values=True)["tag"] == [query_value]
    assert re.fullmatch(r"[A-Za-z0-9_.~%-]*", segments[3])       # nothing but unreserved bytes and escapes


def test_dot_segment_values_are_element_errors_not_requests_elsewhere():
    from dslc.runtime.calls.http import CallError, fill

    for value in ("..", "."):
        with pytest.raises(CallError, match="dot segment"):
            fill("http://h/users/{id}/profile", {"id": value})
        with pytest.raises(CallError, match="dot segment"):
            fill("http://h/users/{id}", {"id": value})
    with pytest.raises(CallError, match="dot segment"):
        fill("http://h/users/.{id}/x", {"id": "."})          # template text + value make '..'
    with pytest.raises(CallError, match="dot segment"):
        fill("http://h/users/{a}{b}/x", {"a": ".", "b": "."})
    with pytest.raises(CallError, match="empty path segment"):
        fill("http://h/users/{id}/profile", {"id": ""})
    assert fill("http://h/users/{id}/profile", {"id": "..."}) == "http://h/users/.../profile"
    assert fill("http://h/users/v{id}", {"id": "."}) == "http://h/users/v."
    assert fill("http://h/users?id={id}", {"id": ".."}) == "http://h/users?id=.."      # a query value is fine
    assert fill("http://h/users?id={id}", {"id": ""}) == "http://h/users?id="


# --------------------------------------- text that reaches comments and docstrings of the job

INJECTIONS = {
    # 1. the job's header comment and module docstring name the .flow file
    "flow_file_name": ('x""";__import__("os").system("touch PWNED");"""y.flow',
                       "SOURCE src FROM JSON 'in/' SCHEMA (id STRING);\nSINK src TO JSON 'out';\n"),
    # 2. a back-quoted identifier with a newline, in its '# line N: STREAM name' comment
    "newline_in_identifier": ("pipeline.flow",
                              "SOURCE src FROM JSON 'in/' SCHEMA (id STRING);\n"
                              "STREAM `a\n    __import__('os').system('touch PWNED')\n    #` = SELECT id FROM src;\n"
                              "SINK src TO JSON 'out';\n"),
    # 3. STREAMING: the micro-batch function's docstring names the input stream
    "triple_quote_in_stream_name": ("pipeline.flow",
                                    "PIPELINE p MODE STREAMING CHECKPOINT 'chk' TRIGGER AVAILABLE NOW;\n"
                                    "SOURCE src FROM JSON 'in/' SCHEMA (id STRING);\n"
                                    "SOURCE upd FROM JSON 'upd/' SCHEMA (k STRING, v STRING);\n"
                                    "BROADCAST rules FROM upd KEY k;\n"
                                    "STREAM `x\"\"\"; __import__('os').system('touch PWNED'); \"\"\"` = SELECT id FROM src;\n"
                                    "STREAM m = MATCH `x\"\"\"; __import__('os').system('touch PWNED'); \"\"\"` AGAINST rules AS r"
                                    " WHERE id = r.k;\n"
                                    "SINK m TO JSON 'out';\n"),
}


@pytest.mark.parametrize("case", sorted(INJECTIONS))
def test_names_in_comments_and_docstrings_cannot_inject_code(tmp_path, case):
    from dslc.compiler.pipeline import compile_file

    name, text = INJECTIONS[case]
    flow = tmp_path / name
    flow.write_text(text)
    code = compile_file(flow, job_folder=str(tmp_path))
    assert_only_generated_code(code)


@pytest.mark.parametrize("text", ["", "-- nothing here\n"])
def test_empty_program_is_rejected(tmp_path, text):
    from dslc.compiler.pipeline import compile_file

    flow = tmp_path / "pipeline.flow"
    flow.write_text(text)
    with pytest.raises(CompileError) as rejected:
        compile_file(flow, job_folder=str(tmp_path))
    assert [d.code for d in rejected.value.diagnostics] == ["E0208"]
