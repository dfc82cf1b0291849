"""The REPL with Spark's analyzer on (the default of `dslc repl`): each statement is checked by
Spark's analyzer as it is entered (errors in the DSL format, at their line), and the types shown
are Spark's. In-process, on the suite's SparkSession (the REPL's runner reuses an active session)."""
from __future__ import annotations

import io

import pytest

from dslc.compiler.cli.repl import Repl
from dslc.compiler.cli.repl_session import Session
from dslc.compiler.interactive.spark_runner import SparkRunner

pytestmark = pytest.mark.spark

ORDERS = "SOURCE orders FROM JSON 'data/' SCHEMA (order_id STRING, amount DOUBLE, country STRING);"


def repl_on(spark, tmp_path) -> tuple[Repl, io.StringIO, io.StringIO]:
    out, err = io.StringIO(), io.StringIO()
    session = Session(folder=tmp_path, spark_check=True, runner=SparkRunner(err, progress=False))
    return Repl(session, out=out, err=err), out, err


def test_an_error_only_sparks_analyzer_finds_is_reported_as_the_statement_is_entered(spark, tmp_path):
    repl, out, err = repl_on(spark, tmp_path)
    repl.feed(ORDERS)
    repl.feed("STREAM sorted = SELECT order_id,\n  sort_array(amount) AS s FROM orders;")
    shown = err.getvalue()
    assert "<repl>:3:3: error[E0212]: Spark rejects this query (DATATYPE_MISMATCH.UNEXPECTED_INPUT_TYPE)" in shown, shown
    assert "   3 |   sort_array(amount) AS s FROM orders" in shown
    assert "     |   ^^^^^^^^^^^^^^^^^^" in shown
    assert "= hint: Spark's analyzer found this" in shown
    assert len(repl.session.statements) == 1 and repl.errors == 1     # not kept, nothing ran
    # the same statement with the fast check only is kept: Spark's analyzer is what refused it
    repl.command(":spark off")
    assert "checks: the fast check only" in out.getvalue()
    repl.feed("STREAM sorted = SELECT order_id, sort_array(amount) AS s FROM orders;")
    assert len(repl.session.statements) == 2


def test_the_types_shown_are_sparks(spark, tmp_path):
    repl, out, err = repl_on(spark, tmp_path)
    repl.feed(ORDERS)
    repl.feed("STREAM parsed = SELECT from_csv(order_id, 'a INT, b STRING') AS row,\n"
              "  variant_get(parse_json(country), '$.n', 'int') AS n FROM orders;")
    assert err.getvalue() == ""
    assert "ok: stream parsed (row STRUCT<a: INT, b: STRING>, n INT)" in out.getvalue()
    repl.command(":schema parsed")
    schema = out.getvalue().split("ok: stream parsed")[1]
    assert "parsed: (Spark's analyzer)" in schema and "row  STRUCT<a: INT, b: STRING>" in schema
    assert "?" not in schema


def test_spark_on_again_checks_what_the_session_kept(spark, tmp_path):
    repl, out, err = repl_on(spark, tmp_path)
    repl.command(":spark off")
    repl.feed(ORDERS)
    # an argument type: left to Spark by the fast check
    repl.feed("STREAM g = SELECT country, sort_array(amount) AS s FROM orders;")
    assert len(repl.session.statements) == 2
    repl.command(":spark on")
    assert "error[E0212]: Spark rejects this query (DATATYPE_MISMATCH.UNEXPECTED_INPUT_TYPE)" in err.getvalue()
    assert repl.session.spark_check is False        # stays off until the session checks again
    repl.command(":reset")
    repl.command(":spark on")
    assert out.getvalue().rstrip().endswith("checks: the fast check, then Spark's analyzer")
    repl.feed(ORDERS)
    assert repl.session.spark is not None and "orders" in repl.session.spark.schemas


def test_ctrl_c_while_the_jvm_starts_returns_at_once(tmp_path):
    """Ctrl-C while the session is still starting gives the prompt back without waiting for the
    JVM. The slow start is forced (a JVM that takes long to start cannot be ordered); the worker
    gives up by itself once the session is up."""
    import _thread
    import threading

    from dslc.compiler.interactive.spark_runner import Interrupted

    released, waiting, done = threading.Event(), threading.Event(), threading.Event()

    class SlowStart(SparkRunner):
        def _session(self, conf):
            waiting.set()
            released.wait(30)
            done.set()
            raise RuntimeError("never started")

    runner = SlowStart(io.StringIO(), progress=False, poll_s=0.05)
    runner.start_in_background()        # as `dslc repl` does: the statement's worker waits for it
    threading.Timer(0.3, _thread.interrupt_main).start()
    with pytest.raises(Interrupted):
        runner.run("a query", lambda spark: None)
    assert waiting.is_set() and not done.is_set()       # it returned while the start was under way
    released.set()
