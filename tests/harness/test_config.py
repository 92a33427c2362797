"""run()'s configuration (``RunConfig``): the keywords build it, ``config=`` takes it whole, every
field is checked once in one place, and ``until=`` is a typed stopping rule."""

from __future__ import annotations

import dataclasses
import inspect

import pandas as pd
import pytest

import passk_nb
from passk_nb.harness import RunConfig, StoppingRule
from passk_nb.harness.config import CONSTRAINTS
from passk_nb.harness.runner import run


def test_run_takes_a_config_whole_and_its_keywords_build_the_same_run(tmp_path):
    tasks = passk_nb.get_suite("orders").task_ids[:2]
    config = RunConfig(tasks=tasks, trials=2, out=tmp_path, progress=False)
    first = run(config=config)
    again = run(tasks=tasks, trials=2, out=tmp_path, progress=False)  # the same spec: nothing to run
    assert len(first) == 4 and first["run_id"].nunique() == 1
    pd.testing.assert_frame_equal(first, again)


def test_run_keywords_have_the_config_fields_defaults():
    fields = {
        f.name: f.default for f in dataclasses.fields(RunConfig) if f.default is not dataclasses.MISSING
    }
    keywords = {
        name: p.default
        for name, p in inspect.signature(run).parameters.items()
        if p.default is not inspect.Parameter.empty and name != "config"
    }
    assert keywords == fields  # one default each, said once by both faces


def test_a_config_beside_keywords_is_refused(tmp_path):
    config = RunConfig(out=tmp_path, progress=False)
    with pytest.raises(TypeError, match=r"takes the whole configuration; trials, base_url given beside it"):
        run(config=config, trials=5, base_url="http://127.0.0.1:1")
    assert run(config=config.replace(trials=1))["trial"].max() == 0  # a changed copy, checked again


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("batch_poll", 0, "batch_poll must be a finite number of seconds > 0"),
        ("workers", 0, "workers must be a whole number ≥ 1"),
        ("max_format_errors", 1.5, "max_format_errors must be a whole number ≥ 1"),
        ("trial_timeout", float("inf"), "trial_timeout must be a finite number of seconds"),
        ("progress", "yes", "progress must be True or False"),
        ("executor", "gpu", r"executor must be one of \['threads', 'processes', 'ray'\], got 'gpu'"),
        ("out", 3, "out must be a folder path, got int 3"),
        ("on_record", 3, "on_record must be a function of one record"),
        ("rate_limit", "fast", "rate limit 'fast' not understood"),
        ("shard", "0/4", "shard 0/4 is out of range"),
        ("faults", "crash:get_order", "unknown fault kind 'crash'"),
    ],
)
def test_every_field_is_checked_when_the_config_is_built(field, value, message):
    assert field in CONSTRAINTS
    with pytest.raises((ValueError, TypeError), match=message):
        RunConfig(**{field: value})


def test_until_is_a_stopping_rule_and_the_budget_is_the_runs_alone():
    assert isinstance(passk_nb.Until("gate=0.8"), StoppingRule)  # structurally: stats imports no harness
    assert "max_trials" not in {f.name for f in dataclasses.fields(passk_nb.Until)}

    class OnlyNextRound:
        def next_round(self, records):
            return None

    with pytest.raises(TypeError, match=r"until must have a next_round\(records\) method, with check"):
        RunConfig(until=OnlyNextRound())
    with pytest.raises(ValueError, match="max_trials must be a whole number ≥ 1"):
        RunConfig(until=passk_nb.Until("gate=0.8"), max_trials=0)


def test_a_changed_prompt_warns_at_the_callers_line(tmp_path):
    """The warning points at the user's run(...) call, not at the runner's insides."""
    text = passk_nb.get_suite("orders").prompts["default"]
    run(
        "scripted",
        tasks=["refund-delivered"],
        trials=1,
        out=tmp_path,
        progress=False,
        prompt=text,
        prompt_name="p",
    )
    with pytest.warns(UserWarning, match="prompt 'p' of another text") as caught:
        run(
            "scripted",
            tasks=["refund-delivered"],
            trials=1,
            out=tmp_path,
            progress=False,
            prompt=text + " x",
            prompt_name="p",
        )
    assert caught[0].filename == __file__
