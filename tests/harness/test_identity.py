"""A run's identity is everything that was measured: edited agents, configurations, pinned versions."""

import json
import random
import warnings

import pandas
import pytest

import passk_nb
from passk_nb.harness.fingerprint import fingerprint
from passk_nb.harness.spec import RunSpec

FIVE = ["refund-delivered", "cancel-pending-lookup", "refund-damaged-shipped", "address-change-pending"]


def script_of(task_id):
    return [json.dumps(step) for step in passk_nb.get_suite("orders").task(task_id).script]


def test_an_edited_agent_never_returns_the_old_agents_results(tmp_path):
    def agent(messages):  # broken: answers without acting
        return '{"answer": "done"}'

    old = passk_nb.run(agent, tasks=FIVE[:1], trials=2, out=tmp_path, progress=False)
    assert set(old["outcome"]) == {"wrong_state"}

    steps = script_of("refund-delivered")

    def agent(messages):  # noqa: F811  (the notebook user's edited cell)
        turn = sum(m["role"] == "assistant" for m in messages)
        return steps[turn]

    with pytest.warns(UserWarning, match="agent named 'agent' with other code"):
        new = passk_nb.run(agent, tasks=FIVE[:1], trials=2, out=tmp_path, progress=False)
    assert set(new["outcome"]) == {"pass"} and new["run_id"].nunique() == 1
    assert new["run_id"].iloc[0] != old["run_id"].iloc[0]
    # extending the new agent's run never mixes in the old agent's trials
    more = passk_nb.run(agent, tasks=FIVE[:1], trials=3, out=tmp_path, progress=False)
    assert set(more["outcome"]) == {"pass"} and len(more) == 3


def test_two_lambdas_are_two_agents(tmp_path):
    a = passk_nb.run(lambda m: '{"answer": "a"}', tasks=FIVE[:1], trials=1, out=tmp_path, progress=False)
    b = passk_nb.run(lambda m: '{"answer": "b"}', tasks=FIVE[:1], trials=1, out=tmp_path, progress=False)
    assert a["final_answer"].tolist() == ["a"] and b["final_answer"].tolist() == ["b"]
    assert a["run_id"].iloc[0] != b["run_id"].iloc[0]
    assert a["config"].iloc[0] != b["config"].iloc[0]  # never pooled by the default grouping


def test_the_fingerprint_sees_defaults_closures_globals_and_same_module_helpers():
    def make(word):
        def agent(messages, reply=word):
            return reply

        return agent

    assert fingerprint(make("a")) != fingerprint(make("b"))  # a default value

    def closure(word):
        return lambda messages: word

    assert fingerprint(closure("a")) != fingerprint(closure("b"))  # a closure value
    assert fingerprint(closure("a")) == fingerprint(closure("a"))

    class Agent:
        def __init__(self, temperature):
            self.temperature = temperature

        def chat(self, messages):
            return '{"answer": "x"}'

    assert fingerprint(Agent(0.1)) != fingerprint(Agent(0.2))  # plain-data attributes of a chat object


def test_a_pinned_version_is_the_identity(tmp_path):
    def agent(messages):
        return '{"answer": "one"}'

    first = passk_nb.run(
        agent, model="my-agent", version="v3", tasks=FIVE[:1], trials=1, out=tmp_path, progress=False
    )

    def agent(messages):  # noqa: F811  (changed, but the user says it is still v3)
        return '{"answer": "two"}'

    second = passk_nb.run(
        agent, model="my-agent", version="v3", tasks=FIVE[:1], trials=2, out=tmp_path, progress=False
    )
    assert second["run_id"].nunique() == 1 and second["run_id"].iloc[0] == first["run_id"].iloc[0]
    assert second["final_answer"].tolist() == ["one", "two"]  # trial 0 resumed, trial 1 new
    assert json.loads(second["provider_meta"].iloc[0])["version"] == "v3"
    assert "version=v3" in second["config"].iloc[0]


def test_an_agent_that_takes_seed_gets_each_trials_seed_at_any_concurrency(tmp_path):
    def dice(messages, seed=None):
        return json.dumps({"answer": str(random.Random(seed).randint(1, 10**9))})

    runs = [
        passk_nb.run(
            dice,
            tasks=FIVE[:2],
            trials=6,
            concurrency=c,
            backend_seed=5,
            out=tmp_path / str(c),
            progress=False,
        )
        for c in (1, 6)
    ]
    answers = [r.sort_values(["task", "trial"])["final_answer"].tolist() for r in runs]
    assert answers[0] == answers[1]
    assert runs[0]["seed"].tolist() == [5, 6, 7, 8, 9, 10] * 2
    assert len(set(answers[0])) == 6  # six trials, six seeds (the same six in each task)


