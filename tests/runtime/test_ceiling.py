"""The dead-letter ceiling (#41, item 3): which figures are over it, and what the run says."""
from __future__ import annotations

import pytest

from dslc.runtime.config import Ceiling, Column, Enrich, HttpCall, Outcome
from dslc.runtime.spark import ceiling
from dslc.runtime.spark.outcome import RunStop


def enrich(name: str = "priced", **kw) -> Enrich:
    kw.setdefault("on_error", Outcome.DEAD_LETTER)
    return Enrich(name=name, line=3, call=HttpCall("http://127.0.0.1:1/p/{sku}"), returns=(Column("price", "INT"),),
                  key_columns=("sku",), **kw)


def figures(elements: int, letters: int = 0, errors: int | None = None, **more) -> dict:
    return {"elements_in": elements, "dead_letters": letters, "errors": letters if errors is None else errors,
            "error_messages": {"answer: CallError: answer field 'price' is declared INT but got float 2.5": letters},
            **more}


@pytest.mark.parametrize(("limit", "letters", "over"), [
    (None, 5, False), (None, 6, True),                     # the default: 50% of the elements
    (Ceiling(percent=100.0), 10, False), (Ceiling(percent=0.0), 1, True), (Ceiling(percent=0.0), 0, False),
    (Ceiling(rows=3), 3, False), (Ceiling(rows=3), 4, True),
])
def test_an_operator_is_over_its_ceiling(limit, letters, over):
    found = ceiling.breaches({"priced": enrich(ceiling=limit)}, {"priced": figures(10, letters)},
                             {"target/dlq/priced": ("priced",)})
    assert bool(found) is over


def test_the_message_names_the_operator_its_path_the_ceiling_and_the_top_errors():
    [line] = ceiling.breaches({"priced": enrich()}, {"priced": figures(10, 6)}, {"target/dlq/priced": ("priced",)})
    assert line.startswith("ENRICH 'priced' (line 3): 6 of 10 elements (60%) were dead-lettered to "
                           "target/dlq/priced, above its ceiling (UP TO 50%, the default); everything else was "
                           "written. Top errors: answer: CallError: answer field 'price' is declared INT but got "
                           "float 2.5 (6).")
    with pytest.raises(RunStop) as stop:
        ceiling.check({"priced": enrich()}, {"priced": figures(10, 6)}, {})
    assert stop.value.code == 5


def test_every_element_failed_without_dead_letters_is_over_the_default_ceiling():
    null = enrich(on_error=Outcome.NULL)
    assert ceiling.breaches({"priced": null}, {"priced": figures(4, 0, errors=4)}, {})
    assert not ceiling.breaches({"priced": null}, {"priced": figures(4, 0, errors=3)}, {})
    # a timeout counts as a failure; an operator that saw nothing failed nothing
    assert ceiling.breaches({"priced": null}, {"priced": figures(4, 0, errors=1, timeouts=3)}, {})
    assert not ceiling.breaches({"priced": null}, {"priced": figures(0, 0, errors=0)}, {})
