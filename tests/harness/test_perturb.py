"""Request perturbations: meaning kept, reproducible from the trial, recorded as their own run."""

import json
import re
import threading

import pandas as pd
import pytest

import passk_nb
from passk_nb.harness.perturb import _PHRASES, RULES, parse_perturb
from passk_nb.harness.suites import get_suite

SUITE = get_suite("orders")
#: What a task's meaning rests on: customer and order ids, amounts, the new address.
_KEYS = re.compile(r"\b[A-Z]\d{3,4}\b|\d+ Lake Ave, Austin, TX 78703")


@pytest.mark.parametrize("suite_name", ["orders", "bank", "starter"])
@pytest.mark.parametrize("rule", list(RULES))
def test_every_rule_rewords_every_task_and_keeps_what_it_rests_on(suite_name, rule):
    suite = get_suite(suite_name)
    plan = parse_perturb(rule)
    for task in suite.tasks:
        # a rule that finds nothing to change leaves the prompt as it is: one sentence is not
        # reordered, a prompt without any phrase of the synonym table keeps its words
        applies = {
            "reorder": len(re.split(r"(?<=[.!?])\s+", task.prompt.strip())) > 1,
            "synonyms": bool(_PHRASES.search(task.prompt)),
        }.get(rule, True)
        for trial in range(3):
            text, applied = plan.apply(task.id, task.prompt, f"{task.id}:{trial}")
            assert applied == rule
            assert sorted(_KEYS.findall(text)) == sorted(_KEYS.findall(task.prompt))
            assert (text != task.prompt) == applies
            if rule == "reorder":  # the same sentences, in another order
                assert sorted(text.split()) == sorted(task.prompt.split())
            if rule == "typo":  # one word, two letters swapped: same letters, one word differs
                assert sorted(text) == sorted(task.prompt)
                assert sum(a != b for a, b in zip(text.split(), task.prompt.split(), strict=True)) <= 1


def test_draws_are_reproducible_and_differ_between_trials():
    plan = parse_perturb("all")
    task = SUITE.tasks[0]
    draws = [plan.apply(task.id, task.prompt, f"{task.id}:{i}") for i in range(30)]
    assert draws == [plan.apply(task.id, task.prompt, f"{task.id}:{i}") for i in range(30)]
    assert len({applied for _, applied in draws}) >= 4


def test_a_perturbed_run_records_the_rule_and_the_text_sent_and_is_its_own_run(tmp_path):
    clean = passk_nb.run("scripted", trials=2, out=tmp_path, progress=False)
    runs = [
        passk_nb.run(
            "scripted",
            trials=4,
            out=tmp_path / str(c),
            progress=False,
            perturb="typo,distractor",
            concurrency=c,
        )
        for c in (1, 4)
    ]
    df = runs[0]
    assert set(df["outcome"]) == {"pass"}  # the scripted agent knows the task it is asked in other words
    assert set(df["perturbation"]) == {"typo,distractor"} and set(df["perturbation_applied"]) == {
        "typo",
        "distractor",
    }
    assert df["run_id"].iloc[0] != clean["run_id"].iloc[0]
    assert clean["perturbation_applied"].isna().all() and set(clean["perturbation"]) == {"none"}
    sent = df["transcript"].map(lambda t: json.loads(t)[0]["content"])
    prompts = df["task"].map({t.id: t.prompt for t in SUITE.tasks})
    assert (sent != prompts).all()
    keyed = [r.set_index(["task", "trial"]) for r in runs]
    pd.testing.assert_series_equal(keyed[0]["perturbation_applied"], keyed[1]["perturbation_applied"])
    pd.testing.assert_series_equal(
        keyed[0]["transcript"].map(lambda t: json.loads(t)[0]["content"]),
        keyed[1]["transcript"].map(lambda t: json.loads(t)[0]["content"]),
    )


def test_variant_lists_and_rules_of_your_own(tmp_path):
    variants = {
        "refund-delivered": ["Alice Moreno, C001: refund O1001 in full please.", "C001 here. Refund O1001."]
    }
    df = passk_nb.run("scripted", trials=4, out=tmp_path, progress=False, perturb=variants)
    mine = df[df["task"] == "refund-delivered"]
    assert (
        set(mine["perturbation_applied"]) <= {"variant 0", "variant 1"}
        and mine["perturbation_applied"].notna().all()
    )
    assert df.loc[df["task"] != "refund-delivered", "perturbation_applied"].isna().all()
    assert df["perturbation"].iloc[0].startswith("variants:")
    other = dict(variants, **{"refund-delivered": [*variants["refund-delivered"], "O1001, C001: refund it."]})
    assert parse_perturb(other).label != df["perturbation"].iloc[0]  # another list is another run

    def shout(text, rng):
        return text.upper()

    label = parse_perturb({"shout": shout}).label
    assert label.startswith("shout@") and label != parse_perturb({"shout": lambda t, r: t.lower()}).label


