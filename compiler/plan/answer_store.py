"""ANSWERS 'location' and STORE [TTL d] checked: where an ENRICH's answers are kept."""
from __future__ import annotations

import re
from urllib.parse import urlsplit

from dslc.compiler.diagnostics import Diagnostic, error
from dslc.compiler.frontend import ast
from dslc.compiler.plan import logical as plan
from dslc.compiler.plan.enrich_options import EnrichOptions
from dslc.runtime.config import Store

#: The answer store's file when STORE is used without ANSWERS: one per pipeline folder, the same in
#: BATCH and STREAMING and with or without CHECKPOINT, so no run of the file pays for an answer
#: another run received. (Before, a pipeline with CHECKPOINT kept it at LEGACY under it.)
DEFAULT_FILE = "answers.db"
DEFAULT_LOCATION = "target/" + DEFAULT_FILE
LEGACY = "{checkpoint}/answers/" + DEFAULT_FILE


def location(text: ast.Str, problems: list[Diagnostic]) -> str | None:
    """A checked ANSWERS location: a file path, or redis://host[:port][/db]."""
    value = text.value
    if re.match(r"^[a-z][a-z0-9+.-]*://", value, re.IGNORECASE) and not value.lower().startswith(
            ("redis://", "rediss://", "file://")):
        problems.append(error("E0309", text.span, text=value, what="ANSWERS location",
                              hint="give a file path (an embedded store shared by the tasks of one machine) "
                                   "or redis://host:port/db (a Redis server every executor reaches)"))
        return None
    if value.lower().startswith(("redis://", "rediss://")):
        parts = urlsplit(value)
        try:
            _ = parts.port     # urlsplit checks the port only when it is read
        except ValueError:
            parts = None
        if parts is None or not parts.hostname or parts.path.strip("/") and not parts.path.strip("/").isdigit():
            problems.append(error("E0309", text.span, text=value, what="Redis location",
                                  hint="write redis://host:port/db, e.g. redis://10.0.0.5:6379/0"))
            return None
    if not value.strip():
        problems.append(error("E0309", text.span, text=value, what="ANSWERS location",
                              hint="give a file path or redis://host:port/db"))
        return None
    return value


def default_location(settings: plan.Settings) -> str:
    """The store of a pipeline without ANSWERS: target/answers.db beside the .flow file, in
    both modes (its CHECKPOINT, which only STREAMING needs, does not move it)."""
    return DEFAULT_LOCATION


def legacy_location(settings: plan.Settings) -> str | None:
    """Where a pipeline without ANSWERS kept its store before it moved to DEFAULT_LOCATION."""
    if settings.answers or not settings.checkpoint:
        return None
    return LEGACY.format(checkpoint=settings.checkpoint.rstrip("/"))


def store(checked: EnrichOptions, settings: plan.Settings) -> Store | None:
    """The STORE of an ENRICH, in the pipeline's answer store."""
    if not checked.store:
        return None
    return Store(location=settings.answers or default_location(settings), ttl_s=checked.store_ttl_s)
