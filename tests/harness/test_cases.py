"""Rule-based text cases: run_eval matches the reference harness; run_cases makes trial records."""

import json
import random
import socket
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from passk_nb.data.records import COLUMNS, OUTCOMES
from passk_nb.data.store import load
from passk_nb.data.transcript import MAX_STORED_CHARS
from passk_nb.harness.case_files import load_agent, load_cases
from passk_nb.harness.cases import cases_hash, run_cases, run_eval
from passk_nb.stats.estimators import pass_at_k, pass_hat_k

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def toy_agent(x):
    return {"2+2": "the answer is 4", "cap": "Paris is the capital"}.get(x, "i don't know")


WORKED_EXAMPLE = [
    {"name": "math", "input": "2+2", "expected": "4"},
    {"name": "geo", "input": "cap", "check": lambda o: "Paris" in o},
    {"name": "unknown", "input": "???", "expected": "42"},
]


def boom(message="boom", exc=RuntimeError):
    def raise_(*_):
        raise exc(message)

    return raise_


# ---------------------------------------------------------------- run_eval: the reference's rules


def test_worked_example_gives_the_stated_results():
    summary = run_eval(toy_agent, WORKED_EXAMPLE)
    assert summary["passed"] == 2
    assert summary["total"] == 3
    assert round(summary["pass_rate"], 3) == 0.667
    assert [r["passed"] for r in summary["results"]] == [True, True, False]
    assert summary["results"][2]["output"] == "i don't know"
    assert summary["results"] == [
        {"name": "math", "passed": True, "output": "the answer is 4", "error": None},
        {"name": "geo", "passed": True, "output": "Paris is the capital", "error": None},
        {"name": "unknown", "passed": False, "output": "i don't know", "error": None},
    ]
    assert set(summary) == {"results", "passed", "total", "pass_rate"}


def test_worked_example_from_the_example_files():
    for path in (EXAMPLES / "cases.json", EXAMPLES / "cases_example.py"):
        agent = load_agent(f"{EXAMPLES / 'cases_example.py'}:agent")
        summary = run_eval(agent, load_cases(path))
        assert (summary["passed"], summary["total"]) == (2, 3), path
        assert [r["passed"] for r in summary["results"]] == [True, True, False]


def test_default_names_use_the_zero_based_index():
    cases = [
        {"input": "a", "expected": "a"},
        {"name": "named", "input": "b", "expected": "b"},
        {"input": "c", "expected": "c"},
    ]
    assert [r["name"] for r in run_eval(str, cases)["results"]] == ["case_0", "named", "case_2"]


def test_passed_is_a_bool_and_check_result_is_coerced():
    cases = [
        {"input": "x", "check": lambda o: 1},
        {"input": "x", "check": lambda o: ""},
        {"input": "x", "check": lambda o: [0]},
        {"input": "x", "check": lambda o: None},
    ]
    passed = [r["passed"] for r in run_eval(str, cases)["results"]]
    assert passed == [True, False, True, False]
    assert all(type(p) is bool for p in passed)


def test_check_result_without_a_truth_value_is_a_check_error():
    class Ambiguous:
        def __bool__(self):
            raise ValueError("truth value is ambiguous")

    result = run_eval(str, [{"input": 1, "check": lambda o: Ambiguous()}])["results"][0]
    assert result == {
        "name": "case_0",
        "passed": False,
        "output": "1",
        "error": "check error: truth value is ambiguous",
    }


def test_expected_is_a_substring_test():
    cases = [
        {"input": "abc", "expected": "b"},
        {"input": "abc", "expected": "abc"},
        {"input": "abc", "expected": "B"},
        {"input": "abc", "expected": ""},
    ]
    assert [r["passed"] for r in run_eval(str, cases)["results"]] == [True, True, False, True]


@pytest.mark.parametrize(
    ("check", "expected", "passed"),
    [
        (lambda o: True, "not in the output", True),  # check says pass, expected would fail
        (lambda o: False, "out", False),  # check says fail, expected would pass
    ],
)
def test_check_wins_when_both_keys_are_present(check, expected, passed):
    result = run_eval(lambda x: "output", [{"input": 1, "check": check, "expected": expected}])["results"][0]
    assert result == {"name": "case_0", "passed": passed, "output": "output", "error": None}


