"""`dslc run` finds PostgreSQL's JDBC driver for a job that uses Spark's JDBC source or sink, and
stops before Spark starts, saying where it looked, when there is none."""
from __future__ import annotations

from dslc.compiler.cli import jdbc_jar
from dslc.compiler.cli.main import main

FLOW = """
DATABASE crm AT 'postgresql://app@127.0.0.1:1/crm';
SOURCE orders FROM DATABASE crm TABLE 'public.orders' SCHEMA (order_no BIGINT);
SINK orders TO CONSOLE;
"""


def test_the_jar_is_found_where_documented(tmp_path):
    jar = tmp_path / "pg.jar"
    jar.write_bytes(b"PK")
    assert jdbc_jar.find(str(jar), {}) == str(jar.resolve())
    assert jdbc_jar.find(None, {jdbc_jar.ENV: str(jar)}) == str(jar.resolve())


def test_a_missing_jar_stops_dslc_run_before_spark_starts(tmp_path, monkeypatch, capsys):
    flow = tmp_path / "pipeline.flow"
    flow.write_text(FLOW)
    monkeypatch.setattr(jdbc_jar, "DEBIAN", str(tmp_path / "absent.jar"))
    monkeypatch.delenv(jdbc_jar.ENV, raising=False)
    status = main(["run", str(flow), "--jars", str(tmp_path / "nowhere.jar")])
    err = capsys.readouterr().err
    assert status == 2
    assert "JDBC driver was not found" in err and "nowhere.jar" in err and "libpostgresql-jdbc-java" in err
    assert not list((tmp_path / "target" / "logs").glob("*.log")) or all(
        p.stat().st_size == 0 for p in (tmp_path / "target" / "logs").glob("*.log"))
