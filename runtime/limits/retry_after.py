"""When a service says to come back: its `Retry-After` header, as seconds.

A limit of its own (RETRY's wait, TOKENS' pause and ADAPTIVE all read it), so it sits with the
limits and every kind of call that speaks HTTP uses it from here."""
from __future__ import annotations

import datetime as dt
import email.utils


def retry_after_s(value: str | None) -> float | None:
    """Seconds a Retry-After header asks to wait: delta-seconds or an HTTP date (None if absent or bad)."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone.utc)
    return max(0.0, (when - dt.datetime.now(dt.timezone.utc)).total_seconds())