def test_raising_agent_fails_its_case_only():
    calls = []

    def agent(x):
        calls.append(x)
        if x == "bad":
            raise ValueError("no idea what 'bad' means")
        return x

    cases = [
        {"input": "a", "expected": "a"},
        {"name": "b", "input": "bad", "expected": "bad"},
        {"input": "c", "expected": "c"},
    ]
    summary = run_eval(agent, cases)
    assert calls == ["a", "bad", "c"]
    assert summary["results"][1] == {
        "name": "b",
        "passed": False,
        "output": None,
        "error": "agent error: no idea what 'bad' means",
    }
    assert [r["passed"] for r in summary["results"]] == [True, False, True]
    assert summary["passed"] == 2 and summary["total"] == 3


def test_agent_error_message_is_str_of_the_exception():
    result = run_eval(boom("missing", KeyError), [{"input": 1, "expected": "x"}])["results"][0]
    assert result["error"] == "agent error: 'missing'"  # str(KeyError('missing'))


def test_raising_check_fails_the_case_and_keeps_the_output():
    cases = [{"name": "c", "input": "x", "check": boom("bad check")}, {"input": "y", "expected": "y"}]
    summary = run_eval(lambda x: x * 2, cases)
    assert summary["results"][0] == {
        "name": "c",
        "passed": False,
        "output": "xx",
        "error": "check error: bad check",
    }
    assert summary["results"][1]["passed"] is True


def test_expected_on_a_non_string_output_is_a_check_error():
    result = run_eval(lambda x: None, [{"input": 1, "expected": "4"}])["results"][0]
    assert result["passed"] is False and result["output"] is None
    assert result["error"].startswith("check error: ")


def test_check_that_is_not_callable_is_a_check_error():
    result = run_eval(str, [{"input": 1, "check": "4"}])["results"][0]
    assert result["passed"] is False and result["error"].startswith("check error: ")


def test_empty_list():
    assert run_eval(toy_agent, []) == {"results": [], "passed": 0, "total": 0, "pass_rate": 0.0}


@pytest.mark.parametrize(
    "cases", [tuple(WORKED_EXAMPLE), (c for c in WORKED_EXAMPLE), {"input": "x"}, None, "abc"]
)
def test_non_list_cases_is_a_type_error_before_anything_runs(cases):
    calls = []
    with pytest.raises(TypeError, match="cases must be a list"):
        run_eval(lambda x: calls.append(x), cases)
    assert calls == []


@pytest.mark.parametrize(
    ("case", "name", "message"),
    [
        ({"name": "q", "expected": "4"}, "q", "case 'q' has no 'input' key; add one"),
        ({"input": "2+2"}, "case_1", "case 'case_1' has neither 'check' nor 'expected'; add one of them"),
        ("2+2", "case_1", "case 1 is a str, not a dict"),
        (None, "case_1", "case 1 is a NoneType, not a dict"),
    ],
)
def test_malformed_case_fails_with_a_case_error_and_the_run_goes_on(case, name, message):
    calls = []

    def agent(x):
        calls.append(x)
        return x

    summary = run_eval(agent, [{"input": "a", "expected": "a"}, case, {"input": "c", "expected": "c"}])
    bad = summary["results"][1]
    assert bad["name"] == name and bad["passed"] is False and bad["output"] is None
    assert bad["error"].startswith(f"case error: {message}")
    assert calls == ["a", "c"]  # the agent is not called for a malformed case
    assert summary["passed"] == 2 and summary["total"] == 3


def test_run_eval_uses_no_clock_and_no_network(monkeypatch):
    def forbidden(*_, **__):
        raise AssertionError("run_eval must not read the clock or open sockets")

    for name in ("time", "perf_counter", "monotonic", "time_ns"):
        monkeypatch.setattr(time, name, forbidden)
    monkeypatch.setattr(socket, "socket", forbidden)
    assert run_eval(toy_agent, WORKED_EXAMPLE)["passed"] == 2


def test_ctrl_c_is_not_swallowed():
    with pytest.raises(KeyboardInterrupt):
        run_eval(boom(exc=KeyboardInterrupt), [{"input": 1, "expected": "x"}])


# ---------------------------------------------------------------- run_cases: text cases as trials


