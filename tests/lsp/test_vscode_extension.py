"""editors/vscode: the TextMate grammar checked with vscode-tmgrammar-test on the examples (every
keyword of the language coloured, the SQL inside embedded as SQL), and the extension packaged
with vsce. Both run the npm tools in a copy of the extension, installed once per session."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest
from lsp_client import EXAMPLES, ROOT

from dslc.compiler.frontend import ast
from dslc.compiler.frontend.parser import parse
from dslc.compiler.source import SourceFile

EXTENSION = ROOT / "editors" / "vscode"
STATEMENT_KEYWORDS = {"PIPELINE", "SET", "SOURCE", "BROADCAST", "STREAM", "SINK", "EXPECT"}
SAMPLES = sorted(EXAMPLES.glob("*/pipeline.flow")) + [EXTENSION / "test" / "every_keyword.flow"]


def language_keywords() -> set[str]:
    """Every keyword of the Lark grammar ("WORD"i literals and keyword terminals)."""
    return set(re.findall(r'"([A-Z]+)"i', (ROOT / "grammar" / "flow.lark").read_text()))


@pytest.fixture(scope="session")
def extension(tmp_path_factory) -> Path:
    """A copy of editors/vscode with its npm packages installed (from package-lock.json)."""
    if shutil.which("npm") is None:
        pytest.fail("npm is not installed: run .ci/install (it installs Debian's nodejs and npm)")
    folder = tmp_path_factory.mktemp("vscode") / "vscode"
    shutil.copytree(EXTENSION, folder, ignore=shutil.ignore_patterns("node_modules", "*.vsix"))
    done = subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--prefer-offline"], cwd=folder,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return folder


def _sql_spans(program: ast.Program) -> list[tuple[int, int]]:
    spans = []
    for statement in program.statements:
        if isinstance(statement, ast.Select):
            spans.append((statement.sql.span.start, statement.sql.span.end))
        elif isinstance(statement, ast.Match):
            spans.append((statement.predicate.span.start, statement.predicate.span.end))
        elif isinstance(statement, ast.Expect):       # CHECK (condition): the SQL inside the parentheses
            spans += [(c.check.span.start + 1, c.check.span.end - 1) for c in statement.constraints]
    return spans


_SKIP = re.compile(r"--[^\n]*|'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|`(?:[^`]|``)*`")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def expectations(path: Path, keywords: set[str]) -> tuple[list[tuple[int, int, int, str]], set[str]]:
    """(line, column, length, scopes) to assert, and the language keywords they cover: each keyword
    outside SQL is a flow keyword (and not SQL); every word of a query or MATCH predicate is in
    the embedded SQL block, and its first word (SELECT, or the predicate's first name) is SQL's."""
    text = path.read_text()
    source = SourceFile(str(path), text)
    sql = _sql_spans(parse(source))
    skipped = [(m.start(), m.end()) for m in _SKIP.finditer(text)]
    out, covered = [], set()
    for match in _WORD.finditer(text):
        start, word = match.start(), match.group(0)
        if any(a <= start < b for a, b in skipped):
            continue
        line, col = source.line_col(start)
        inside = next(((a, b) for a, b in sql if a <= start < b), None)
        if inside is not None:
            scopes = "meta.embedded.block.sql"
            if word.upper() in ("SELECT", "FROM", "WHERE") :
                scopes += " keyword.other.DML.sql"
            out.append((line - 1, col - 1, len(word), scopes))
        elif word.upper() in keywords:
            kind = "keyword.control.flow" if word.upper() in STATEMENT_KEYWORDS else "keyword.other.flow"
            out.append((line - 1, col - 1, len(word), f"{kind} - meta.embedded.block.sql"))
            covered.add(word.upper())
    return out, covered


def syntax_test(path: Path, keywords: set[str]) -> tuple[str, set[str]]:
    """The file as a vscode-tmgrammar-test case: each line followed by its assertions."""
    wanted, covered = expectations(path, keywords)
    by_line: dict[int, list[str]] = {}
    for line, col, length, scopes in wanted:
        by_line.setdefault(line, []).append(f"-- <{'~' * col}{'-' * length} {scopes}")
    out = [f'-- SYNTAX TEST "source.flow" "{path.parent.name}/{path.name}"']
    for index, line in enumerate(path.read_text().splitlines()):
        out.append(line)
        out += by_line.get(index, [])
    return "\n".join(out) + "\n", covered


def test_the_grammar_colours_every_keyword_and_embeds_sql(extension, tmp_path):
    keywords = language_keywords()
    assert {"ENRICH", "ADAPTIVE", "WATERMARK", "AGAINST"} <= keywords and len(keywords) > 50
    covered: set[str] = set()
    cases = []
    for index, sample in enumerate(SAMPLES):
        text, seen = syntax_test(sample, keywords)
        covered |= seen
        case = extension / "test" / f"{index}-{sample.parent.name}.test.flow"
        case.write_text(text)
        cases.append(case)
        assert text.count("keyword.other.DML.sql") >= (1 if "examples" in sample.parts else 0)
    assert covered == keywords, f"keywords no sample uses: {sorted(keywords - covered)}"
    grammars = ["-g", "syntaxes/flow.tmLanguage.json", "-g", "node_modules/tm-grammars/grammars/sql.json"]
    done = subprocess.run(["npx", "--no-install", "vscode-tmgrammar-test", *grammars,
                           *[str(c.relative_to(extension)) for c in cases]],
                          cwd=extension, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-2000:]
    assert done.stdout.count("✓") == len(cases) or "passed" in done.stdout.lower(), done.stdout


def test_the_grammar_test_fails_on_a_wrong_scope(extension):
    """The check above can fail: a keyword claimed to be SQL is reported."""
    case = extension / "test" / "wrong.test.flow"
    case.write_text('-- SYNTAX TEST "source.flow" "wrong"\nSINK s TO CONSOLE;\n-- <---- meta.embedded.block.sql\n')
    done = subprocess.run(["npx", "--no-install", "vscode-tmgrammar-test", "-g", "syntaxes/flow.tmLanguage.json",
                           "test/wrong.test.flow"], cwd=extension, capture_output=True, text=True, timeout=300)
    case.unlink()
    assert done.returncode != 0 and "meta.embedded.block.sql" in done.stdout + done.stderr


def test_the_extension_packages_with_vsce(extension):
    done = subprocess.run(["npx", "--no-install", "vsce", "package", "--allow-missing-repository",
                           "--out", "dslc-flow.vsix"], cwd=extension, capture_output=True, text=True,
                          timeout=300, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    with zipfile.ZipFile(extension / "dslc-flow.vsix") as vsix:
        names = set(vsix.namelist())
        manifest = json.loads(vsix.read("extension/package.json"))
    assert {"extension/extension.js", "extension/syntaxes/flow.tmLanguage.json",
            "extension/language-configuration.json",
            "extension/node_modules/vscode-languageclient/node.js"} <= names
    assert not any(n.startswith("extension/test/") or "/tm-grammars/" in n for n in names)
    assert manifest["contributes"]["grammars"][0]["embeddedLanguages"] == {"meta.embedded.block.sql": "sql"}
    assert manifest["contributes"]["configuration"]["properties"]["dslc.server.command"]["default"] == ["dslc", "lsp"]


def test_the_language_configuration_knows_comments_brackets_and_quotes():
    config = json.loads((EXTENSION / "language-configuration.json").read_text())
    assert config["comments"] == {"lineComment": "--"}
    assert ["(", ")"] in config["brackets"]
    assert {p["open"] for p in config["autoClosingPairs"]} >= {"(", "'", '"', "`"}
