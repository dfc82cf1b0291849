"""textDocument/codeLens and workspace/executeCommand: "Explain" on every file, "Run tests" on a
saved file with a test file beside it (NAME.test.yaml, or any *.test.yaml whose `pipeline:`
names it). The commands run on the server and return their text, which the client shows."""
from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import yaml
from lsprotocol import types

from dslc.compiler.diagnostics import CompileError
from dslc.compiler.frontend.lexical import leading_space
from dslc.compiler.lsp.analysis import Analysis
from dslc.compiler.lsp.positions import LineIndex

EXPLAIN = "dslc.explain"
RUN_TESTS = "dslc.runTests"
SUFFIX = ".test.yaml"
TEST_TIMEOUT_S = 600


def test_files(flow: Path) -> list[Path]:
    """The test files that run `flow`, as `dslc test` would pair them."""
    folder, found = flow.parent, []
    if not folder.is_dir():
        return []
    for path in sorted(folder.glob(f"*{SUFFIX}"))[:100]:
        named = path.name[: -len(SUFFIX)] + ".flow"
        if named == flow.name:
            found.append(path)
            continue
        try:
            document = yaml.safe_load(path.read_text(encoding="utf-8", errors="replace"))
        except (OSError, yaml.YAMLError):
            continue
        pipeline = document.get("pipeline") if isinstance(document, dict) else None
        if pipeline and (folder / str(pipeline)).resolve() == flow.resolve():
            found.append(path)
    return found


def code_lenses(analysis: Analysis, index: LineIndex, uri: str, path: Path | None) -> list[types.CodeLens]:
    """The lenses at the first statement of the file."""
    if analysis.too_large:
        return []
    statements = analysis.chunks
    if not statements:
        return []
    first = statements[0].start + leading_space(statements[0].text)
    where = index.range(first, first)
    lenses = [types.CodeLens(where, types.Command("Explain", EXPLAIN, arguments=[uri]))]
    tests = test_files(path) if path is not None and path.is_file() else []
    if tests:
        title = "Run tests" + (f" ({tests[0].name})" if len(tests) == 1 else f" ({len(tests)} files)")
        lenses.append(types.CodeLens(where, types.Command(title, RUN_TESTS, arguments=[uri])))
    return lenses


def explain(analysis: Analysis) -> dict:
    """`dslc explain` of the document as it is in the editor (saved or not)."""
    from dslc.compiler.plan.explain import render_text
    if analysis.too_large or analysis.failure:
        return {"ok": False, "text": analysis.failure or "the file is too large to explain from the editor: run dslc explain FILE"}
    if analysis.diagnostics:
        return {"ok": False, "text": CompileError(analysis.source, analysis.diagnostics).render()}
    from dslc.compiler.pipeline import check_source
    return {"ok": True, "text": render_text(check_source(analysis.source))}


async def run_tests(path: Path) -> dict:
    """`dslc test` on the test files of the saved file, in a process of its own (it starts Spark)."""
    tests = test_files(path)
    if not tests:
        return {"ok": False, "text": f"no test file beside {path.name} (write {path.stem}{SUFFIX}; docs/testing.md)"}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "dslc.compiler.cli", "test", *map(str, tests), cwd=str(path.parent),
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    try:
        output, _ = await asyncio.wait_for(process.communicate(), TEST_TIMEOUT_S)
    except asyncio.TimeoutError:
        process.kill()
        await process.wait()
        return {"ok": False, "text": f"dslc test did not finish in {TEST_TIMEOUT_S} s and was stopped"}
    return {"ok": process.returncode == 0, "text": output.decode("utf-8", errors="replace")}
