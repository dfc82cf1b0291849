"""`{column}` placeholders of HTTP URL templates: one definition for the checker and the runtime,
so a URL that `dslc check` accepts is filled exactly the same way on the executors."""
from __future__ import annotations

import re

PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def placeholders(url: str) -> tuple[str, ...]:
    """Column names of the `{col}` placeholders in a URL template, in order, without repeats."""
    return tuple(dict.fromkeys(PLACEHOLDER.findall(url)))
