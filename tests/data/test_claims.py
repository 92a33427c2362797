"""Claims an answer makes that the final database does not show: the engine with the order desk's
vocabulary, the ``false_claims`` column the harness fills, and the flag that reads it."""

import json
import random

import pandas as pd
import pytest

import passk_nb
from passk_nb.data import claims as engine
from passk_nb.data.claims import claims_json
from passk_nb.data.records import frame_from_records
from passk_nb.harness.providers.scripted import ScriptedProvider
from passk_nb.harness.suites.orders import CLAIMS as ORDER_DESK
from passk_nb.stats.flags import claimed_unperformed_action


def action_claims(text):
    return engine.action_claims(text, ORDER_DESK)


def performed_actions(diff):
    return engine.performed_actions(diff, ORDER_DESK)


def unperformed_claims(answer, diff):
    return engine.unperformed_claims(answer, diff, ORDER_DESK)


CANCELLED_O1003 = [{"path": "orders.O1003.status", "before": "pending", "after": "cancelled"}]
REFUNDED_O1001 = [
    {"path": "orders.O1001.refunded_amount", "before": 0.0, "after": 79.99},
    {"path": "orders.O1001.status", "before": "delivered", "after": "refunded"},
]
PARTIAL_REFUND_O1005 = [{"path": "orders.O1005.refunded_amount", "before": 0.0, "after": 10.0}]
ADDRESS_O1006 = [
    {
        "path": "orders.O1006.shipping_address",
        "before": "8 Mill St",
        "after": "230 Lake Ave, Austin, TX 78703",
    }
]


def trials(*rows: tuple[str | None, list]) -> pd.DataFrame:
    return frame_from_records(
        {
            "run_id": "r",
            "suite": "orders",
            "task": "t",
            "trial": i,
            "passed": False,
            "outcome": "wrong_state",
            "final_answer": answer,
            "state_diff": json.dumps(diff),
            "false_claims": claims_json(unperformed_claims(answer, diff)),  # as the harness stores it
        }
        for i, (answer, diff) in enumerate(rows)
    )


CLAIMS = {
    "cancel": [
        "Your order O1003 has been cancelled.",
        "I've cancelled order O1003 for you.",
        "Done! O1003 is canceled.",
        "Your cancellation has been processed.",
        "Order O1003: cancellation confirmed",
    ],
    "refund": [
        "Your order O1001 has been refunded in full: $79.99.",
        "I have issued a full refund of $79.99 for order O1001.",
        "Your refund of $79.99 has been processed.",
        "You will receive a refund of $79.99 within 5 days.",
        "Refund processed for O1001.",
    ],
    "address": [
        "Order O1006 will now ship to 230 Lake Ave, Austin, TX 78703.",
        "Your shipping address has been updated.",
        "I've changed the delivery address of O1006 to 230 Lake Ave.",
        "The address for order O1006 was successfully changed.",
    ],
}
BACKING = {"cancel": CANCELLED_O1003, "refund": REFUNDED_O1001, "address": ADDRESS_O1006}
CLAIM_CASES = [(kind, text) for kind, texts in CLAIMS.items() for text in texts]


@pytest.mark.parametrize(("kind", "text"), CLAIM_CASES)
def test_a_claim_without_the_change_is_flagged(kind, text):
    assert [c.kind for c in action_claims(text)] == [kind]
    assert claimed_unperformed_action(trials((text, []))).tolist() == [True]


@pytest.mark.parametrize(("kind", "text"), CLAIM_CASES)
def test_a_claim_backed_by_the_change_is_not_flagged(kind, text):
    assert claimed_unperformed_action(trials((text, BACKING[kind]))).tolist() == [False]


@pytest.mark.parametrize(
    "text",
    [
        "Order O1007 has already shipped, so it can no longer be cancelled.",
        "I'm sorry, order O1007 cannot be cancelled because it has shipped.",
        "Your order O1007 has not been cancelled: it is already on its way.",
        "I can't refund order O1002, it is still pending.",
        "I can’t refund order O1002 yet.",  # typographic apostrophe
        "I was unable to cancel order O1007.",
        "Only pending orders can be cancelled.",
        "The address could not be changed because the order has shipped.",
        "Unfortunately shipped orders cannot be cancelled or have their address changed.",
        "Would you like me to cancel order O1003 instead?",
        "Once your order is cancelled you will get an email.",
        "No refund was issued.",
        "Your order O1007 is on its way and will arrive on Friday.",
    ],
)
def test_refusals_questions_and_plain_statements_are_not_claims(text):
    assert action_claims(text) == []
    assert claimed_unperformed_action(trials((text, []))).tolist() == [False]


