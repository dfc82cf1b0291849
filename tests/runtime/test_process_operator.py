"""PROCESS operator: user functions and classes, broadcast arguments, RETURNS shape, failures."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from dslc.runtime import config as C
from dslc.runtime.broadcast.state import BroadcastState, BroadcastStateError
from dslc.runtime.core.chain import OperatorChain
from dslc.runtime.core.operator import ElementFailure, Watermark
from dslc.runtime.core.process_operator import ProcessOperator

USER_CODE = '''
events = []

def score(row, rules):
    for rule in rules.values():
        if row["country"] == rule["country"] and row["amount"] > rule["max_amount"]:
            yield {"order_id": row["order_id"], "score": row["amount"] / rule["max_amount"], "extra": 1}

def one(row):
    return {"order_id": row["order_id"]}

def nothing(row):
    return None

def reused(row):
    out = {"score": 0.0, "order_id": row["order_id"]}   # exactly the RETURNS keys, in another order
    for score in (1.0, 2.0):
        out["score"] = score
        yield out                                       # the same dict, changed after each yield

def wrong_score(row):
    return {"order_id": row["order_id"], "score": "high"}

def boom(row):
    raise ValueError("bad row")

def not_rows(row):
    return "text"

def mutate(row, rules):
    rules["new"] = {}

class Scorer:
    def open(self):
        events.append("open")
    def close(self):
        events.append("close")
    def __call__(self, row):
        if row.get("fail"):
            raise KeyError("fail")
        return [{"order_id": row["order_id"], "score": 1.0}, {"order_id": row["order_id"], "score": 2.0}]
'''

RETURNS = (C.Column("order_id", "STRING"), C.Column("score", "DOUBLE"))


@pytest.fixture()
def module(tmp_path: Path) -> tuple[str, ...]:
    (tmp_path / "proc_user_fns.py").write_text(textwrap.dedent(USER_CODE))
    return (str(tmp_path),)


def process(search_path: tuple[str, ...], name: str, states: tuple[str, ...] = ()) -> C.Process:
    return C.Process(
        name="scored", line=7, call=C.PythonCall(f"proc_user_fns:{name}", search_path),
        returns=RETURNS, states=states, key_columns=("order_id",),
    )


def rules_view():
    state = BroadcastState(["rules"])
    state.apply_changelog("rules", [
        {"rule_id": "r1", "op": "upsert", "country": "NL", "max_amount": 100.0},
        {"rule_id": "r2", "op": "upsert", "country": "DE", "max_amount": 50.0},
    ], key="rule_id", op="op")
    return state.read_only("rules")


def test_function_with_broadcast_state_returns_exactly_the_returns_columns(module) -> None:
    operator = ProcessOperator(process(module, "score", ("rules",)), {"rules": rules_view()})
    result = OperatorChain([operator]).run_all([
        {"order_id": "o1", "country": "NL", "amount": 150.0},
        {"order_id": "o2", "country": "NL", "amount": 10.0},
        {"order_id": "o3", "country": "DE", "amount": 100.0},
    ])
    assert result.rows == [{"order_id": "o1", "score": 1.5}, {"order_id": "o3", "score": 2.0}]
    assert operator.metrics() == {"elements_in": 3, "elements_out": 2, "errors": 0}


@pytest.mark.parametrize("name, expected", [
    ("one", [{"order_id": "o1", "score": None}]),
    ("nothing", []),
])
def test_single_dict_and_none_results(module, name, expected) -> None:
    operator = ProcessOperator(process(module, name))
    assert OperatorChain([operator]).run_all([{"order_id": "o1"}]).rows == expected


def test_a_dict_the_function_reuses_is_copied_for_each_row(module) -> None:
    operator = ProcessOperator(process(module, "reused"))
    rows = OperatorChain([operator]).run_all([{"order_id": "o1"}]).rows
    assert rows == [{"order_id": "o1", "score": 1.0}, {"order_id": "o1", "score": 2.0}]


def test_class_lifecycle_and_call(module) -> None:
    operator = ProcessOperator(process(module, "Scorer"))
    result = OperatorChain([operator]).run_all([{"order_id": "o1"}])
    assert result.rows == [{"order_id": "o1", "score": 1.0}, {"order_id": "o1", "score": 2.0}]
    import proc_user_fns  # the module the operator loaded

    assert proc_user_fns.events == ["open", "close"]


def test_class_is_closed_after_a_failure(module) -> None:
    operator = ProcessOperator(process(module, "Scorer"))
    with pytest.raises(ElementFailure):
        OperatorChain([operator]).run_all([{"order_id": "o1", "fail": True}])
    import proc_user_fns

    assert proc_user_fns.events[-2:] == ["open", "close"]


def test_user_exception_becomes_element_failure_with_key_and_line(module) -> None:
    operator = ProcessOperator(process(module, "boom"))
    with pytest.raises(ElementFailure) as info:
        OperatorChain([operator]).run_all([{"order_id": "o9", "amount": 1}])
    failure = info.value
    assert (failure.operator, failure.line, failure.key) == ("scored", 7, {"order_id": "o9"})
    assert isinstance(failure.cause, ValueError)
    assert "order_id='o9'" in str(failure) and "line 7" in str(failure)
    assert operator.metrics()["errors"] == 1


@pytest.mark.parametrize("upstream", ["one", "score"], ids=["one-dict", "generator"])
def test_a_failure_downstream_is_the_downstream_operators_not_this_ones(module, upstream) -> None:
    states = ("rules",) if upstream == "score" else ()
    first = ProcessOperator(process(module, upstream, states), {"rules": rules_view()} if states else None)
    second = ProcessOperator(C.Process(name="boomed", line=9, call=C.PythonCall("proc_user_fns:boom", module),
                                       returns=RETURNS, key_columns=("order_id",)))
    with pytest.raises(ElementFailure) as info:
        OperatorChain([first, second]).run_all([{"order_id": "o1", "country": "NL", "amount": 150.0}])
    assert (info.value.operator, info.value.line) == ("boomed", 9)
    assert isinstance(info.value.cause, ValueError)
    assert first.metrics() == {"elements_in": 1, "elements_out": 1, "errors": 0}
    assert second.metrics()["errors"] == 1


def test_wrong_result_type_is_an_element_failure(module) -> None:
    with pytest.raises(ElementFailure, match="must return a dict"):
        OperatorChain([ProcessOperator(process(module, "not_rows"))]).run_all([{"order_id": "o1"}])


def test_writing_the_broadcast_state_fails_clearly(module) -> None:
    operator = ProcessOperator(process(module, "mutate", ("rules",)), {"rules": rules_view()})
    with pytest.raises(ElementFailure) as info:
        OperatorChain([operator]).run_all([{"order_id": "o1"}])
    assert isinstance(info.value.cause, BroadcastStateError)
    assert "read-only on the data side" in str(info.value)


def test_missing_state_is_rejected_on_construction(module) -> None:
    with pytest.raises(ValueError, match="'rules'"):
        ProcessOperator(process(module, "score", ("rules",)), {})


def test_watermarks_pass_through(module) -> None:
    chain = OperatorChain([ProcessOperator(process(module, "one"))])
    chain.run_all([Watermark(3.0), {"order_id": "o1"}])
    assert chain.collector.watermark == Watermark(3.0)



def test_a_result_value_of_the_wrong_type_fails_its_element_naming_the_column(module) -> None:
    with pytest.raises(ElementFailure) as info:
        OperatorChain([ProcessOperator(process(module, "wrong_score"))]).run_all([{"order_id": "o7"}])
    message = str(info.value)
    assert "order_id='o7'" in message and "line 7" in message
    assert "field 'score' is declared DOUBLE but got str 'high'" in message