def test_temperature_one_is_one_identity_and_booleans_are_refused(tmp_path):
    ids = {
        passk_nb.run("scripted", temperature=t, tasks=FIVE[:1], trials=1, out=tmp_path, progress=False)[
            "run_id"
        ].iloc[0]
        for t in (1, 1.0)
    }
    assert len(ids) == 1
    for bad in (True, -0.5, float("nan")):
        with pytest.raises(ValueError, match="temperature must be a number ≥ 0"):
            passk_nb.run("scripted", temperature=bad, out=tmp_path, progress=False)
    with pytest.raises(TypeError, match="backend_seed="):
        passk_nb.run("scripted", seed=3, out=tmp_path, progress=False)


def test_configurations_are_labelled_and_never_pooled(tmp_path):
    plain = passk_nb.run("scripted", tasks=FIVE[:1], trials=2, out=tmp_path, progress=False)
    hot = passk_nb.run("scripted", temperature=0.7, tasks=FIVE[:1], trials=2, out=tmp_path, progress=False)
    short = passk_nb.run("scripted", max_turns=3, tasks=FIVE[:1], trials=2, out=tmp_path, progress=False)
    assert plain["config"].iloc[0] == "default"
    assert hot["config"].iloc[0] == "temperature=0.7"
    assert short["config"].iloc[0] == "max_turns=3"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table = passk_nb.summarize(passk_nb.load(tmp_path), k=1, n_boot=0)
    assert sorted(table["config"]) == ["default", "max_turns=3", "temperature=0.7"]
    pooled = passk_nb.summarize(passk_nb.load(tmp_path), k=1, by="model", n_boot=0)  # pooling, on purpose
    assert len(pooled) == 1 and pooled["trials"].iloc[0] == 6


def test_json_mode_is_three_valued():
    assert (
        RunSpec("s", "p", "m", None, "h", None, 0, "schema", 10, 2, {"json_schema": True}).config
        == "json=schema, schema=generic"
    )
    with pytest.raises(ValueError, match="json_mode must be one of"):
        passk_nb.run("scripted", json_mode="no", progress=False)
    with pytest.raises(ValueError, match="a Python agent produces its own text"):
        passk_nb.run(lambda m: "x", json_mode=True, progress=False)


def test_a_function_that_refers_to_itself_has_a_fingerprint():
    def counter(messages):
        counter.calls += 1
        return counter(messages) if counter.calls < 0 else "x"

    counter.calls = 0
    assert len(fingerprint(counter)) == 12


def test_runs_constrained_to_different_schemas_get_different_labels():
    # json_schema=True (the generic action schema), the suite's own schema and a custom one were
    # all labelled "json=schema" once, so loading them together pooled them in every analysis
    from passk_nb.harness.spec import schema_id

    own = schema_id(passk_nb.get_suite("orders").action_schema())
    labels = {
        name: RunSpec("orders", "openai", "m", None, "p", 0.7, 0, "schema", 6, 2, {"json_schema": s}).config
        for name, s in (("generic", True), ("own", own), ("custom", "sha256:0123456789ab"))
    }
    assert labels["own"] == "temperature=0.7, json=schema, max_turns=6"
    assert labels["generic"] == "temperature=0.7, json=schema, max_turns=6, schema=generic"
    assert labels["custom"] == "temperature=0.7, json=schema, max_turns=6, schema=0123456789ab"
    df = pandas.DataFrame(
        [
            {"suite": "orders", "task": "t", "trial": i, "config": label, "passed": True, "outcome": "pass"}
            for label in labels.values()
            for i in range(2)
        ]
    )
    assert len(passk_nb.summarize(df, k=1, n_boot=0)) == 3


def _alpha(messages, x):
    return '{"answer": "alpha"}'


def _beta(messages, x):
    return '{"answer": "beta"}'


class Slotted:
    __slots__ = ("word",)

    def __init__(self, word):
        self.word = word

    def __call__(self, messages):
        return json.dumps({"answer": self.word})


BIG = list(range(10_001))


def _reads_big(messages):
    return json.dumps({"answer": str(sum(BIG))})


def test_partials_slotted_objects_and_large_globals_are_distinct_agents(tmp_path):
    from functools import partial

    a = passk_nb.run(partial(_alpha, x=1), tasks=FIVE[:1], trials=1, out=tmp_path, progress=False)
    b = passk_nb.run(partial(_beta, x=1), tasks=FIVE[:1], trials=1, out=tmp_path, progress=False)
    assert a["final_answer"].tolist() == ["alpha"] and b["final_answer"].tolist() == ["beta"]
    assert a["run_id"].iloc[0] != b["run_id"].iloc[0]
    assert fingerprint(partial(_alpha, x=1)) != fingerprint(partial(_alpha, x=2))  # a keyword
    assert fingerprint(partial(_alpha, 1)) != fingerprint(partial(_alpha, 2))  # an argument
    one = passk_nb.run(Slotted("one"), tasks=FIVE[:1], trials=1, out=tmp_path, progress=False)
    two = passk_nb.run(Slotted("two"), tasks=FIVE[:1], trials=1, out=tmp_path, progress=False)
    assert one["final_answer"].tolist() == ["one"] and two["final_answer"].tolist() == ["two"]
    before = fingerprint(_reads_big)
    BIG[5000] = -1
    try:
        assert fingerprint(_reads_big) != before  # one item of 10,001 changed: hashed, not truncated
    finally:
        BIG[5000] = 5000


