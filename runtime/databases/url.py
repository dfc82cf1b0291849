"""A DATABASE's URL (`postgresql://user:password@host:port/db?sslmode=...`, secrets filled) in the
forms its users need: Spark's JDBC reader and writer (`jdbc:postgresql://host:port/db?...` with the
user and password as separate options, which Spark redacts in plans and logs), and a masked text
for messages."""
from __future__ import annotations

import urllib.parse
from dataclasses import dataclass

from dslc.runtime.secrets import mask_url


@dataclass(frozen=True, slots=True)
class JdbcTarget:
    """Where Spark's JDBC source or sink connects: the URL without credentials, and the credentials."""

    url: str
    user: str | None
    password: str | None

    def options(self) -> dict[str, str]:
        """The reader's and writer's options (Spark redacts `password` wherever it shows them)."""
        found = {"url": self.url, "driver": "org.postgresql.Driver"}
        if self.user:
            found["user"] = self.user
        if self.password:
            found["password"] = self.password
        return found


def jdbc(url: str) -> JdbcTarget:
    """The JDBC form of a filled postgresql:// URL."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or "localhost"
    if ":" in host:
        host = f"[{host}]"
    port = f":{parts.port}" if parts.port else ""
    query = f"?{parts.query}" if parts.query else ""
    user = urllib.parse.unquote(parts.username) if parts.username else None
    password = urllib.parse.unquote(parts.password) if parts.password else None
    return JdbcTarget(f"jdbc:postgresql://{host}{port}{parts.path}{query}", user, password)


def shown(url: str) -> str:
    """The URL as a message shows it: without its password."""
    return mask_url(url)
