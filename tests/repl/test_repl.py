"""dslc repl: the session logic and completer directly, and the real REPL through a pseudo-terminal."""
from __future__ import annotations

import io
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from prompt_toolkit.document import Document

from dslc.compiler.cli.repl import FlowCompleter, Repl, is_complete
from dslc.compiler.cli.repl_session import Session, statement_kind
from dslc.compiler.diagnostics import CompileError

pexpect = pytest.importorskip("pexpect")

ORDERS = "SOURCE orders FROM JSON 'data/'\n  SCHEMA (order_id STRING, amount DOUBLE, country STRING)"
PAID = "STREAM paid = SELECT order_id, amount FROM orders WHERE amount > 0"
PROMPT = "flow> "


# ---- session and completer, no terminal ------------------------------------------------------

def test_statements_accumulate_and_bad_ones_are_rejected():
    session = Session()
    session.add(ORDERS)
    session.add(PAID)
    assert [n.name for n in session.plan.nodes] == ["orders", "paid"]
    with pytest.raises(CompileError) as failure:
        session.add("STREAM bad = SELECT amout FROM orders")
    rendered = failure.value.render()
    assert "unknown column 'amout'" in rendered and "^^^^^" in rendered and "did you mean 'amount'" in rendered
    assert len(session.statements) == 2 and session.find_node("bad") is None
    assert session.render_schema("paid").split() == ["paid:", "order_id", "STRING", "amount", "DOUBLE"]


def test_add_text_splits_at_top_level_semicolons_only():
    done, rest = Session().add_text("SOURCE a FROM TEXT 'x;y'; STREAM b = SELECT ';' AS s FROM a;\nSTREAM c =")
    assert [statement_kind(d) for d in done] == ["SOURCE", "STREAM"]
    assert rest.strip() == "STREAM c ="
    assert is_complete("SOURCE a FROM TEXT 'x';") and not is_complete("SOURCE a\n FROM TEXT 'x'")
    assert is_complete(":plan") and is_complete("")


def test_statement_ending_in_a_comment_still_terminates():
    session = Session()
    session.add(ORDERS + " -- the orders\n")
    session.add(PAID)
    assert session.node_names() == ["orders", "paid"]


def test_load_is_all_or_nothing(tmp_path: Path):
    good = tmp_path / "good.flow"
    good.write_text(ORDERS + ";\n" + PAID + ";\nSINK paid TO CONSOLE;\n")
    bad = tmp_path / "bad.flow"
    bad.write_text("STREAM x = SELECT nope FROM paid;\nSTREAM y = SELECT 1 AS one;\n")
    session = Session()
    assert session.load(good) == 3
    assert session.folder == tmp_path.resolve()
    with pytest.raises(CompileError):
        session.load(bad)
    assert len(session.statements) == 3
    # :show leaves the session's own sinks out and writes nothing: the job hands `paid` back
    job = session.show_job("paid", 3, str(tmp_path))
    assert job.name == "paid" and "captured.output('paid', paid)" in job.code
    assert "write_" not in job.code and "sinks" not in job.code


LOADED = """PIPELINE lines MODE BATCH;

-- the orders, as the shop writes them
SOURCE orders FROM JSON 'data/'
  SCHEMA (order_id STRING, amount DOUBLE, country STRING);


SOURCE refunds FROM JSON 'refunds/'   -- line 8
  SCHEMA (order_id STRING, refunded DOUBLE);
STREAM paid = SELECT order_id, amount, '--' AS dashes FROM orders WHERE amount > 0; STREAM big = SELECT * FROM paid
  WHERE amount > 100;
SINK big TO CONSOLE
"""


def test_a_loaded_file_keeps_its_line_numbers(tmp_path: Path):
    """#48 item 13: a source on line 8 of the loaded file was on line 7 of the session's program
    (blank lines and comments between statements were dropped)."""
    path = tmp_path / "lines.flow"
    path.write_text(LOADED)
    session = Session()
    session.load(path)
    assert {n.name: n.line for n in session.plan.nodes} == {"orders": 4, "refunds": 8, "paid": 10, "big": 10}
    assert session.program().splitlines()[:11] == LOADED.splitlines()[:11]
    with pytest.raises(CompileError) as failure:   # a typed statement: the line after the file's
        session.add("\nSTREAM bad = SELECT nope FROM refunds")
    assert failure.value.render().startswith("<repl>:13:21: error[E0204]")
    broken = tmp_path / "broken.flow"
    broken.write_text(LOADED.replace("refunded DOUBLE", "refunded DUBLE"))
    with pytest.raises(CompileError) as failure:
        Session().load(broken)
    assert failure.value.render().startswith(f"{broken}:9:37: error[E0306]")   # the file's name and line


