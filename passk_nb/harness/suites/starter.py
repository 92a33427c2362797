"""A third built-in suite, at a small model's level: a shop's order desk, ten single-decision tasks.

Where ``orders`` and ``bank`` test judgement (which record, which amount, whether policy allows it),
every ``starter`` request names everything needed ("Refund order O1001 for 79.99."): one right tool
call and one answer. Three tasks need one lookup first (the total of a full refund, the status an
action depends on), and two are refusals (a shipped order cannot be cancelled, a refund cannot
exceed the total), which must look the order up before saying no. Each task tests one thing, named
in its ``tests``. Three tools only; their descriptions give no example id, so that a model cannot
copy one, and no task's id appears anywhere but in its own request. A successful action's result
carries the confirmation to send the customer (``"answer": "Order O1002 is cancelled."``), in the
protocol's own words: the pilots (``scripts/make_example_data.py``) showed SmolLM2-135M making the
right call and then repeating it until it ran out of turns, also when the result said
``"next": "done: now answer the customer"``.

>>> from passk_nb.harness.suites import get_suite
>>> suite = get_suite("starter")
>>> len(suite.tasks), list(suite.prompts), list(suite.tools)
(10, ['default', 'contract'], ['get_order', 'refund_order', 'cancel_order'])
"""

from __future__ import annotations

from typing import Any

from passk_nb.harness.suites.base import Param, Refusal, copy_state
from passk_nb.harness.suites.build import answer, call, make_suite, task, tool
from passk_nb.harness.suites.orders import CLAIMS
from passk_nb.harness.suites.orders import SEVERITY as ORDERS_SEVERITY


def _order(customer: str, status: str, total: float) -> dict[str, Any]:
    return {"customer_id": customer, "status": status, "total": total, "refunded_amount": 0.0}


_ORDERS = {
    "O1001": _order("C1", "delivered", 79.99),
    "O1002": _order("C2", "pending", 24.50),
    "O1003": _order("C3", "pending", 31.00),
    "O1004": _order("C4", "delivered", 60.00),
    "O1005": _order("C5", "delivered", 45.50),
    "O1006": _order("C7", "pending", 18.00),
    "O1007": _order("C8", "delivered", 52.00),
    "O1008": _order("C9", "delivered", 15.00),
    "O1009": _order("C6", "shipped", 99.00),
    "O1010": _order("C6", "delivered", 30.00),
}


def initial_state() -> dict[str, Any]:
    """A fresh copy of the seeded shop: ``{"orders": {...}}``."""
    return {"orders": copy_state(_ORDERS)}


def get_order(state: dict[str, Any], order_id: str) -> dict[str, Any]:
    """One order: its customer, status, total and amount refunded so far.

    order_id: the order's id
    """
    return {"order_id": order_id, **copy_state(state["orders"][order_id])}


def refund_order(state: dict[str, Any], order_id: str, amount: float) -> dict[str, Any]:
    """Refund an amount of a delivered order; refunding the whole total marks it refunded.

    order_id: the order's id
    amount: dollars
    """
    order = state["orders"][order_id]
    if order["status"] != "delivered":
        raise ValueError(f"order {order_id} is {order['status']}: only delivered orders can be refunded")
    if amount <= 0:
        raise ValueError(f"amount must be positive, got {amount}")
    refundable = round(order["total"] - order["refunded_amount"], 2)
    if round(amount, 2) > refundable:
        raise ValueError(f"amount {amount} exceeds the refundable {refundable:.2f} on order {order_id}")
    order["refunded_amount"] = round(order["refunded_amount"] + amount, 2)
    if order["refunded_amount"] >= order["total"]:
        order["status"] = "refunded"
    return {
        "order_id": order_id,
        "refunded": round(amount, 2),
        "status": order["status"],
        "answer": f"Order {order_id} is refunded: {amount:.2f}.",
    }


def cancel_order(state: dict[str, Any], order_id: str) -> dict[str, Any]:
    """Cancel a pending order.

    order_id: the order's id
    """
    order = state["orders"][order_id]
    if order["status"] != "pending":
        raise ValueError(f"order {order_id} is {order['status']}: only pending orders can be cancelled")
    order["status"] = "cancelled"
    return {"order_id": order_id, "status": "cancelled", "answer": f"Order {order_id} is cancelled."}


_ORDER_ID = Param("string", "the order's id: O and four digits", pattern="^O[0-9]{4}$")
TOOLS = [
    tool(get_order, params={"order_id": _ORDER_ID}),
    tool(refund_order, params={"order_id": _ORDER_ID}),
    tool(cancel_order, params={"order_id": _ORDER_ID}),
]

