"""The sample runner itself (tests/docs/sample_outputs.py): a sample that is not what its command
prints fails, what varies between runs does not, and the sandbox is a reader's checkout."""
from __future__ import annotations

from pathlib import Path

from sample_outputs import Block, Sandbox, blocks, commands, matches, normal, rewritten, run_document, varying

DOC = """# A document

<!-- file: hello.flow -->
```sql
SOURCE s FROM JSON 'in/' SCHEMA (a STRING);
```

<!-- run -->
```bash
mkdir -p work && cd work && echo started > log.txt
```

<!-- output: vary in_flight, max_in_flight -->
```
$ echo "progress 00:00:12 in_flight=3/4 rows=56 p50_ms=12.5 took 5.5s"
progress 00:00:31 in_flight=1/4 rows=56 p50_ms=40.96 took 12s
$ printf 'operator  calls  max_in_flight\\nenriched     22             28\\n'
operator calls max_in_flight
enriched 22 3
$ pwd && cat log.txt && seq 1 5
work
started
...
3
...
```
"""


def test_a_document_s_blocks_and_commands():
    found = blocks(DOC)
    assert [(b.kind, b.arg) for b in found] == [("file", "hello.flow"), ("run", ""),
                                                ("output", "vary in_flight, max_in_flight")]
    assert varying(found[2]) == ("in_flight", "max_in_flight")
    steps = commands(found[2])
    assert [c for c, _ in steps][1].startswith("printf") and steps[0][1] == [
        "progress 00:00:31 in_flight=1/4 rows=56 p50_ms=40.96 took 12s"]


def test_times_decimals_and_named_values_are_ignored_counts_are_not():
    vary = ("in_flight",)
    shown = ["progress 00:00:31 in_flight=1/4 rows=56 p50_ms=40.96 took 12s"]
    assert matches(shown, ["progress 00:00:12 in_flight=3/4 rows=56 p50_ms=12.5 took 5.5s"], vary)
    assert not matches(shown, ["progress 00:00:12 in_flight=3/4 rows=55 p50_ms=12.5 took 5.5s"], vary)
    assert not matches(shown, ["progress 00:00:12 in_flight=3/4 rows=56 p50_ms=12.5 took 5.5s"])
    assert normal(["2026-11-01 12:00:05 at 12:00:05"]) == ["2026-11-01 12:00:05 at <clock>"]    # data stays


def test_dots_stand_for_any_lines_and_nothing_else_may_be_missing():
    actual = ["a", "b", "c", "d"]
    assert matches(["a", "...", "d"], actual) and matches(["...", "b", "c", "..."], actual)
    assert not matches(["a", "...", "c"], actual)          # d is not shown
    assert not matches(["b", "..."], actual)                # a is not shown
    assert not matches(["...", "c", "b", "..."], actual)    # order
    assert not matches([], ["printed"]) and matches([], [])


def test_regenerating_keeps_the_dots_and_takes_the_lines_they_frame():
    shown = ["...", "operator 1 calls", "x 22", "...", "done"]
    actual = ["noise", "operator 1 calls", "x 23", "more noise", "done"]
    assert rewritten(shown, actual) == ["...", "operator 1 calls", "x 23", "...", "done"]
    assert rewritten(["old"], ["new", "lines"]) == ["new", "lines"]


def test_the_sandbox_runs_in_one_session_with_the_docs_ports(tmp_path):
    sandbox = Sandbox()
    try:
        port = sandbox.ports[8765]
        assert port != 8765
        assert str(port) in (sandbox.root / "examples/run.py").read_text()          # the copied examples
        assert "8765" not in (sandbox.root / "examples/fraud/pipeline.flow").read_text()
        out, status = sandbox.run("cd examples && echo http://127.0.0.1:8765/x")
        assert (out, status) == (["http://127.0.0.1:8765/x"], 0)
        sandbox.write("note.txt", "port 8765")                                      # in the current folder
        assert (sandbox.root / "examples/note.txt").read_text() == f"port {port}\n"
        out, _ = sandbox.run("pwd; which dslc; false")
        assert out == ["examples", ".venv/bin/dslc"]
        assert sandbox.run("exit_code() { return 3; }; exit_code")[1] == 3
    finally:
        sandbox.close()
    assert not sandbox.root.exists()


def test_a_sample_that_is_not_what_its_command_prints_fails_and_is_rewritten(tmp_path):
    doc = tmp_path / "doc.md"
    doc.write_text(DOC)
    assert run_document(doc) == []
    doc.write_text(DOC.replace("enriched 22 3", "enriched 21 3").replace("...\n3\n", "...\n7\n"))
    found = run_document(doc, write=True)
    assert [m.command.split()[0] for m in found] == ["printf", "pwd"]
    assert "enriched     22             28" in doc.read_text() and "work\nstarted\n...\n1\n..." in doc.read_text()
    assert run_document(doc) == []
    doc.write_text(DOC.replace("work\nstarted", "work\nstopped"))      # a part that is not there at all
    assert [m.expected[:2] for m in run_document(doc, write=True)] == [["work", "stopped"]]
    assert "work\nstopped" in doc.read_text()                             # kept, for a person to mend


def test_the_docs_mark_their_samples():
    root = Path(__file__).resolve().parents[2]
    kinds = [b.kind for doc in (root / "README.md", *(root / "docs").glob("*.md")) for b in blocks(doc.read_text())]
    assert kinds.count("output") >= 12 and kinds.count("file") >= 8 and "illustration" in kinds
    assert isinstance(blocks(DOC)[0], Block)
