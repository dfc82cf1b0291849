"""A dead letter keeps what the service answered when the call's text is masked (issue #48 items
1 and 21): with a `${NAME}` secret in the call, the error's text goes through `secrets.scrub`, and
its fields (the model's content, the status) stay, the content masked too."""
from __future__ import annotations

import json
from typing import Any

import pytest
from runtime_support import run_operator as run

from dslc.runtime.config import Column, Enrich, ModelCall, Outcome
from dslc.runtime.secrets import Secrets
from dslc.testing.openai_service import (
    LENGTH,
    REFUSAL_TEXT,
    REFUSE,
    OpenAIService,
    keyword_labeller,
    serve_in_thread,
)

KEY = "sk-the-right-key-0042"
LABELS = keyword_labeller({"category": [("", "other")], "urgency": [("", 2)]})


def keyed(base_url: str, key: str = "${OPENAI_API_KEY}", **kw: Any) -> Enrich:
    call = ModelCall("gpt-test", base_url, "Subject: {subject}", "You label tickets.",
                     headers=(("Authorization", f"Bearer {key}"),))
    return Enrich(name="labelled", line=3, call=call, key_columns=("id",), timeout_s=10.0,
                  returns=(Column("category", "STRING"), Column("urgency", "INT")),
                  on_error=Outcome.DEAD_LETTER, secrets=Secrets({"OPENAI_API_KEY": KEY}), **kw)


@pytest.mark.parametrize("trigger", [REFUSE, LENGTH])
def test_the_dead_letter_of_a_keyed_call_keeps_the_models_answer(trigger: str) -> None:
    with serve_in_thread(OpenAIService(api_key=KEY, labeller=LABELS)) as running:
        op, out = run(keyed(running.base_url), [{"id": "t0", "subject": "hello"},
                                                {"id": "t1", "subject": f"{trigger} please"}])
        assert running.stats["chat_calls"] == 2
    assert [r["id"] for r in out.rows] == ["t0"]
    [letter] = out.dead_letters
    assert letter["key"] == {"id": "t1"} and letter["answer"]          # what the model said
    if trigger == REFUSE:
        assert letter["answer"] == REFUSAL_TEXT
    assert KEY not in repr(letter)


def test_a_secret_the_answer_echoes_is_masked_in_the_dead_letter() -> None:
    from dslc.runtime.calls.base import CallError
    from dslc.runtime.calls.factory import build_call
    from dslc.runtime.core.resolution import DeadLetter, ElementResolver
    from dslc.runtime.metrics import OperatorMetrics

    config = keyed("http://127.0.0.1:9")    # never called: only the resolver's policy is asked
    metrics = OperatorMetrics("labelled")
    resolver = ElementResolver(config, build_call(config, metrics), metrics)
    error = CallError(f"the model refused: it saw {KEY}", status=200, raw=f"I will not repeat {KEY}")
    letter = resolver.policy(Outcome.DEAD_LETTER, "error", str(error), {"id": "t1"}, 1, error)
    assert isinstance(letter, DeadLetter)
    assert letter.letter["answer"] == "I will not repeat ${OPENAI_API_KEY}"
    assert KEY not in repr(letter.letter)



HUGE = keyword_labeller({"category": [("", "other")], "urgency": [("2^32", 2**32), ("1e20", 1e20), ("", 2)]})


@pytest.mark.parametrize("secret", [True, False], ids=["secret key", "literal key"])
@pytest.mark.parametrize("subject", ["2^32", "1e20"])
def test_a_number_out_of_an_int_columns_range_keeps_the_models_answer(secret: bool, subject: str) -> None:
    """#48 item 21: JSON's integer fits the schema, the INT column's range does not; the dead
    letter says so and keeps what the model said, with a `${NAME}` key or a literal one."""
    with serve_in_thread(OpenAIService(api_key=KEY, labeller=HUGE)) as running:
        config = keyed(running.base_url) if secret else keyed(running.base_url, KEY)
        op, out = run(config, [{"id": "t0", "subject": "fine"}, {"id": "t1", "subject": subject}])
        assert running.stats["chat_calls"] == 2
    assert [r["id"] for r in out.rows] == ["t0"]
    [letter] = out.dead_letters
    assert letter["key"] == {"id": "t1"} and "urgency" in letter["error"]
    assert json.loads(letter["answer"])["urgency"] == (2**32 if subject == "2^32" else 1e20)
    assert KEY not in repr(letter)