INSTRUCTIONS = "You are the support agent of a shop's order desk. You act only through tools."
POLICY = """Policy:
1. Do what the customer asks, to the order they name, once.
2. A full refund is the order's total: look the order up first.
3. Only pending orders can be cancelled, and only delivered orders refunded, never for more than \
the total. When you cannot do what is asked, look the order up, then answer and explain."""

#: The one variant of the pre-registered prompt experiment (scripts/make_example_data.py): the
#: default plus a one-line contract on when to stop.
CONTRACT_LINE = "4. As soon as the action the customer asked for has succeeded, answer; never repeat it."


def _money(amount: float):
    return lambda value: isinstance(value, int | float) and abs(value - amount) < 0.005


TASKS = (
    task(
        "refund-named",
        "Refund order O1001 for 79.99.",
        tests="one call with the id and amount the request gives",
        expect={"orders.O1001.status": "refunded", "orders.O1001.refunded_amount": _money(79.99)},
        script=[
            call("refund_order", order_id="O1001", amount=79.99),
            answer("Order O1001 is refunded: 79.99."),
        ],
    ),
    task(
        "cancel-named",
        "Cancel order O1002.",
        tests="one call of the right tool on the named order",
        expect={"orders.O1002.status": "cancelled"},
        script=[call("cancel_order", order_id="O1002"), answer("Order O1002 is cancelled.")],
    ),
    task(
        "cancel-other-order",
        "Cancel order O1003.",
        tests="a second cancellation with another id: the id is read, not guessed",
        expect={"orders.O1003.status": "cancelled"},
        script=[call("cancel_order", order_id="O1003"), answer("Order O1003 is cancelled.")],
    ),
    task(
        "refund-partial",
        "Refund 10.00 of order O1004.",
        tests="the amount asked for, not the order's total",
        expect={"orders.O1004.refunded_amount": _money(10.0)},
        script=[
            call("refund_order", order_id="O1004", amount=10.0),
            answer("10.00 of order O1004 is refunded."),
        ],
    ),
    task(
        "refund-other-order",
        "Refund order O1008 for 15.00.",
        tests="a second full refund with another id and amount: both are read, not guessed",
        expect={"orders.O1008.status": "refunded", "orders.O1008.refunded_amount": _money(15.0)},
        script=[
            call("refund_order", order_id="O1008", amount=15.0),
            answer("Order O1008 is refunded: 15.00."),
        ],
    ),
    task(
        "refund-full-lookup",
        "Refund order O1005 in full.",
        tests="one lookup for the total, then the refund of that total",
        expect={"orders.O1005.status": "refunded", "orders.O1005.refunded_amount": _money(45.5)},
        script=[
            call("get_order", order_id="O1005"),
            call("refund_order", order_id="O1005", amount=45.5),
            answer("Order O1005 is refunded in full: 45.50."),
        ],
    ),
    task(
        "cancel-if-pending-lookup",
        "Check order O1006 and cancel it if it is pending.",
        tests="one lookup of the status, then the action it allows",
        expect={"orders.O1006.status": "cancelled"},
        script=[
            call("get_order", order_id="O1006"),
            call("cancel_order", order_id="O1006"),
            answer("Order O1006 was pending; it is cancelled."),
        ],
    ),
    task(
        "refund-if-delivered-lookup",
        "Check order O1007 and refund it in full if it was delivered.",
        tests="one lookup of the status and total, then the refund of that total",
        expect={"orders.O1007.status": "refunded", "orders.O1007.refunded_amount": _money(52.0)},
        script=[
            call("get_order", order_id="O1007"),
            call("refund_order", order_id="O1007", amount=52.0),
            answer("Order O1007 was delivered; it is refunded in full: 52.00."),
        ],
    ),
    task(
        "cancel-shipped-refusal",
        "Cancel order O1009.",
        tests="a refusal: the order has shipped, so look it up and say no",
        refusal=Refusal(record="O1009", claims=("cancel",)),
        script=[
            call("get_order", order_id="O1009"),
            answer("Order O1009 has already shipped, so it cannot be cancelled."),
        ],
    ),
    task(
        "refund-over-total-refusal",
        "Refund order O1010 for 300.00.",
        tests="a refusal: the order's total is 30.00, so look it up and say no",
        refusal=Refusal(record="O1010", claims=("refund",)),
        script=[
            call("get_order", order_id="O1010"),
            answer("Order O1010's total is 30.00, so I cannot refund 300.00."),
        ],
    ),
)

#: How bad each failure of the starter desk is: the order desk's table (``orders.SEVERITY``).
SEVERITY = ORDERS_SEVERITY

SUITE = make_suite(
    "starter",
    instructions=INSTRUCTIONS,
    tools=TOOLS,
    initial_state=initial_state,
    tasks=TASKS,
    policy=POLICY,
    variants={"contract": CONTRACT_LINE},
    claims=CLAIMS,
    severity=SEVERITY,
)