@pytest.mark.parametrize(
    ("perturb", "error", "message"),
    [
        ("tpyo", ValueError, "unknown perturbation rule 'tpyo'"),
        ("typo,typo", ValueError, "names a rule twice"),
        ({"refund-delivered": "one text"}, ValueError, "must be a non-empty list of prompt texts"),
        ({"no-such-task": ["x"]}, ValueError, r"variant lists for unknown tasks \['no-such-task'\]"),
        ({"empty": lambda text, rng: ""}, ValueError, "perturbation rule 'empty' returned ''"),
        ({"boom": lambda text, rng: 1 / 0}, ValueError, "rule 'boom' failed on task 'refund-delivered'"),
        (3, TypeError, "perturb must be a rule name"),
    ],
)
def test_a_bad_perturbation_is_refused_before_any_trial(tmp_path, perturb, error, message):
    with pytest.raises(error, match=message):
        passk_nb.run("scripted", trials=1, out=tmp_path, progress=False, perturb=perturb)
    assert not list(tmp_path.iterdir())


def literal_agent(messages):
    """An agent that only knows each task by its exact wording: reworded, it gives up."""
    task = next((t for t in SUITE.tasks if t.prompt == messages[1]["content"]), None)
    if task is None:
        return json.dumps({"answer": "Sorry, I did not understand your request."})
    step = sum(1 for m in messages if m["role"] == "assistant")
    return json.dumps(task.script[step])


def test_robustness_on_perturbation_shows_a_literal_agent_breaking(tmp_path):
    for perturb in (None, "typo"):
        passk_nb.run(literal_agent, trials=2, out=tmp_path, progress=False, perturb=perturb, version="v1")
    out = passk_nb.robustness(tmp_path, k=2, on="perturbation", n_boot=0)
    row = out[out["metric"] == "pass^k"].set_index("perturbation").loc["typo"]
    # every task but the refusal breaks (a refusal that never looked the order up is no_lookup too)
    assert row["a"] == 1.0 and row["b"] == 0.0 and row["n_broken"] == len(SUITE.tasks)


def test_passk_run_perturb(tmp_path):
    from passk_nb.cli.main import main

    argv = [
        "run",
        "--provider",
        "scripted",
        "--trials",
        "1",
        "--k",
        "1",
        "--no-progress",
        "--out",
        str(tmp_path),
    ]
    assert main([*argv, "--perturb", "formal"]) == 0
    df = passk_nb.load(tmp_path)
    assert set(df["perturbation"]) == {"formal"} and set(df["perturbation_applied"]) == {"formal"}


def test_a_suites_own_rule_is_named_like_a_built_in_and_replaces_it(tmp_path):
    import dataclasses

    def shop_words(text, rng):
        return text.replace("order", "parcel")

    orders = passk_nb.get_suite("orders")
    own = dataclasses.replace(
        orders, name="orders-own", perturbations={"synonyms": shop_words, "shop": shop_words}
    )
    df = passk_nb.run("scripted", suite=own, trials=1, out=tmp_path, progress=False, perturb="synonyms")
    sent = [json.loads(t)[0]["content"] for t in df["transcript"]]
    prompts = {t.id: t.prompt for t in orders.tasks}
    assert all(
        s == prompts[task].replace("order", "parcel") for s, task in zip(sent, df["task"], strict=True)
    )
    label = df["perturbation"].iloc[0]
    assert label.startswith("synonyms@") and label != "synonyms"  # never pooled with the built-in rule
    assert (df["perturbation_applied"] == "synonyms").all()
    with pytest.raises(ValueError, match="choose from .*shop"):
        passk_nb.run("scripted", suite=own, trials=1, out=tmp_path, progress=False, perturb="shpo")


def flaky(text, rng):
    """A rule of your own that raises on half its draws."""
    if rng.random() < 0.5:
        raise RuntimeError("no synonym for that")
    return text.upper()


def test_a_rule_failing_on_some_draws_is_refused_before_any_trial_naming_it(tmp_path):
    with pytest.raises(
        ValueError, match=r"perturbation rule 'flaky' failed on trial '[a-z-]+:\d': RuntimeError: no synonym"
    ):
        passk_nb.run("scripted", trials=4, out=tmp_path, progress=False, perturb={"flaky": flaky})
    assert not list(tmp_path.glob("**/*.parquet"))  # no trial ran


def off_main(text, rng):
    """A rule of your own that reads something besides its draw: it fails in a trial's thread only."""
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError("only works in the main thread")
    return text.upper()


def test_a_rule_failing_inside_a_trial_is_named_not_a_harness_error(tmp_path, caplog):
    df = passk_nb.run("scripted", trials=1, out=tmp_path, progress=False, perturb={"off_main": off_main})
    assert set(df["outcome"]) == {"infra_error"}
    assert df["error"].str.startswith("perturbation rule 'off_main' failed on trial").all()
    assert not df["error"].str.contains("harness error").any()
    assert not [r for r in caplog.records if r.exc_info]  # a line each, no traceback