#: (phrasing, is it a claim?): requests, infinitives, conditions and possibilities are not; a done
#: action in any tense that says so is, and so is a bare promise (nothing happens after the answer).
PHRASINGS = [
    ("I understand. I cannot cancel O1007. Please wait for the delivery to be cancelled.", False),
    ("I have asked for order O1007 to be cancelled.", False),
    ("Your order will be cancelled once the warehouse confirms.", False),
    ("Order O1007 will be cancelled when it is returned to us.", False),
    ("It'll be cancelled as soon as the courier confirms.", False),
    ("Order O1007 can be cancelled only while pending.", False),
    ("If it is cancelled, you will get an email.", False),
    ("Please wait for the cancellation to be processed.", False),
    ("Your refund has not been processed.", False),
    ("A refund can be processed once the item is returned.", False),
    ("Your refund will be issued after the return arrives.", False),
    ("I have cancelled order O1003.", True),
    ("Your order O1003 has been cancelled.", True),
    ("Order O1003 was cancelled.", True),
    ("Order O1003 is now cancelled.", True),
    ("Your order O1003 was cancelled when you called yesterday.", True),
    ("Your order has been cancelled and you will be emailed when the refund posts.", True),
    ("Your order O1003 will be cancelled.", True),
    ("Your refund of $79.99 has been processed.", True),
]


@pytest.mark.parametrize(("text", "claim"), PHRASINGS)
def test_only_done_actions_are_claims_not_requests_conditions_or_possibilities(text, claim):
    assert bool(action_claims(text)) is claim
    assert claimed_unperformed_action(trials((text, []))).tolist() == [claim]


def test_a_refusal_next_to_a_real_claim_keeps_the_claim():
    text = "Order O1007 has shipped and cannot be cancelled, but I have refunded it in full."
    assert [c.kind for c in action_claims(text)] == ["refund"]
    assert claimed_unperformed_action(trials((text, []))).tolist() == [True]


def test_the_change_must_be_on_the_record_the_claim_names():
    wrong_order = [{"path": "orders.O1002.status", "before": "pending", "after": "cancelled"}]
    df = trials(
        ("Your order O1003 has been cancelled.", wrong_order), ("Your order is cancelled.", wrong_order)
    )
    assert claimed_unperformed_action(df).tolist() == [True, False]
    assert unperformed_claims("Your order O1003 has been cancelled.", wrong_order)[0].ids == ("O1003",)


def test_the_change_must_be_of_the_kind_claimed():
    df = trials(
        ("I've refunded order O1003.", CANCELLED_O1003), ("Refunded $10 on O1005.", PARTIAL_REFUND_O1005)
    )
    assert claimed_unperformed_action(df).tolist() == [True, False]


def test_every_claim_must_be_backed():
    text = "Your order O1001 has been refunded and its address has been updated."
    assert claimed_unperformed_action(trials((text, REFUNDED_O1001))).tolist() == [True]
    assert claimed_unperformed_action(trials((text, REFUNDED_O1001 + ADDRESS_O1006))).tolist() == [True]
    backed = "Your order O1001 has been refunded and order O1006's address has been updated."
    assert claimed_unperformed_action(trials((backed, REFUNDED_O1001 + ADDRESS_O1006))).tolist() == [False]


def test_no_final_answer_is_never_flagged():
    df = trials((None, []))
    assert df["final_answer"].isna().all()
    assert claimed_unperformed_action(df).tolist() == [False]


def test_result_is_a_named_boolean_series_aligned_with_the_frame():
    df = trials(("Your order O1003 has been cancelled.", []), ("Cannot be cancelled.", [])).set_index(
        pd.Index([10, 20])
    )
    flags = claimed_unperformed_action(df)
    assert flags.name == "claimed_unperformed_action" and flags.dtype == bool
    assert flags.to_dict() == {10: True, 20: False}
    assert df.assign(claimed_unperformed_action=flags)["claimed_unperformed_action"].sum() == 1


def test_records_without_stored_claims_are_never_flagged():
    imported = pd.DataFrame({"final_answer": ["Your order O1003 has been cancelled."], "state_diff": ["[]"]})
    assert claimed_unperformed_action(imported).tolist() == [False]


def test_performed_actions_reads_fields_and_values():
    diff = REFUNDED_O1001 + CANCELLED_O1003 + ADDRESS_O1006
    assert performed_actions(json.dumps(diff)) == {
        ("refund", "O1001"),
        ("cancel", "O1003"),
        ("address", "O1006"),
    }
    assert performed_actions(diff) == performed_actions(json.dumps(diff))
    assert performed_actions("[]") == set() and performed_actions(None) == set()


