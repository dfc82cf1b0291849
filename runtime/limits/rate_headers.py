"""What a service's rate-limit headers say is left, in whichever of the common spellings it uses.

Gateways name the same figures differently:

- OpenAI: `x-ratelimit-remaining-requests|tokens`, `x-ratelimit-limit-*`, `x-ratelimit-reset-*`
  (a duration: `20ms`, `6m0s`);
- LiteLLM names them after the scope whose limit applies once a key, a team or a model has its
  own (`x-ratelimit-api_key-remaining-requests`, `...-model_per_key-...`, `...-team-...`), and a
  proxy may pass the model server's own on as `llm_provider-x-ratelimit-*`;
- the IETF draft and many APIs: `ratelimit-remaining` / `x-ratelimit-remaining`, with
  `*-reset` in seconds from now, or (GitHub's) as a Unix time.

`read(headers)` gives, for requests and tokens, the lowest remaining count any scope states (the
tightest limit binds) and that scope's reset in seconds from now (None when not said).
"""
from __future__ import annotations

import re
import time
from collections.abc import Mapping
from dataclasses import dataclass

# [llm_provider-]x-ratelimit-[SCOPE-](remaining|limit|reset)-(requests|tokens)
_KINDED = re.compile(r"^(?:llm_provider-)?x-ratelimit-(?:(?P<scope>[a-z0-9_]+)-)?"
                     r"(?P<what>remaining|limit|reset)-(?P<kind>requests|tokens)$")
# [x-]ratelimit-(remaining|limit|reset): requests
_BARE = re.compile(r"^(?:x-)?ratelimit-(?P<what>remaining|limit|reset)$")
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
#: A reset value above this many seconds is a Unix time, not a delay.
_EPOCH = 1e9


@dataclass(frozen=True)
class Left:
    """What one kind of limit has left: `remaining` requests or tokens, until `reset_s` from now."""

    remaining: float
    reset_s: float | None


def read(headers: Mapping[str, str]) -> dict[str, Left]:
    """The lowest `remaining` the headers state for "requests" and "tokens", with its reset."""
    found: dict[tuple[str, str], dict[str, str]] = {}     # (kind, scope) -> {what: value}
    for name, value in headers.items():
        name = name.lower()
        match = _KINDED.match(name)
        if match is not None:
            scope, what, kind = match.group("scope") or "", match.group("what"), match.group("kind")
        else:
            match = _BARE.match(name)
            if match is None:
                continue
            scope, what, kind = "", match.group("what"), "requests"
        found.setdefault((kind, scope), {})[what] = value
    left: dict[str, Left] = {}
    for (kind, _scope), figures in sorted(found.items()):
        remaining = _number(figures.get("remaining"))
        if remaining is None:
            continue
        reset = _reset(figures.get("reset"))
        if reset is None:       # a scope without its own reset: the kind's unscoped one
            reset = _reset(found.get((kind, ""), {}).get("reset"))
        if kind not in left or remaining < left[kind].remaining:
            left[kind] = Left(remaining, reset)
    return left


def reset_seconds(text: str | None) -> float | None:
    """An `x-ratelimit-reset-*` value in seconds: `20ms`, `1.5s`, `6m0s`, `1h2m` (None if absent)."""
    if not text:
        return None
    found = _DURATION.findall(text)
    if not found:
        try:
            return float(text)
        except ValueError:
            return None
    scale = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    return sum(float(n) * scale[unit] for n, unit in found)


def _number(text: str | None) -> float | None:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


def _reset(text: str | None) -> float | None:
    """A reset in seconds from now: a duration (`1.5s`, `6m0s`), seconds, or a Unix time."""
    seconds = reset_seconds(text)
    if seconds is not None and seconds > _EPOCH:
        seconds = seconds - time.time()
    return None if seconds is None else max(0.0, seconds)
