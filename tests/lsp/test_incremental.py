"""Incremental checking (compiler/lsp/incremental.py) gives what a full `dslc check` gives: over
random sequences of edits of the examples and of a generated 300-statement pipeline, one
document's cache is carried from version to version, and every version's diagnostics, syntax
trees and plan are compared with a check from scratch."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dslc.compiler.diagnostics import CompileError
from dslc.compiler.lsp.analysis import analyze
from dslc.compiler.lsp.incremental import EditorCache, Superseded, shifted
from dslc.compiler.lsp.server import _check
from dslc.compiler.pipeline import check_source
from dslc.compiler.source import SourceFile, Span

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.compiler_scaling import BRANCH_DEPTH, UDFS, generate  # noqa: E402

EXAMPLES = sorted((ROOT / "examples").glob("*/pipeline.flow"))

# What typing inserts: names that exist and names that do not, the punctuation that breaks a
# statement or a string, whole statements, a schema's type, nothing (a pure deletion).
PIECES = ["", "x", "nope_", " ", "\n", ";", "'", "`", "(", ")", ",", "--", "id", "amount", "country",
          "s0", "s1", "orders", " WHERE amount > 1", ", amount", "SELECT ", "FROM ", "STRING", "DOUBLE",
          "STREAM extra = SELECT * FROM s0;\n", "SINK extra TO CONSOLE;\n", " AS amount"]


@st.composite
def edits(draw, max_edits: int):
    """A list of edits: (where, as a fraction of the text; characters removed; text inserted),
    or None for "back to the original text" (an undo, which reuses older results)."""
    one = st.tuples(st.floats(0, 1), st.integers(0, 12), st.sampled_from(PIECES))
    return draw(st.lists(st.one_of(one, st.none()), min_size=1, max_size=max_edits))


def _apply(text: str, original: str, edit) -> str:
    if edit is None:
        return original
    where, removed, inserted = edit
    at = int(where * len(text))
    return text[:at] + inserted + text[at + removed:]


def full_check(text: str, path: Path) -> list:
    """`dslc check`'s diagnostics of the text, from scratch (file order)."""
    try:
        check_source(SourceFile(str(path), text))
    except CompileError as exc:
        return exc.diagnostics
    return []


def _same_as_full(text: str, path: Path, cache: EditorCache) -> None:
    base = str(path.parent)
    incremental = analyze(text, str(path), base, cache)
    scratch = analyze(text, str(path), base)
    ordered = sorted(incremental.diagnostics, key=lambda d: (d.span.start, d.code))
    assert ordered == full_check(text, path)
    assert incremental.diagnostics == scratch.diagnostics           # same order as well
    assert incremental.program == scratch.program                   # spans moved right
    assert incremental.plan == scratch.plan                         # what hover and completion read


def _walk(path: Path, text: str, sequence, cache: EditorCache) -> None:
    current = text
    _same_as_full(current, path, cache)
    for edit in sequence:
        current = _apply(current, text, edit)
        _same_as_full(current, path, cache)


@pytest.mark.parametrize("flow", EXAMPLES, ids=[p.parent.name for p in EXAMPLES])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sequence=edits(max_edits=6))
def test_random_edits_of_an_example_check_as_from_scratch(flow, sequence):
    _walk(flow, flow.read_text(), sequence, EditorCache())


@pytest.fixture(scope="module")
def large(tmp_path_factory) -> tuple[Path, str]:
    folder = tmp_path_factory.mktemp("large")
    (folder / "udfs.py").write_text(UDFS)
    text = generate(300, BRANCH_DEPTH)
    (folder / "large.flow").write_text(text)
    return folder / "large.flow", text


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sequence=edits(max_edits=4))
def test_random_edits_of_300_statements_check_as_from_scratch(large, sequence):
    path, text = large
    _walk(path, text, sequence, EditorCache())