#: Agents as a notebook cell defines them, each with WORD to edit between two definitions.
EDITABLE = {
    "class-level list": "class Agent:\n    ANSWERS = ['WORD']\n    def chat(self, m):\n"
    "        return json.dumps({'answer': self.ANSWERS[0]})\nagent = Agent()",
    "class-level dict": "class Agent:\n    SAY = {'a': 'WORD'}\n    def chat(self, m):\n"
    "        return json.dumps({'answer': self.SAY['a']})\nagent = Agent()",
    "property": "class Agent:\n    @property\n    def word(self):\n        return 'WORD'\n"
    "    def chat(self, m):\n        return json.dumps({'answer': self.word})\nagent = Agent()",
    "cached property": "class Agent:\n    @functools.cached_property\n    def word(self):\n"
    "        return 'WORD'\n    def chat(self, m):\n        return json.dumps({'answer': self.word})\n"
    "agent = Agent()",
    "nested class": "class Agent:\n    class Words:\n        FIRST = 'WORD'\n    def chat(self, m):\n"
    "        return json.dumps({'answer': self.Words.FIRST})\nagent = Agent()",
    "enum member": "class Word(enum.Enum):\n    ONE = 'WORD'\n"
    "def agent(m):\n    return json.dumps({'answer': Word.ONE.value})",
    "cached helper": "@functools.lru_cache\ndef word():\n    return 'WORD'\n"
    "def agent(m):\n    return json.dumps({'answer': word()})",
    "huge int": "N = 10**5000 + ord('WORD'[1])\n"
    "def agent(m):\n    return json.dumps({'answer': str(N % 10)})",
}


def _define(source, word):
    import enum
    import functools

    namespace = {"json": json, "enum": enum, "functools": functools, "__name__": "notebook_cell"}
    exec(source.replace("WORD", word), namespace)
    return namespace["agent"]


@pytest.mark.parametrize("what", EDITABLE)
def test_class_data_properties_cached_helpers_and_huge_ints_are_seen(what, tmp_path):
    # on main: editing any of these gave the same fingerprint (the old run's records came back),
    # and an int of 5,000 digits could not be fingerprinted at all
    one, two = _define(EDITABLE[what], "one"), _define(EDITABLE[what], "two")
    assert fingerprint(one) == fingerprint(_define(EDITABLE[what], "one"))
    assert fingerprint(one) != fingerprint(two)
    if what == "class-level list":
        a = passk_nb.run(one, tasks=FIVE[:1], trials=1, out=tmp_path, progress=False)
        b = passk_nb.run(two, tasks=FIVE[:1], trials=1, out=tmp_path, progress=False)
        assert a["final_answer"].tolist() == ["one"] and b["final_answer"].tolist() == ["two"]


def test_your_modules_code_and_settings_are_seen_library_code_by_name(tmp_path, monkeypatch):
    import importlib
    import sys

    module = tmp_path / "agent_settings.py"
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "agent_settings", raising=False)
    module.write_text("WORD = 'one'\ndef say():\n    return 'hello'\n")
    settings = importlib.import_module("agent_settings")

    def agent(messages):
        return json.dumps({"answer": settings.WORD + settings.say() + json.dumps([])})

    before = fingerprint(agent)
    module.write_text("WORD = 'two'\ndef say():\n    return 'hello'\n")
    importlib.reload(settings)
    after_setting = fingerprint(agent)
    module.write_text("WORD = 'two'\ndef say():\n    return 'bye'\n")
    importlib.reload(settings)
    assert len({before, after_setting, fingerprint(agent)}) == 3  # a setting, then a helper's code
    assert passk_nb.harness.fingerprint.blind_spots(agent) == []  # json: library code, by name


def test_an_agent_the_fingerprint_cannot_see_into_resumes_only_with_a_version(tmp_path):
    rng = random.Random(0)

    def agent(messages):
        return json.dumps({"answer": rng.choice(["a", "b"])})

    passk_nb.run(agent, tasks=FIVE[:1], trials=1, out=tmp_path, progress=False)
    with pytest.raises(ValueError, match=r"random\.Random by type only.*version="):
        passk_nb.run(agent, tasks=FIVE[:1], trials=2, out=tmp_path, progress=False)
    passk_nb.run(agent, version="v1", tasks=FIVE[:1], trials=1, out=tmp_path, progress=False)
    again = passk_nb.run(agent, version="v1", tasks=FIVE[:1], trials=2, out=tmp_path, progress=False)
    assert len(again) == 2 and again["run_id"].nunique() == 1
