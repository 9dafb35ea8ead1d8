"""Every request's params are checked against its method's catalogue entry before a handler
sees them: what a careless or hostile client sends is refused with INVALID_PARAMS, naming the
param, and what is valid comes through as the handler reads it."""

from __future__ import annotations

from typing import Any

import pytest

from roost.protocol import METHODS_BY_NAME, ErrorCode, RpcError


def check(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return METHODS_BY_NAME[method].check([params])


def refusal(method: str, params: Any) -> str:
    with pytest.raises(RpcError) as caught:
        METHODS_BY_NAME[method].check(params)
    assert caught.value.code == ErrorCode.INVALID_PARAMS
    assert caught.value.name == "INVALID_PARAMS"
    return caught.value.message


def test_valid_params_come_through_and_a_nil_is_an_absent_param() -> None:
    assert check("events", {"session": "s-1", "since": 3, "limit": None}) == {"session": "s-1", "since": 3}
    assert check("dispatch", {"task": "t", "think": "high", "time_box": 1.5}) == {
        "task": "t", "think": "high", "time_box": 1.5}
    assert check("dispatch", {"task": "t", "think": 2048})["think"] == 2048


@pytest.mark.parametrize(("params", "says"), [
    ({"session": "s\0x"}, "'session' must not hold a NUL character"),
    ({"session": 7}, "'session' must be str, not int"),
    ({"session": "s", "since": True}, "'since' must be int, not bool"),
    ({"session": "s", "since": "3"}, "'since' must be int, not str"),
    ({"session": "s", "since": 2**53 + 1}, "'since' must be between"),
    ({"since": 1}, "'session' is required"),
    ({"session": None}, "'session' is required"),
    ({"session": "s", "sesion": "s"}, "events has no param 'sesion' (it takes session, since, limit)"),
], ids=repr)
def test_a_param_that_is_wrong_is_named(params: dict[str, Any], says: str) -> None:
    assert says in refusal("events", [params])


@pytest.mark.parametrize(("value", "says"), [
    ("a\0b", "'think' must not hold a NUL character"),
    (float("nan"), "'think' must be int|str, not float"),
    (False, "'think' must be int|str, not bool"),
], ids=repr)
def test_a_param_of_two_types_is_checked_as_each(value: Any, says: str) -> None:
    assert says in refusal("dispatch", [{"task": "t", "think": value}])


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")], ids=repr)
def test_a_number_must_be_finite(value: float) -> None:
    assert "'time_box' must be a finite number" in refusal("dispatch", [{"task": "t", "time_box": value}])


@pytest.mark.parametrize("params", [[{"session": "s"}, {}], ["s"], [["s"]]], ids=repr)
def test_params_are_one_map(params: list[Any]) -> None:
    assert refusal("events", params) == "events takes one map of params"