def test_a_file_loaded_after_typed_statements_has_its_errors_at_its_own_lines(tmp_path: Path):
    """#48 item 13: `:load` into a session holding statements reported the file's errors as
    `<repl>:LINE` at the line of the session's program, not at the file's."""
    broken = tmp_path / "broken.flow"
    broken.write_text(LOADED.replace("PIPELINE lines MODE BATCH;", "-- statements typed before")
                      .replace("refunded DOUBLE", "refunded DUBLE"))
    for typed in ("SOURCE other FROM JSON 'o/' SCHEMA (k STRING)", "SET spark.sql.shuffle.partitions = '4'"):
        session = Session()
        session.add(typed)
        with pytest.raises(CompileError) as failure:
            session.load(broken)
        assert failure.value.render().startswith(f"{broken}:9:37: error[E0306]")
        assert "   9 | SOURCE refunds FROM JSON 'refunds/'   -- line 8" not in failure.value.render()
        assert "   9 |   SCHEMA (order_id STRING, refunded DUBLE);" in failure.value.render()
        assert session.statements == [typed]


def test_a_mistyped_command_gets_a_did_you_mean():
    """#48 item 13: `:shw` and `:explain` were only 'unknown command'."""
    err = io.StringIO()
    repl = Repl(Session(), out=io.StringIO(), err=err)
    repl.feed(":shw orders")
    repl.feed(":explain")
    repl.feed(":frobnicate")
    lines = err.getvalue().splitlines()
    assert lines[0] == "unknown command :shw; did you mean :show? (:help lists the commands)"
    assert lines[1] == ("unknown command :explain; did you mean :plan (the logical plan, as dslc explain shows it) "
                        "or :physical? (:help lists the commands)")
    assert lines[2] == "unknown command :frobnicate; :help lists the commands"


def _completions(session: Session, text: str) -> list[str]:
    return [c.text for c in FlowCompleter(session).get_completions(Document(text), None)]


def test_completer_offers_keywords_names_columns_and_commands():
    session = Session()
    session.add(ORDERS)
    session.add(PAID)
    assert "SOURCE" in _completions(session, "SOU")
    assert "source" in _completions(session, "sou")
    assert _completions(session, "STREAM x = SELECT * FROM pa")[0] == "paid"
    assert _completions(session, "FROM pai") == ["paid"]
    assert "order_id" in _completions(session, "SELECT ord")
    assert _completions(session, "SELECT paid.am") == ["amount"]
    assert _completions(session, ":sch") == [":schema"]
    assert set(_completions(session, ":show ")) == {"orders", "paid"}
    # nothing typed (#48 item 12): a statement's first word; after `SELECT ` the columns in scope first
    assert _completions(session, "") == ["SOURCE", "BROADCAST", "STREAM", "SINK", "SET", "PIPELINE"]
    after_select = _completions(session, "STREAM x = SELECT ")
    assert after_select[:3] == ["order_id", "amount", "country"] and "paid" in after_select and "FROM" in after_select
    assert _completions(session, "STREAM x = SELECT 'a ") == [] and _completions(session, "SELECT 1") == []


def test_piped_input_runs_without_a_terminal(tmp_path: Path):
    script = f"{ORDERS};\n:schema orders\nSTREAM bad = SELECT nope FROM orders;\n:quit\n"
    done = subprocess.run([sys.executable, "-m", "dslc.compiler.cli", "repl", "--no-spark"], input=script, text=True,
                          capture_output=True, cwd=tmp_path, timeout=60,
                          env={**os.environ, "DSLC_HISTORY": str(tmp_path / "hist")})
    assert done.returncode == 1  # something was rejected
    assert "ok: source orders" in done.stdout and "country   STRING" in done.stdout
    assert "unknown column 'nope'" in done.stderr


# ---- the real REPL in a pseudo-terminal ------------------------------------------------------

def spawn(tmp_path: Path, *args: str, timeout: int = 30):
    env = {**os.environ, "DSLC_HISTORY": str(tmp_path / "history"), "TERM": "dumb", "PYTHONUNBUFFERED": "1"}
    child = pexpect.spawn(sys.executable, ["-m", "dslc.compiler.cli", "repl", "--no-spark", *args], env=env,
                          cwd=str(tmp_path),
                          timeout=timeout, encoding="utf-8", dimensions=(40, 200))
    child.expect_exact(PROMPT)
    return child


def send_lines(child, *lines: str) -> None:
    for line in lines:
        child.send(line + "\r")


def type_with_tab(child, *parts: str) -> None:
    """Send the parts with a Tab between them, waiting for each completion to be applied
    (completions are computed asynchronously, so keys typed too fast would overtake them)."""
    for index, part in enumerate(parts):
        child.send(part)
        if index < len(parts) - 1:
            time.sleep(0.3)
            child.send("\t")
            time.sleep(0.5)


def quit_(child) -> None:
    # dumb terminals get the prompt before raw mode is on; a ^D sent earlier would be eaten
    # by the line discipline as end-of-file, so give prompt_toolkit a moment first
    time.sleep(0.5)
    child.sendcontrol("d")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


