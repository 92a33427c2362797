"""The order desk: seeded state, tools that validate and never raise, checks on the final state."""

import json

import pytest

from passk_nb.harness.suites import get_suite
from passk_nb.harness.suites.base import diff_states
from passk_nb.harness.suites.orders import TOOLS

SUITE = get_suite("orders")


def test_task_ids_are_the_public_interface():
    assert SUITE.task_ids == [
        "refund-delivered",
        "cancel-pending-lookup",
        "refund-damaged-shipped",
        "address-change-pending",
        "cancel-shipped-refusal",
    ]


def test_each_environment_is_a_fresh_copy():
    a, b = SUITE.make_env(), SUITE.make_env()
    assert "ok" in a.try_call("cancel_order", {"order_id": "O1003"})
    assert a.snapshot()["orders"]["O1003"]["status"] == "cancelled"
    assert b.snapshot()["orders"]["O1003"]["status"] == "pending"
    assert SUITE.make_env().snapshot()["orders"]["O1003"]["status"] == "pending"


@pytest.mark.parametrize(
    "tool, args, fragment",
    [
        ("get_order", {"order_id": "O9999"}, "no order with id 'O9999'"),
        ("get_order", {"order_id": 1001}, "must be a string, got number"),
        ("get_order", {}, "missing ['order_id']"),
        ("get_order", {"order_id": "O1001", "verbose": True}, "unexpected ['verbose']"),
        ("list_orders", {"customer_id": "C999"}, "no customer"),
        ("refund_order", {"order_id": "O1001", "amount": "79.99"}, "must be a number, got string"),
        ("refund_order", {"order_id": "O1001", "amount": True}, "must be a number, got boolean"),
        ("refund_order", {"order_id": "O1001", "amount": -5}, "must be positive"),
        ("refund_order", {"order_id": "O1001", "amount": 0}, "must be positive"),
        ("refund_order", {"order_id": "O1001", "amount": 80.00}, "exceeds the refundable 79.99"),
        ("refund_order", {"order_id": "O1001", "amount": float("inf")}, "finite"),
        ("refund_order", {"order_id": "O1003", "amount": 10}, "only delivered or shipped"),
        ("cancel_order", {"order_id": "O1007"}, "only pending orders can be cancelled"),
        ("cancel_order", {"order_id": "O1001"}, "only pending orders can be cancelled"),
        ("change_address", {"order_id": "O1007", "address": "1 A St"}, "only pending orders"),
        ("change_address", {"order_id": "O1006", "address": "  "}, "must not be empty"),
        ("__class__", {}, "unknown tool '__class__'"),
        ("_state", {}, "unknown tool"),
        ("snapshot", {}, "unknown tool"),
    ],
)
def test_bad_calls_return_an_error_and_change_nothing(tool, args, fragment):
    env = SUITE.make_env()
    before = env.snapshot()
    result = json.loads(env.call(tool, args))
    assert fragment in result["error"]
    assert env.snapshot() == before


def test_partial_then_full_refund():
    env = SUITE.make_env()
    assert env.try_call("refund_order", {"order_id": "O1001", "amount": 20})["ok"]["status"] == "delivered"
    assert env.try_call("refund_order", {"order_id": "O1001", "amount": 59.99})["ok"]["status"] == "refunded"
    assert env.snapshot()["orders"]["O1001"]["refunded_amount"] == 79.99
    assert "error" in env.try_call("refund_order", {"order_id": "O1001", "amount": 1})


def test_list_orders_only_shows_that_customer():
    orders = SUITE.make_env().try_call("list_orders", {"customer_id": "C002"})["ok"]
    assert [o["order_id"] for o in orders] == ["O1003", "O1004"]


def test_tools_in_prompt_match_declared_tools():
    for name, tool in TOOLS.items():
        assert tool.signature() in SUITE.prompts["default"], name
    assert SUITE.prompts["strict"].startswith(SUITE.prompts["default"])
    assert len(SUITE.prompts["strict"].splitlines()) == len(SUITE.prompts["default"].splitlines()) + 2


