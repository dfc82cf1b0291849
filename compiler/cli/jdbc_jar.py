"""Where `dslc run` finds PostgreSQL's JDBC driver, a jar that Spark's JDBC source and sink need
(SOURCE ... FROM DATABASE, SINK ... TO DATABASE): `--jars PATH`, else $DSLC_JDBC_JAR, else
Debian's `libpostgresql-jdbc-java` (/usr/share/java/postgresql.jar). A job that needs it and finds
none stops before Spark starts, saying where it looked."""
from __future__ import annotations

import os
from pathlib import Path

DEBIAN = "/usr/share/java/postgresql.jar"
ENV = "DSLC_JDBC_JAR"


class MissingDriver(Exception):
    """No PostgreSQL JDBC driver where dslc looks; the message says where and how to get one."""


def needs_driver(job_text: str) -> bool:
    """Whether a generated job reads or writes a database through Spark's JDBC source or sink."""
    return "jdbc.read(" in job_text or "jdbc.write_" in job_text


def find(given: str | None = None, environ: dict[str, str] | None = None) -> str:
    """The driver jar's path (the first of --jars, $DSLC_JDBC_JAR, Debian's) that exists."""
    environ = os.environ if environ is None else environ
    places = [("--jars", given), (ENV, environ.get(ENV)), ("Debian's libpostgresql-jdbc-java", DEBIAN)]
    if given:       # named by the user: that one, or an error (never another jar silently)
        places = places[:1]
    for _, place in places:
        if place and Path(place).is_file():
            return str(Path(place).resolve())
    looked = ", ".join(f"{label} ({place})" for label, place in places if place)
    raise MissingDriver(f"the pipeline reads or writes a DATABASE through Spark's JDBC source, but PostgreSQL's "
                        f"JDBC driver was not found: looked at {looked}; install it (apt-get install "
                        f"libpostgresql-jdbc-java), or give the jar with dslc run --jars PATH or ${ENV}")