def test_run_cases_records_one_row_per_case_and_trial_in_case_order():
    cases = [
        {"name": "zeta", "input": "2+2", "expected": "4"},
        {"name": "alpha", "input": "???", "expected": "4"},
    ]
    df = run_cases(toy_agent, cases, trials=3, progress=False)
    assert list(df.columns) == list(COLUMNS)
    assert list(zip(df["task"], df["trial"], strict=True)) == [
        ("zeta", 0),
        ("zeta", 1),
        ("zeta", 2),
        ("alpha", 0),
        ("alpha", 1),
        ("alpha", 2),
    ]
    assert df["passed"].tolist() == [True] * 3 + [False] * 3
    assert df["outcome"].tolist() == ["pass"] * 3 + ["wrong_output"] * 3
    assert set(df["outcome"]) <= set(OUTCOMES)
    row = df.iloc[0]
    assert (row["suite"], row["provider"], row["model"], row["prompt_name"]) == (
        "cases",
        "callable",
        "toy_agent",
        "cases",
    )
    assert row["prompt_hash"] == cases_hash(cases) and len(row["prompt_hash"]) == 12
    assert row["final_answer"] == "the answer is 4" and pd.isna(row["error"])
    assert row["harness_version"] and row["latency_s"] >= 0 and not pd.isna(row["started_at"])
    assert json.loads(row["transcript"]) == [
        {"kind": "task", "role": "user", "content": "2+2"},
        {"kind": "reply", "role": "assistant", "content": "the answer is 4"},
    ]
    assert df["run_id"].nunique() == 1 and df["state_ok"].tolist() == df["passed"].tolist()


def test_run_cases_outcomes_for_raising_agent_and_raising_check():
    cases = [
        {"name": "agent", "input": "crash", "expected": "x"},
        {"name": "check", "input": "ok", "check": boom("check broke")},
    ]
    df = run_cases(lambda x: boom("agent broke")() if x == "crash" else x, cases, trials=1, model="m")
    agent_row, check_row = df.iloc[0], df.iloc[1]
    assert (agent_row["outcome"], agent_row["error"]) == ("agent_error", "agent error: agent broke")
    assert pd.isna(agent_row["final_answer"]) and agent_row["n_turns"] == 0
    assert json.loads(agent_row["transcript"])[-1]["kind"] == "agent_error"
    assert (check_row["outcome"], check_row["error"]) == ("wrong_output", "check error: check broke")
    assert check_row["final_answer"] == "ok" and not df["passed"].any()
    assert (df["model"] == "m").all()


def test_flaky_agent_has_pass_at_k_above_pass_hat_k():
    rng = random.Random(1234)

    def flaky(x):
        return x if rng.random() < 0.6 else "?"

    cases = [{"name": f"q{i}", "input": f"answer {i}", "expected": f"answer {i}"} for i in range(5)]
    df = run_cases(flaky, cases, trials=8)
    counts = df.groupby("task", sort=False)["passed"].agg(["size", "sum"])
    assert 0 < counts["sum"].sum() < len(df)  # really flaky
    at_k = pass_at_k(counts["size"].to_numpy(), counts["sum"].to_numpy(), 3).mean()
    hat_k = pass_hat_k(counts["size"].to_numpy(), counts["sum"].to_numpy(), 3).mean()
    assert at_k > hat_k
    rng.seed(1234)
    assert run_cases(flaky, cases, trials=8)["passed"].tolist() == df["passed"].tolist()  # seeded: repeatable


def test_records_feed_summarize_like_any_suite():
    from passk_nb.stats.summary import summarize

    rng = random.Random(7)
    cases = [{"name": f"q{i}", "input": str(i), "expected": str(i)} for i in range(4)]
    df = run_cases(lambda x: x if rng.random() < 0.7 else "?", cases, trials=6)
    row = summarize(df, k=2, by=("model", "prompt_hash"), n_boot=50).iloc[0]
    assert row["n_tasks"] == 4 and row["trials"] == 24
    assert row["pass@k"] > row["pass^k"]


def test_a_reliable_agent_has_equal_pass_at_k_and_pass_hat_k():
    df = run_cases(toy_agent, WORKED_EXAMPLE, trials=4)
    counts = df.groupby("task", sort=False)["passed"].agg(["size", "sum"])
    n, c = counts["size"].to_numpy(), counts["sum"].to_numpy()
    assert pass_at_k(n, c, 2).tolist() == pass_hat_k(n, c, 2).tolist() == [1.0, 1.0, 0.0]


def test_cases_hash_changes_with_names_inputs_and_expected():
    base = [{"name": "a", "input": "x", "expected": "y"}]
    variants = [
        [{"name": "b", "input": "x", "expected": "y"}],
        [{"name": "a", "input": "z", "expected": "y"}],
        [{"name": "a", "input": "x", "expected": "w"}],
        [{"name": "a", "input": "x", "check": str}],
    ]
    assert cases_hash(base) == cases_hash([dict(base[0])])
    assert len({cases_hash(base), *(cases_hash(v) for v in variants)}) == 5


