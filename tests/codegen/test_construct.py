"""The runtime's configuration objects written back as keyword constructor calls: what the
compiler built (and validated) is exactly what the job rebuilds."""
from __future__ import annotations

import pytest

from dslc.compiler.codegen.emitter import Code, construct
from dslc.runtime import config as C


def _rebuild(lines: list[str]):
    return eval("\n".join(lines), {"C": C, "FOLDER": "/jobs"})


def test_defaults_are_left_out_and_enums_are_members():
    retry = C.Retry(3)
    assert construct(retry) == ["C.Retry(attempts=3)"]
    enrich = C.Enrich(name="e", line=4, call=C.HttpCall("http://x/{id}"), returns=(C.Column("t", "STRING"),),
                      key_columns=("id",), mode=C.Mode.UNORDERED, on_error=C.Outcome.DROP)
    text = "\n".join(construct(enrich, width=1000))
    assert "capacity=" not in text and "on_miss=" not in text and "method=" not in text
    assert "mode=C.Mode.UNORDERED" in text and "on_error=C.Outcome.DROP" in text
    assert _rebuild(construct(enrich)) == enrich


@pytest.mark.parametrize("width", [1000, 60, 20])
def test_broken_lines_rebuild_the_same_object_and_fit_when_they_can(width):
    process = C.Process(name="p", line=9, call=C.PythonCall("udfs:f", (Code("FOLDER"),)),
                        returns=(C.Column("a", "STRING"), C.Column("b", "DOUBLE")), states=("s",))
    lines = construct(process, width=width)
    rebuilt = _rebuild(lines)
    assert rebuilt == C.Process(name="p", line=9, call=C.PythonCall("udfs:f", ("/jobs",)),
                                returns=process.returns, states=("s",))
    if width == 1000:
        assert len(lines) == 1
    else:
        assert len(lines) > 1 and lines[0] == "C.Process("


def test_a_one_item_tuple_keeps_its_comma():
    assert construct((C.Column("a", "STRING"),)) == ["(C.Column(name='a', type='STRING'),)"]


def test_code_longer_than_its_line_stays_code_not_a_string():
    """A path the job resolves (`resolve(FOLDER, '...')`, as a `dslc test` case's answer store in
    its long case folder) is broken inside its literal: evaluated it is the path, never the text
    of the call (which once made a folder named `resolve(FOLDER, '...` beside the .flow file)."""

    path = "/tmp/dslc-test-x/000-pipeline_test/000-a_rule_update_raises_the_limit__then_a_delete/store/answers.db"
    store = C.Store(location=Code(f"resolve(FOLDER, {path!r})"), ttl_s=60.0)
    source = "\n".join(construct(store, width=80))
    assert all(len(line) <= 100 for line in source.splitlines())
    rebuilt = eval(source, {"C": C, "FOLDER": "/flows", "resolve": lambda folder, p: ("resolved", folder, p)})
    assert rebuilt.location == ("resolved", "/flows", path)
