"""A provider batch's line is keyed as the online call keys its request: the answer store is
shared by online and TIER BATCH runs, so `keyed_request` (the messages filled once for the key
and the body, runtime/batches/runner.py) must make `request_key`'s bytes and `request`'s body."""
from __future__ import annotations

import pytest

from dslc.runtime import config as C
from dslc.runtime.calls.model import ModelEnrichCall

ROWS = [{"subject": "invoice wrong", "body": "ticket 1: the page"},
        {"subject": "Überweisung «falsch»", "body": 'quote " and \\ and \n newline', "lang": "de"},
        {"subject": "id", "body": 42, "lang": True},
        {"subject": "emoji 🎫", "body": "", "lang": "fr"}]


def _call(system: str | None) -> ModelEnrichCall:
    model = C.ModelCall(model="gpt-test", base_url="http://127.0.0.1:9/v1", prompt="Subject: {subject}\nBody: {body}",
                        system=system)
    return ModelEnrichCall(C.Enrich(name="labelled", line=3, call=model, key_columns=(),
                                    returns=(C.Column("category", "STRING"), C.Column("urgency", "INT"))))


@pytest.mark.parametrize("system", [None, "You label tickets {{not a placeholder}}.", "Answer in {lang}."])
def test_a_keyed_request_has_the_online_key_and_body(system):
    call = _call(system)
    for row in ROWS:
        if system == "Answer in {lang}." and "lang" not in row:
            continue
        key, make = call.keyed_request(row)
        assert key.encode() == call.request_key(row).encode()
        assert make() == call.request(row)


def test_a_null_placeholder_has_no_keyed_request_as_it_has_no_key():
    call = _call("Answer in {lang}.")
    for row in ({"subject": None, "body": "x", "lang": "de"}, {"subject": "s", "body": "x"}):
        assert call.request_key(row) is None and call.keyed_request(row) is None
