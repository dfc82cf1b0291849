"""Mutated and random programs never crash the front end: it answers with a plan or a
CompileError, never anything else."""
from __future__ import annotations

import re

from frontend_support import VALID_PROGRAMS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dslc.compiler.diagnostics import CompileError
from dslc.compiler.pipeline import check_text

SEEDS = [p.read_text(encoding="utf-8") for p in VALID_PROGRAMS]
PATHS = [str(p) for p in VALID_PROGRAMS]      # modules beside them resolve
NOISE = ["SELECT", "FROM", "WHERE", "ENRICH", "MATCH", "AGAINST", "PROCESS", "SINK", "SOURCE",
         "STREAM", "BROADCAST", "PIPELINE", "RETURNS", "WITH", "HTTP", "PYTHON", "ON", "MISS",
         "TIMEOUT", "DEAD LETTER", "OPTIONS", "SCHEMA", "WATERMARK", "KEY", "OP", "AS", "GROUP BY",
         "'", '"', "`", ";", "--", "(", ")", ",", "=", "<", ">", ":", "\\", "{", "}", "{x}", "0",
         "10s", "1.5", "-", "\n", "é", "§", "\u200b", "😀", "\x00", "'a' 'b'", "`a``b`", "NULL"]


def _tokens(text: str) -> list[str]:
    return re.findall(r"\s+|\w+|[^\w\s]", text)


def _check(text: str, path: str) -> None:
    try:
        check_text(text, path)
    except CompileError as exc:
        assert exc.diagnostics
        exc.render()                                  # rendering must not crash either
        for d in exc.diagnostics:
            assert 0 <= d.span.start <= d.span.end


@st.composite
def mutated(draw):
    index = draw(st.integers(0, len(SEEDS) - 1))
    text = SEEDS[index]
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["delete", "insert", "duplicate", "swap", "cut", "noise"]))
        n = len(text)
        i = draw(st.integers(0, max(n - 1, 0)))
        j = min(n, i + draw(st.integers(1, 40)))
        if kind == "delete":
            text = text[:i] + text[j:]
        elif kind == "insert":
            text = text[:i] + draw(st.text(max_size=5)) + text[i:]
        elif kind == "duplicate":
            text = text[:j] + text[i:j] + text[j:]
        elif kind == "cut":
            text = text[:i]
        elif kind == "noise":
            text = text[:i] + " " + draw(st.sampled_from(NOISE)) + " " + text[i:]
        else:
            tokens = _tokens(text)
            if len(tokens) > 1:
                a = draw(st.integers(0, len(tokens) - 1))
                b = draw(st.integers(0, len(tokens) - 1))
                tokens[a], tokens[b] = tokens[b], tokens[a]
                text = "".join(tokens)
    return text, PATHS[index]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_mutated_programs_never_crash(case):
    _check(*case)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(NOISE), st.text(max_size=8)), max_size=30).map(" ".join))
def test_random_token_soup_never_crashes(text):
    _check(text, PATHS[0])


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=200))
def test_random_text_never_crashes(text):
    _check(text, PATHS[0])