def test_an_edit_re_analyses_only_what_it_changed(large):
    """One statement edited: the other 299 come from the cache, also when the edit moved them."""
    path, text = large
    cache = EditorCache()
    analyze(text, str(path), str(path.parent), cache)
    at = text.index("SELECT ", len(text) // 2) + len("SELECT ")
    cache.hits = cache.misses = 0
    typo = analyze(text[:at] + "nope_" + text[at:], str(path), str(path.parent), cache)
    assert [d.code for d in typo.diagnostics] == ["E0204"]
    # that statement's parse, its query's parse and analysis; the next query down its branch
    # reads a relation whose schema is now unknown, so it is analysed again too
    assert cache.misses == 4
    assert cache.hits >= 299 + 89 * 2 - 1


def test_a_schema_changed_upstream_analyses_its_readers_again(large):
    """Renaming a SOURCE column changes no query's text, but every query reading it fails now."""
    path, text = large
    cache = EditorCache()
    analyze(text, str(path), str(path.parent), cache)
    renamed = text.replace("amount DOUBLE, country STRING);", "amt DOUBLE, country STRING);", 1)
    incremental = analyze(renamed, str(path), str(path.parent), cache)
    assert incremental.diagnostics == analyze(renamed, str(path), str(path.parent)).diagnostics
    assert sum(d.code == "E0204" for d in incremental.diagnostics) >= 30     # first SELECT of each branch
    again = analyze(text, str(path), str(path.parent), cache)                 # and back
    assert again.diagnostics == []


def test_a_module_beside_the_file_is_looked_for_on_every_check(large, tmp_path):
    """Which user modules exist is not remembered: one deleted is reported at the next check."""
    path, text = large
    # a module name no other test imports: a `udfs` imported earlier in the run stays findable
    text = text.replace("'udfs:", "'lsp_incremental_udfs:")
    flow = tmp_path / "large.flow"
    flow.write_text(text)
    module = tmp_path / "lsp_incremental_udfs.py"
    module.write_text(UDFS)
    cache = EditorCache()
    assert analyze(text, str(flow), str(tmp_path), cache).diagnostics == []
    module.unlink()
    missing = analyze(text, str(flow), str(tmp_path), cache).diagnostics
    assert missing and {d.code for d in missing} == {"E0201"}
    assert missing == full_check(text, flow)
    module.write_text(UDFS)
    assert analyze(text, str(flow), str(tmp_path), cache).diagnostics == []


def test_a_superseded_check_stops_and_leaves_nothing_half_done(large):
    path, text = large
    cache = EditorCache()
    asked = []

    def current() -> bool:       # a newer version arrives after 40 steps of this check
        asked.append(1)
        return len(asked) < 40

    with cache.checking(current), pytest.raises(Superseded):
        analyze(text, str(path), str(path.parent), cache)
    assert len(asked) == 40
    _same_as_full(text, path, cache)


def test_the_server_skips_a_version_that_is_no_longer_the_newest(large):
    path, text = large
    cache = EditorCache()
    assert _check(text, str(path), str(path.parent), "utf-16", cache, lambda: False) is None
    assert cache.hits == cache.misses == 0          # not even started
    analysis, _ = _check(text, str(path), str(path.parent), "utf-16", cache, lambda: True)
    assert analysis.diagnostics == []


def test_moving_spans():
    assert shifted(Span(3, 5), 10) == Span(13, 15)
    assert shifted((Span(0, 1), "a", None, [Span(2, 2)]), 1) == (Span(1, 2), "a", None, [Span(3, 3)])


def test_every_error_file_checks_as_from_scratch_with_one_cache_shared_by_all():
    """tests/errors/*.flow, one after the other with one cache, then again in reverse: the same
    statement text meets other schemas, other names and other settings around it."""
    files = sorted((ROOT / "tests" / "errors").glob("*.flow"))
    assert len(files) > 40
    cache = EditorCache()
    for path in files + files[::-1]:
        _same_as_full(path.read_text(encoding="utf-8", errors="replace"), path, cache)
    assert cache.hits > 100


def test_the_cache_grows_with_the_file_and_stays_bounded():
    """A fixed size would forget every statement of a file longer than it, at every check."""
    text = generate(400, BRANCH_DEPTH)
    cache = EditorCache(entries=100)
    analyze(text, "/nowhere/large.flow", "/nowhere", cache)
    assert cache.statements.size == 1200 and len(cache.statements) == 400
    cache.hits = cache.misses = 0
    analyze(text, "/nowhere/large.flow", "/nowhere", cache)
    assert cache.misses == 0
    for n in range(30):     # typing: a new version of one statement each time, none forgotten yet
        analyze(text.replace("WHERE amount > 1;", f"WHERE amount > 1{n};"), "/nowhere/large.flow", "/nowhere", cache)
    assert len(cache.statements) == 430 and len(cache.sql.analyses) <= 1200


@pytest.mark.parametrize("scheme", ["postgrexsql", "POSTGRESQL"])
def test_a_database_url_that_is_not_postgresql_is_reported_not_raised(scheme):
    """Found by the property above in CI18: one letter typed into orders_db's DATABASE URL made the
    editor's analysis raise (the SQL call built with a URL the runtime refuses) instead of showing
    E0330; an upper-case scheme passed the check and failed the same way."""
    path = next(p for p in EXAMPLES if p.parent.name == "orders_db")
    text = path.read_text().replace("'postgresql://shop", f"'{scheme}://shop", 1)
    assert text != path.read_text()
    _same_as_full(text, path, EditorCache())
    assert [d.code for d in full_check(text, path)] == ["E0330"]