@pytest.mark.parametrize("task", SUITE.tasks, ids=lambda t: t.id)
def test_known_good_script_satisfies_the_check(task):
    env = SUITE.make_env()
    before = env.snapshot()
    for step in task.script[:-1]:
        assert "ok" in env.try_call(step["tool"], step["args"])
    assert "answer" in task.script[-1]
    assert task.check(before, env.snapshot()).outcome == "pass"


def test_checks_catch_wrong_and_extra_changes():
    task = SUITE.task("refund-delivered")
    env = SUITE.make_env()
    before = env.snapshot()
    env.try_call("refund_order", {"order_id": "O1001", "amount": 79.99})
    env.try_call("cancel_order", {"order_id": "O1002"})
    verdict = task.check(before, env.snapshot())
    assert verdict.outcome == "unrequested_change"
    assert "orders.O1002.status" in verdict.reason
    assert task.check(before, before).outcome == "wrong_state"


def test_address_check_tolerates_punctuation_and_case_only():
    task = SUITE.task("address-change-pending")
    for address, outcome in [
        ("230 lake ave austin tx 78703.", "pass"),
        ("230 Lake Ave, Austin, TX 78704", "wrong_state"),
    ]:
        env = SUITE.make_env()
        before = env.snapshot()
        env.try_call("change_address", {"order_id": "O1006", "address": address})
        assert task.check(before, env.snapshot()).outcome == outcome


def test_diff_states_reports_added_and_removed_paths():
    diff = diff_states({"a": {"x": 1}}, {"a": {"x": 1, "y": 2}})
    assert diff == [{"path": "a.y", "before": None, "after": 2}]


def _diff_by_flattening(before, after):
    """diff_states as specified: flatten both states to leaf paths, keep the paths that differ."""

    def flatten(value, prefix, out):
        if isinstance(value, dict) and value:
            for key, sub in value.items():
                flatten(sub, f"{prefix}.{key}" if prefix else str(key), out)
        else:
            out[prefix] = value
        return out

    flat_before, flat_after = flatten(before, "", {}), flatten(after, "", {})
    return [
        {"path": p, "before": flat_before.get(p), "after": flat_after.get(p)}
        for p in sorted(set(flat_before) | set(flat_after))
        if flat_before.get(p) != flat_after.get(p)
    ]


def test_diff_states_skipping_equal_subtrees_matches_flattening_everything():
    import random

    from passk_nb.harness.suites.base import copy_state

    rng = random.Random(7)
    leaves = [None, 0, 1, 1.0, 2.5, True, False, "", "x", "pending", [], [1, 2], {}]

    def state(depth):
        if depth == 0 or rng.random() < 0.25:
            return copy_state(rng.choice(leaves))
        return {rng.choice("abcde"): state(depth - 1) for _ in range(rng.randint(0, 4))}

    def mutate(value, depth=0):
        if not isinstance(value, dict) or not value or rng.random() < 0.2:
            return state(2) if rng.random() < 0.5 else copy_state(rng.choice(leaves))
        key = rng.choice(list(value))
        choice = rng.random()
        if choice < 0.15:
            del value[key]
        elif choice < 0.3:
            value[rng.choice("vwxyz")] = state(2)
        else:
            value[key] = mutate(value[key], depth + 1)
        return value

    changed = 0
    for _ in range(3000):
        before = {"customers": state(3), "orders": state(4)}
        after = copy_state(before)
        for _ in range(rng.randint(0, 3)):
            after = mutate(after)
        if not isinstance(after, dict):
            after = {"orders": after}
        expected = _diff_by_flattening(before, after)
        assert diff_states(before, after) == expected, (before, after)
        changed += bool(expected)
    assert changed > 1500  # the states did differ, in most cases