def test_run_id_depends_on_cases_model_and_suite():
    cases = [{"name": "a", "input": "x", "expected": "x"}]

    def run_id(**options):
        return run_cases(str, options.pop("cases", cases), trials=1, **options)["run_id"].iloc[0]

    ids = {
        run_id(),
        run_id(model="other"),
        run_id(suite="other"),
        run_id(cases=[{"name": "a", "input": "y", "expected": "x"}]),
    }
    assert len(ids) == 4 and run_id() == run_id()


def test_outputs_are_capped_and_non_strings_kept_as_repr():
    long = "x" * (MAX_STORED_CHARS + 10)
    cases = [
        {"name": "long", "input": "long", "expected": "x"},
        {"name": "int", "input": 1, "check": lambda o: o == 4},
    ]
    df = run_cases(lambda x: long if x == "long" else 4, cases, trials=1)
    assert df["passed"].tolist() == [True, True]
    assert df["final_answer"].iloc[0].endswith(f"…[truncated, {len(long)} chars in all]")
    assert json.loads(df["transcript"].iloc[0])[-1]["length"] == len(long)
    assert df["final_answer"].iloc[1] == "4"
    assert json.loads(df["transcript"].iloc[1])[0]["content"] == "1"


@pytest.mark.parametrize(
    ("cases", "error", "match"),
    [
        ([], ValueError, "empty"),
        ((), TypeError, "must be a list"),
        ([{"name": "a", "expected": "x"}], ValueError, "no 'input' key"),
        ([{"input": "a"}], ValueError, "neither 'check' nor 'expected'"),
        (
            [{"name": "a", "input": 1, "expected": "x"}, {"name": "a", "input": 2, "expected": "x"}],
            ValueError,
            r"unique.*\['a'\]",
        ),
        ([{"name": 3, "input": 1, "expected": "x"}], ValueError, "non-empty strings"),
        ([{"input": 1, "check": "x"}], ValueError, "not a function"),
    ],
)
def test_run_cases_checks_every_case_before_running(cases, error, match):
    calls = []
    with pytest.raises(error, match=match):
        run_cases(calls.append, cases)
    assert calls == []


@pytest.mark.parametrize("options", [{"trials": 0}, {"concurrency": 0}, {"trials": 1.5}])
def test_run_cases_rejects_bad_counts(options):
    with pytest.raises(ValueError, match="whole number"):
        run_cases(str, [{"input": 1, "expected": "1"}], **options)


def test_run_cases_rejects_an_agent_that_is_not_callable():
    with pytest.raises(TypeError, match="agent_fn must be a function"):
        run_cases("agent", [{"input": 1, "expected": "1"}])


def test_concurrency_calls_the_agent_from_threads_and_keeps_order():
    barrier = threading.Barrier(2, timeout=5)  # only passes when two calls are in flight at once

    def agent(x):
        barrier.wait()
        return x

    cases = [{"name": f"c{i}", "input": str(i), "expected": str(i)} for i in range(3)]
    df = run_cases(agent, cases, trials=2, concurrency=2)
    assert df["passed"].all()
    expected = [(f"c{i}", t) for i in range(3) for t in range(2)]
    assert list(zip(df["task"], df["trial"], strict=True)) == expected


def test_out_persists_and_rerun_resumes(tmp_path):
    calls = []

    def agent(x):
        calls.append(x)
        return x

    cases = [{"name": "b", "input": "1", "expected": "1"}, {"name": "a", "input": "2", "expected": "2"}]
    first = run_cases(agent, cases, trials=2, out=tmp_path)
    assert len(calls) == 4
    pd.testing.assert_frame_equal(
        load(tmp_path).sort_values(["task", "trial"], ascending=[False, True]).reset_index(drop=True), first
    )
    again = run_cases(agent, cases, trials=2, out=tmp_path)
    assert len(calls) == 4  # nothing left to run
    pd.testing.assert_frame_equal(again, first)
    more = run_cases(agent, cases, trials=3, out=tmp_path)
    assert len(calls) == 6 and list(more["task"]) == ["b"] * 3 + ["a"] * 3
    assert not load(tmp_path).duplicated(["run_id", "task", "trial"]).any()
    run_cases(agent, [{**cases[0], "input": "changed"}], trials=1, out=tmp_path)
    assert len(calls) == 7  # changed cases: a new run


