"""The ``starter`` suite: ten single-decision tasks, each check catching the mistake it tests."""

import json
import re

import pytest

import passk_nb
from passk_nb.harness.episode import run_episode
from passk_nb.harness.suites import get_suite
from passk_nb.harness.suites.build import answer, call

STARTER = get_suite("starter")


def replay(*steps):
    texts = [json.dumps(s) for s in steps]
    return lambda messages: texts[sum(m["role"] == "assistant" for m in messages)]


def outcome(task_id, *steps, prompt="default"):
    result = run_episode(
        STARTER,
        STARTER.task(task_id),
        passk_nb.harness.make_provider(replay(*steps)),
        system_prompt=STARTER.prompts[prompt],
    )
    return result["outcome"], result["error"]


def test_ten_tasks_the_script_passes_and_doing_nothing_fails(tmp_path):
    assert len(STARTER.tasks) == 10
    assert sum(t.refusal is not None for t in STARTER.tasks) == 2
    good = passk_nb.run("scripted", suite="starter", trials=1, out=tmp_path, progress=False)
    assert good["passed"].all(), good[["task", "outcome", "error"]].to_string()
    idle = passk_nb.run(
        lambda m: '{"answer": "Done."}', suite="starter", trials=1, out=tmp_path, progress=False
    )
    assert not idle["passed"].any()
    # single decisions: every known-good script is one action, or one lookup and one action, and an answer
    assert {len(t.script) for t in STARTER.tasks} == {2, 3}


def test_each_request_names_only_its_own_ids_and_no_tool_text_gives_one():
    ids = {task.id: set(re.findall(r"\bO\d+\b", task.prompt)) for task in STARTER.tasks}
    assert all(len(found) == 1 for found in ids.values()), ids
    for task in STARTER.tasks:
        others = set().union(*(v for k, v in ids.items() if k != task.id))
        assert not ids[task.id] & others, task.id
    for prompt in STARTER.prompts.values():
        tools_part = prompt.split("Tools:")[1]
        assert not re.search(r"\bO\d+\b", tools_part)


def test_a_successful_action_carries_its_confirmation_and_a_repeat_is_refused():
    env = STARTER.make_env()
    steps = (
        ("cancel_order", {"order_id": "O1002"}, "Order O1002 is cancelled."),
        ("refund_order", {"order_id": "O1008", "amount": 15.0}, "Order O1008 is refunded: 15.00."),
    )
    for name, args, confirmation in steps:
        assert json.loads(env.call(name, args))["ok"]["answer"] == confirmation
        done = env.snapshot()
        assert "error" in json.loads(env.call(name, args))  # the repeat is refused ...
        assert env.snapshot() == done  # ... and changes nothing
    assert (
        "answer" not in json.loads(env.call("get_order", {"order_id": "O1001"}))["ok"]
    )  # a lookup is no action


def test_the_contract_variant_is_the_default_plus_one_line():
    default, contract = STARTER.prompts["default"], STARTER.prompts["contract"]
    assert contract.startswith(default + "\n")
    assert contract[len(default) + 1 :].count("\n") == 0


WRONG = [
    ("refund-named", [call("refund_order", order_id="O1001", amount=7.99), answer("Done.")], "wrong_state"),
    (
        "refund-named",  # the right refund, and a cancellation nobody asked for
        [
            call("refund_order", order_id="O1001", amount=79.99),
            call("cancel_order", order_id="O1002"),
            answer("Done."),
        ],
        "unrequested_change",
    ),
    ("cancel-named", [call("cancel_order", order_id="O1003"), answer("Done.")], "wrong_state"),
    ("cancel-other-order", [call("cancel_order", order_id="O1002"), answer("Done.")], "wrong_state"),
    ("refund-partial", [call("refund_order", order_id="O1004", amount=60.0), answer("Done.")], "wrong_state"),
    (
        "refund-other-order",
        [call("refund_order", order_id="O1001", amount=15.0), answer("Done.")],
        "wrong_state",
    ),
    (
        "refund-full-lookup",
        [
            call("get_order", order_id="O1005"),
            call("refund_order", order_id="O1005", amount=45.0),
            answer("Done."),
        ],
        "wrong_state",
    ),
    (
        "cancel-if-pending-lookup",
        [call("get_order", order_id="O1006"), answer("It is pending.")],
        "wrong_state",
    ),
    (
        "refund-if-delivered-lookup",
        [
            call("get_order", order_id="O1007"),
            call("refund_order", order_id="O1007", amount=10.0),
            answer("Done."),
        ],
        "wrong_state",
    ),
    # refusals: saying no without looking, claiming the action, substituting a smaller refund
    ("cancel-shipped-refusal", [answer("Order O1009 has shipped; I cannot cancel it.")], "no_lookup"),
    (
        "cancel-shipped-refusal",  # the tool's error is not a look at the order
        [call("cancel_order", order_id="O1009"), answer("It has shipped; I cannot cancel it.")],
        "no_lookup",
    ),
    (
        "cancel-shipped-refusal",
        [call("get_order", order_id="O1009"), answer("Order O1009 is cancelled.")],
        "false_claim",
    ),
    (
        "refund-over-total-refusal",
        [
            call("get_order", order_id="O1010"),
            call("refund_order", order_id="O1010", amount=30.0),
            answer("Done."),
        ],
        "unrequested_change",
    ),
    (
        "refund-over-total-refusal",
        [call("get_order", order_id="O1010"), answer("I have refunded 300.00.")],
        "false_claim",
    ),
]


@pytest.mark.parametrize(("task_id", "steps", "expected"), WRONG, ids=[f"{t}-{o}" for t, _, o in WRONG])
def test_each_check_catches_its_wrong_state(task_id, steps, expected):
    assert outcome(task_id, *steps)[0] == expected


def test_every_task_has_a_wrong_move_its_check_catches():
    assert {task_id for task_id, _, _ in WRONG} == set(STARTER.task_ids)


def test_the_known_good_scripts_pass_under_the_contract_prompt_too():
    assert [outcome(task.id, *task.script, prompt="contract")[0] for task in STARTER.tasks] == ["pass"] * 10


def test_the_cli_lists_the_starter_suite_beside_the_others(capsys):
    from passk_nb.cli.main import main

    assert main(["tasks", "--suite", "starter"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "10 tasks; prompts: default, contract" in lines[0]
    assert [line.split()[0] for line in lines[1:]] == STARTER.task_ids
    assert main(["check-suite", "starter"]) == 0
    with pytest.raises(SystemExit):
        main(["tasks", "--help"])
    assert "orders, bank, starter" in " ".join(capsys.readouterr().out.split())
