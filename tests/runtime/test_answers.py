"""calls/answers.py: ANSWER and PATH find what jmespath finds (the fast walk of a dotted path
included), and a shape they cannot use is the element's error, named by path and column."""
from __future__ import annotations

import jmespath
import pytest

from dslc.runtime import config as C
from dslc.runtime.calls.answers import AnswerShape, compiled
from dslc.runtime.calls.base import BadItem, CallError
from dslc.runtime.schema import results

DOCS = [{"data": {"customer": {"tier": "gold", "scores": {"risk": 0.5}}}}, {"data": "text"}, {"data": None},
        {"data": [{"customer": 1}]}, [1, 2], "plain", None, {"data": {"customer": {"scores": [1]}}}]


@pytest.mark.parametrize("expression", ["data", "data.customer", "data.customer.scores.risk", "data.customer.tier",
                                        "missing.key", "data[0].customer", "data.customer.scores | keys(@)",
                                        "{t: data.customer.tier}"])
def test_the_same_as_jmespath(expression):
    find = compiled(expression)
    for doc in DOCS:
        try:
            expected = jmespath.search(expression, doc)
        except jmespath.exceptions.JMESPathError:
            continue
        assert find(doc) == expected, (expression, doc)


def _shape(answer=None, paths=()):
    config = C.Enrich(name="e", line=3, call=C.HttpCall(url="http://x/{id}", answer=answer),
                      returns=(C.Column("tier", "STRING"), C.Column("risk", "DOUBLE")), key_columns=("id",),
                      paths=paths)
    return AnswerShape(config, results.checker(config.returns))


def test_answer_and_path_make_the_result():
    shape = _shape("data.customer", (("risk", "scores.risk"),))
    assert shape.result(DOCS[0]) == {"tier": "gold", "risk": 0.5}
    assert shape.result({"data": {"customer": []}}) is None          # an empty list: a miss
    assert shape.result({"data": {}}) is None                        # nothing there: a miss


def test_a_string_where_an_object_is_needed_is_the_elements_error():
    shape = _shape("data")
    with pytest.raises(CallError, match="ANSWER 'data' found a string where an object or a list of objects is needed"):
        shape.result({"data": "suspended"})
    with pytest.raises(CallError, match="ANSWER 'data' found a list holding a number at index 0 where objects"):
        shape.result({"data": [1]})


def test_a_type_mismatch_names_the_column_and_its_path():
    shape = _shape("data.customer", (("risk", "scores.risk"),))
    with pytest.raises(CallError, match=r"field 'risk' \(PATH 'scores.risk'\) is declared DOUBLE but got str 'high'"):
        shape.result({"data": {"customer": {"tier": "x", "scores": {"risk": "high"}}}})


def test_batch_answer_must_find_the_per_element_array():
    shape = _shape("result.items", (("risk", "r"),))
    items = shape.batch({"result": {"items": [{"tier": "a", "r": 1.0}, "oops"]}}, 2)
    assert [shape.item(i) for i in items][0] == {"tier": "a", "risk": 1.0}
    assert type(shape.item(items[1])) is BadItem
    with pytest.raises(CallError, match="found 2 items for 3 rows"):
        shape.batch({"result": {"items": [{}, {}]}}, 3)
    with pytest.raises(CallError, match="ANSWER 'result.items' found an object in the batch answer, expected a list of 1 items"):
        shape.batch({"result": {"items": {}}}, 1)
