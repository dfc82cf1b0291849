"""Names the user chose, as Spark reads them: a plain name stays as written, anything else
(a dash, a space, a keyword, a non-ASCII letter, a back-quote) is back-quoted, the way
`dslc check` accepted it.

Spark's own unquoted identifiers are ASCII only (`café` is INVALID_IDENTIFIER), narrower than
Python's `\\w` that sqlglot tests, so the rule is written here once, for every stage that hands a
name to Spark: rules that build SQL, and the code that registers views and reads columns.
"""
from __future__ import annotations

import re

from sqlglot import exp
from sqlglot.dialects.spark import Spark

_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Words Spark's grammar may read as keywords (SELECT, FROM, ORDER of ORDER BY, ...): quoted even
# though plain; quoting a word Spark would have taken as a name is harmless.
_KEYWORDS = frozenset(word.lower() for keyword in Spark.Tokenizer.KEYWORDS for word in keyword.split()
                      if _PLAIN.fullmatch(word))


def needs_quotes(name: str) -> bool:
    """True when Spark SQL must see `name` back-quoted."""
    return _PLAIN.fullmatch(name) is None or name.lower() in _KEYWORDS


def identifier(name: str) -> exp.Identifier:
    """A sqlglot identifier for `name`, quoted exactly when Spark needs it."""
    return exp.to_identifier(name, quoted=needs_quotes(name))


def sql_name(name: str) -> str:
    """`name` as Spark SQL text: `orders`, `` `raw-orders` ``, `` `a``b` ``."""
    return "`" + name.replace("`", "``") + "`" if needs_quotes(name) else name