def test_interrupted_run_keeps_finished_trials(tmp_path):
    calls, calls_after = [], []

    def interrupted(x):
        calls.append(x)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return x

    cases = [{"name": "a", "input": "1", "expected": "1"}]
    with pytest.raises(KeyboardInterrupt):
        run_cases(interrupted, cases, trials=4, out=tmp_path, model="m")
    assert load(tmp_path)["trial"].tolist() == [0, 1]
    df = run_cases(lambda x: calls_after.append(x) or x, cases, trials=4, out=tmp_path, model="m")
    assert df["trial"].tolist() == [0, 1, 2, 3] and df["passed"].all() and len(calls_after) == 2


def test_progress_bar_only_when_asked_or_long(capsys):
    cases = [{"input": "1", "expected": "1"}]
    run_cases(str, cases, trials=2)
    assert capsys.readouterr().err == ""
    run_cases(str, cases, trials=2, progress=True)
    assert "2/2" in capsys.readouterr().err
    run_cases(str, cases, trials=100)
    assert "100/100" in capsys.readouterr().err


# ---------------------------------------------------------------- case files and agent specs


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_load_cases_reads_json_and_python(tmp_path):
    assert load_cases(EXAMPLES / "cases.json")[0] == {"name": "math", "input": "2+2", "expected": "4"}
    cases = load_cases(EXAMPLES / "cases_example.py")
    assert [c["name"] for c in cases] == ["math", "geo", "unknown"] and callable(cases[1]["check"])
    path = write(
        tmp_path,
        "my-cases.py",
        "from dataclasses import dataclass\n"
        "@dataclass\nclass Q:\n    text: str\nCASES = [{'input': Q('hi'), 'check': lambda o: o}]\n",
    )
    assert len(load_cases(path)) == 1  # dataclasses in a case file work


@pytest.mark.parametrize(
    ("name", "text", "error", "match"),
    [
        ("bad.json", '[\n  {"input": "a",\n   "expected": }\n]', ValueError, "invalid JSON at line 3"),
        ("obj.json", '{"input": "a", "expected": "a"}', TypeError, "must hold a JSON list"),
        ("check.json", '[{"name": "c", "input": "a", "check": "x"}]', ValueError, "cannot hold a function"),
        ("num.json", '[{"name": "c", "input": "a", "expected": 4}]', ValueError, "'expected' must be a str"),
        ("noinput.json", '[{"name": "c", "expected": "4"}]', ValueError, "case 'c' has no 'input' key"),
        ("empty.json", "[]", ValueError, "empty"),
        ("nocases.py", "cases = []\n", ImportError, "defines no CASES"),
        ("tuple.py", "CASES = ({'input': 1, 'expected': '1'},)\n", TypeError, "CASES must be a list"),
        ("raises.py", "x = 1\n1 / 0\n", ImportError, r"ZeroDivisionError at \S*raises\.py:2: division"),
        ("syntax.py", "CASES = [\n", ImportError, "SyntaxError"),
        ("cases.yaml", "- input: a\n", ValueError, r"must end in \.json or \.py"),
    ],
)
def test_load_cases_errors_say_what_to_fix(tmp_path, name, text, error, match):
    with pytest.raises(error, match=match):
        load_cases(write(tmp_path, name, text))


def test_load_cases_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="no case file"):
        load_cases(tmp_path / "nope.json")


def test_load_agent_forms_and_errors(tmp_path):
    assert load_agent("os.path:basename")("a/b") == "b"
    assert load_agent(f"{EXAMPLES / 'cases_example.py'}:agent")("2+2") == "the answer is 4"
    with pytest.raises(ValueError, match="module:function"):
        load_agent("os.path.basename")
    with pytest.raises(ImportError, match="no module named 'no_such_module_xyz'.*no_such_module_xyz.py:f"):
        load_agent("no_such_module_xyz:f")
    with pytest.raises(ImportError, match="no attribute 'nope'; functions it defines: agent, flaky_agent"):
        load_agent(f"{EXAMPLES / 'cases_example.py'}:nope")
    with pytest.raises(TypeError, match="not a function"):
        load_agent(f"{EXAMPLES / 'cases_example.py'}:CASES")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_agent(f"{tmp_path / 'missing.py'}:f")
    dep = write(tmp_path, "needs_dep.py", "import no_such_dependency_xyz\n")
    with pytest.raises(ImportError, match="no_such_dependency_xyz"):
        load_agent(f"{dep}:f")