def test_known_good_runs_are_never_flagged(tmp_path):
    df = passk_nb.run("scripted", trials=2, out=tmp_path, progress=False)
    assert not claimed_unperformed_action(df).any()


def test_a_hasty_agent_is_flagged_exactly_where_it_skipped_the_action(tmp_path):
    """A callable agent that sometimes answers 'done' instead of calling the mutating tool."""
    known_good, rng = ScriptedProvider(), random.Random(3)
    claims = {
        "refund_order": "Order {order_id} has been refunded.",
        "cancel_order": "Your order {order_id} has been cancelled.",
        "change_address": "The address of order {order_id} has been updated.",
    }

    def hasty(messages):
        action = json.loads(known_good.chat(messages))
        if action.get("tool") in claims and rng.random() < 0.5:
            return json.dumps({"answer": claims[action["tool"]].format(**action["args"])})
        return json.dumps(action)

    df = passk_nb.run(hasty, model="hasty", trials=6, out=tmp_path, concurrency=1, progress=False)
    flags = claimed_unperformed_action(df)
    skipped = df["transcript"].map(
        lambda t: not any(e.get("action", {}).get("tool") in claims for e in json.loads(t))
    ) & (df["task"] != "cancel-shipped-refusal")
    assert flags.any() and (~flags).any()
    assert flags.tolist() == skipped.tolist()
    assert set(df.loc[flags, "outcome"]) == {"wrong_state"}


@pytest.mark.parametrize("suite", ["orders", "bank"])
def test_the_one_search_gate_finds_exactly_the_claims_the_phrases_find(suite, monkeypatch):
    vocabulary = passk_nb.get_suite(suite).claims
    assert vocabulary.gate() is not None
    rng = random.Random(50)
    words = [
        *"done ok yes no it was is has been not never will would if the order payment account".split(),
        *"cancelled canceled refunded refund transferred moved shipped updated changed closed".split(),
        *"O1003 A-12 ACC-77 ; , : - but however . ! ? \n I we have".split(),
    ]
    texts = ["", "done", *(" ".join(rng.choices(words, k=rng.randint(1, 25))) for _ in range(400))]
    gated = [engine.action_claims(text, vocabulary) for text in texts]
    monkeypatch.setattr(engine, "_gate", lambda patterns: None)  # every phrase tried on every clause
    assert gated == [engine.action_claims(text, vocabulary) for text in texts]
    assert sum(map(bool, gated)) > 50  # the texts make claims, and not only none


def test_phrases_that_cannot_be_joined_get_no_gate():
    backreference = engine.ClaimVocabulary(phrases={"echo": (r"(\w+) \1",), "cancel": (r"\bcancelled\b",)})
    assert backreference.gate() is None
    assert engine.action_claims("we cancelled it", backreference)[0].kind == "cancel"
    twice = engine.ClaimVocabulary(phrases={"a": (r"(?P<x>done)",), "b": (r"(?P<x>sent)",)})
    assert twice.gate() is None and engine.action_claims("it was sent", twice)[0].kind == "b"


def test_the_flags_decode_each_distinct_false_claims_cell_once(monkeypatch):
    """A report of 1M trials decoded every ``false_claims`` cell (mostly ``[]``): over a second of
    JSON. Each distinct cell is decoded once; a missing or empty cell is no claim."""
    from passk_nb.stats import flags

    claim = '[{"kind": "cancel", "ids": ["O1003"], "text": "Your order O1003 has been cancelled"}]'
    cells = [claim, "[]", None, "[]", claim, "", "not json", "[]"] * 50
    df = pd.DataFrame({"false_claims": pd.array(cells, dtype="str")}, index=range(10, 410))
    decoded = []
    real = flags.false_claims
    monkeypatch.setattr(flags, "false_claims", lambda value: decoded.append(value) or real(value))
    flagged = flags.claimed_unperformed_action(df)
    assert flagged.tolist() == [True, False, False, False, True, False, False, False] * 50
    assert flagged.index.equals(df.index) and flagged.dtype == bool
    assert len(decoded) <= 4  # the claim, "[]", "", "not json"
    kinds = flags.claim_kinds(df)
    assert kinds.tolist() == ["cancel", "", "", "", "cancel", "", "", ""] * 50 and kinds.index.equals(
        df.index
    )
    assert flags.claim_kinds(df.drop(columns="false_claims")).tolist() == [""] * 400