def test_terminal_session(tmp_path: Path):
    child = spawn(tmp_path)
    # a statement over two lines is accepted once its ';' arrives
    send_lines(child, "SOURCE orders FROM JSON 'data/'", "  SCHEMA (order_id STRING, amount DOUBLE);")
    child.expect_exact("ok: source orders (order_id STRING, amount DOUBLE)")
    child.expect_exact(PROMPT)
    send_lines(child, ":schema orders")
    child.expect(r"order_id\s+STRING")
    child.expect(r"amount\s+DOUBLE")
    child.expect_exact(PROMPT)
    # an unknown column: the error with caret and hint, and the REPL goes on
    send_lines(child, "STREAM bad = SELECT amout FROM orders;")
    child.expect_exact("error[E0204]: unknown column 'amout'")
    child.expect_exact("^^^^^")
    child.expect_exact("hint: did you mean 'amount'?")
    child.expect_exact(PROMPT)
    send_lines(child, PAID + ";")
    child.expect_exact("ok: stream paid")
    child.expect_exact(PROMPT)
    send_lines(child, ":plan")
    child.expect_exact("paid := Query[orders]")
    child.expect_exact(PROMPT)
    send_lines(child, ":schema bad")
    child.expect_exact("unknown stream or source 'bad'")
    child.expect_exact(PROMPT)
    # completion: a keyword, then a stream name after :schema
    type_with_tab(child, "STREAM big = SEL", " order_id FROM pai", ";\r")
    child.expect_exact("ok: stream big (order_id STRING)")
    child.expect_exact(PROMPT)
    type_with_tab(child, ":schema bi", "\r")
    child.expect_exact("big:")
    child.expect(r"order_id\s+STRING")
    child.expect_exact(PROMPT)
    quit_(child)

    # history persists into the next session
    history = (tmp_path / "history").read_text()
    assert "SCHEMA (order_id STRING, amount DOUBLE);" in history
    assert ":schema orders" in history
    child = spawn(tmp_path)
    send_lines(child, ":reset")
    child.expect_exact("ok: session cleared")
    child.expect_exact(PROMPT)
    quit_(child)


def test_terminal_load(tmp_path: Path):
    (tmp_path / "small.flow").write_text(f"{ORDERS};\n{PAID};\n")
    child = spawn(tmp_path)
    send_lines(child, ":load small.flow")
    child.expect_exact("ok: loaded 2 statements from small.flow")
    child.expect_exact(PROMPT)
    send_lines(child, ":schema paid")
    child.expect(r"amount\s+DOUBLE")
    child.expect_exact(PROMPT)
    send_lines(child, ":quit")
    child.expect(pexpect.EOF)


def test_file_argument_is_loaded(tmp_path: Path):
    (tmp_path / "small.flow").write_text(f"{ORDERS};\n")
    child = spawn(tmp_path, "small.flow")
    send_lines(child, ":schema orders")
    child.expect(r"country\s+STRING")
    child.expect_exact(PROMPT)
    quit_(child)


@pytest.mark.spark
def test_show_runs_the_pipeline_on_the_data(tmp_path: Path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "orders.json").write_text(
        '{"order_id": "o-17", "amount": 12.5, "country": "FR"}\n'
        '{"order_id": "o-18", "amount": -1.0, "country": "DE"}\n')
    child = spawn(tmp_path, timeout=120)
    send_lines(child, ORDERS + ";", PAID + ";")
    child.expect_exact("ok: stream paid")
    child.expect_exact(PROMPT)
    send_lines(child, ":show paid 3")
    child.expect(r"\|\s*order_id\s*\|\s*amount\s*\|")
    child.expect(r"\|\s*o-17\s*\|\s*12\.5\s*\|")
    child.expect_exact(PROMPT)
    assert "o-18" not in child.before
    quit_(child)


def test_spark_that_cannot_start_says_why(tmp_path: Path):
    """The JVM's output goes to a log file, not the screen; when it cannot start, its reason is shown."""
    script = f"{ORDERS};\n:show orders 1\n"
    done = subprocess.run([sys.executable, "-m", "dslc.compiler.cli", "repl"], input=script, text=True,
                          capture_output=True, cwd=tmp_path, timeout=120,
                          env={**os.environ, "DSLC_HISTORY": str(tmp_path / "hist"), "JAVA_HOME": str(tmp_path / "nojava")})
    assert done.returncode == 1
    assert "Spark did not start" in done.stderr and "nojava/bin/java" in done.stderr and "spark.log" in done.stderr
    # Spark's analyzer (on by default) could not start either: the REPL said so and kept the statement
    assert "warning: Spark's analyzer is off: Spark did not start" in done.stderr
    assert "ok: source orders" in done.stdout
    # without the :show, nothing was refused: the analyzer that could not start is only a warning
    kept = subprocess.run([sys.executable, "-m", "dslc.compiler.cli", "repl"], input=f"{ORDERS};\n", text=True,
                          capture_output=True, cwd=tmp_path, timeout=120,
                          env={**os.environ, "DSLC_HISTORY": str(tmp_path / "hist"), "JAVA_HOME": str(tmp_path / "nojava")})
    assert kept.returncode == 0 and "warning: Spark's analyzer is off" in kept.stderr, kept.stderr
