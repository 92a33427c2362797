"""The bundled data in ``data/``: every folder loads, and the figures the notebooks state hold.

The notebooks compute their figures from the data; these tests recompute the key ones
independently — reading the parquet files and the τ-bench JSON directly, with
``math.comb`` instead of the package's estimators — so a change to the data or to the
package that moves a number the notebooks talk about fails here, with the number named.
"""

import importlib.util
import json
import math
import shutil
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

import passk_nb

DATA = Path(__file__).resolve().parent.parent / "data"
TAU = DATA / "tau-bench" / "tau-bench-gpt-4o-airline.json"
LCB = DATA / "livecodebench"
#: τ-bench's README, for gpt-4o on the airline domain (quoted in data/tau-bench/README.md).
TAU_PUBLISHED = {1: 0.420, 2: 0.273, 3: 0.220, 4: 0.200}
SMOLLM2 = {
    # folder: (trials, passes, outcome counts, trials whose answer claims an action not done)
    "smollm2": (160, 0, {"format_error": 160}, 0),
    "smollm2-schema": (120, 0, {"wrong_state": 52, "max_turns": 43, "no_lookup": 17, "format_error": 8}, 9),
    "smollm2-suite": (
        720,
        0,
        {"format_error": 337, "max_turns": 190, "wrong_state": 151, "no_lookup": 42},
        22,
    ),
    "smollm2-starter": (
        400,
        0,
        {"max_turns": 233, "wrong_state": 119, "no_lookup": 37, "format_error": 11},
        22,
    ),
    "smollm2-starter2": (
        800,
        292,
        {"pass": 292, "wrong_state": 280, "max_turns": 178, "no_lookup": 46, "format_error": 4},
        30,
    ),
    "smollm2-bank": (
        1440,
        1,
        {
            "format_error": 623,
            "max_turns": 504,
            "wrong_state": 202,
            "no_lookup": 108,
            "unrequested_change": 2,
            "pass": 1,
        },
        24,
    ),
}


def read_parquet_folder(folder: Path) -> pd.DataFrame:
    """Every parquet part under a run folder, read with pandas alone (not passk_nb.load)."""
    parts = sorted(folder.glob("*/*.parquet"))
    assert parts, f"no parquet parts under {folder}"
    return pd.concat([pd.read_parquet(part) for part in parts], ignore_index=True)


def calls(transcript: str) -> list[tuple[str, object]]:
    """(tool, order id) of each tool call in an order-desk transcript."""
    actions = [e.get("action") or {} for e in json.loads(transcript) if e.get("kind") == "reply"]
    return [(a["tool"], (a.get("args") or {}).get("order_id")) for a in actions if "tool" in a]


def tau_trials() -> list[dict]:
    return json.loads(TAU.read_text())


def tau_pass_hat(k: int) -> float:
    """τ-bench's pass^k: mean over tasks of C(c, k) / C(n, k), from the raw rewards."""
    per_task: dict[int, list[float]] = {}
    for trial in tau_trials():
        per_task.setdefault(trial["task_id"], []).append(trial["reward"])
    values = [
        math.comb(sum(r == 1 for r in rewards), k) / math.comb(len(rewards), k)
        for rewards in per_task.values()
    ]
    return sum(values) / len(values)


def test_every_data_folder_is_known_and_loads():
    folders = sorted(p.name for p in DATA.iterdir() if p.is_dir())
    qwen = ["qwen2.5-1.5b-orders", "qwen2.5-1.5b-bank"]  # figures: the test_qwen_* tests below
    assert folders == sorted([*SMOLLM2, "tau-bench", "livecodebench", *qwen]), (
        "a new data folder needs its figures checked here"
    )
    for name in SMOLLM2:
        records = passk_nb.load(DATA / name)
        assert len(records) == len(read_parquet_folder(DATA / name))
    tau = passk_nb.from_tau_bench(TAU, model="gpt-4o")
    assert len(tau) == len(tau_trials()) == 200
    lcb = pd.read_parquet(LCB / "counts.parquet")
    assert passk_nb.summarize(lcb, k=1, by="model", n_boot=0).shape[0] == 19


def test_tau_bench_folder_keeps_licence_and_provenance():
    folder = DATA / "tau-bench"
    licence = (folder / "tau-bench-LICENSE.txt").read_text()
    assert licence.startswith("MIT License") and "Sierra" in licence
    readme = (folder / "README.md").read_text()
    for fact in (
        "sierra-research/tau-bench",
        "historical_trajectories/gpt-4o-airline.json",
        "59a200c6d575d59",
    ):
        assert fact in readme, f"data/tau-bench/README.md must name {fact}"


@pytest.mark.parametrize("k", sorted(TAU_PUBLISHED))
def test_tau_bench_published_pass_hat_k_is_reproduced(k):
    # from the raw file, independently of the package
    assert round(tau_pass_hat(k), 3) == TAU_PUBLISHED[k]
    # and the way notebook 02 computes it
    df = passk_nb.from_tau_bench(TAU, model="gpt-4o")
    summary = passk_nb.summarize(df, k=k, by=(), n_boot=0)
    assert float(summary["pass^k"].iloc[0]) == pytest.approx(tau_pass_hat(k), abs=1e-12)


def test_tau_bench_shape_and_per_task_reliability():
    trials = tau_trials()
    per_task = Counter()
    runs = Counter()
    for trial in trials:
        runs[trial["task_id"]] += 1
        per_task[trial["task_id"]] += trial["reward"] == 1
    assert len(runs) == 50 and set(runs.values()) == {4}
    assert sum(per_task.values()) == 84
    solved = Counter("always" if c == 4 else "never" if c == 0 else "sometimes" for c in per_task.values())
    assert solved == {"always": 10, "sometimes": 26, "never": 14}
    # the published pass@k the notebook prints beside pass^k
    pass_at = {
        k: sum(1 - math.comb(4 - c, k) / math.comb(4, k) for c in per_task.values()) / 50
        for k in (1, 2, 3, 4)
    }
    assert [round(v, 3) for v in pass_at.values()] == [0.42, 0.567, 0.66, 0.72]


def script(name: str):
    """scripts/<name>.py as a module (scripts/ is not a package)."""
    spec = importlib.util.spec_from_file_location(name, DATA.parent / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def lcb_builder():
    """scripts/make_livecodebench_data.py as a module."""
    return script("make_livecodebench_data")


def lcb_source() -> pd.DataFrame:
    """The published source rows, read with pandas alone."""
    return pd.read_csv(LCB / "source" / "lcb_codegen_2025-01-15.csv.gz", dtype={"question_id": str})


def test_livecodebench_folder_keeps_licence_and_provenance():
    readme = (LCB / "README.md").read_text()
    for fact in (
        "CC BY-SA 4.0",
        "creativecommons.org/licenses/by-sa/4.0",
        "LiveCodeBench/livecodebench.github.io",
        "33505c076467ba6e4acaa8fad8a29dcc75ec65ce",
        "79c5f7a2760c33a0893b98d09b2d25e018c86795",
        "inferred",
        "not tool use",
        "scripts/make_livecodebench_data.py",
    ):
        assert fact in readme, f"data/livecodebench/README.md must say {fact}"
    source_readme = (LCB / "source" / "SOURCE-README.md").read_text()
    assert "CC BY-SA 4.0" in source_readme and "33505c0" in source_readme
    models = json.loads((LCB / "source" / "lcb_codegen_2025-01-15_models.json").read_text())
    assert models["source_commit"] == "33505c076467ba6e4acaa8fad8a29dcc75ec65ce"


def test_livecodebench_counts_are_rebuilt_from_the_source():
    builder = lcb_builder()
    rebuilt = builder.build(lcb_source())
    bundled = pd.read_parquet(LCB / "counts.parquet")
    pd.testing.assert_frame_equal(rebuilt, bundled)
    assert bundled.shape == (880 * 19, 7) and bundled["task"].nunique() == 880
    assert dict(bundled.groupby("model")["n"].first().value_counts()) == {10: 13, 1: 6}
    # a percentage that is not a whole number of the inferred samples is refused, naming it
    broken = lcb_source().head(3).copy()
    broken.loc[1, "pass_at_1_pct"] = 55.0
    with pytest.raises(ValueError, match=r"not a whole number of successes"):
        builder.build(broken)


def test_livecodebench_counts_reproduce_every_published_pass_at_1():
    # published: the leaderboard's pass@1 of a model is the mean of its per-problem percentages
    published = lcb_source().groupby("model")["pass_at_1_pct"].mean() / 100
    assert len(published) == 19
    bundled = pd.read_parquet(LCB / "counts.parquet")
    from_counts = (bundled["c"] / bundled["n"]).groupby(bundled["model"]).mean()
    pd.testing.assert_series_equal(from_counts, published, check_names=False, atol=1e-12, rtol=0)
    # and through the public API, on the counts table as bundled
    summary = passk_nb.summarize(bundled, k=1, by="model", n_boot=0).set_index("model")
    pd.testing.assert_series_equal(summary["pass@k"], published, check_names=False, atol=1e-12, rtol=0)
    assert round(published["DeepSeek-V3"], 4) == 0.5453 and round(published["Claude-3-Haiku"], 4) == 0.2215


@pytest.mark.parametrize("folder", sorted(SMOLLM2))
def test_smollm2_counts_per_folder(folder):
    records = read_parquet_folder(DATA / folder)
    trials, passes, outcomes, claims = SMOLLM2[folder]
    assert len(records) == trials
    assert int(records["passed"].sum()) == passes
    assert records["outcome"].value_counts().to_dict() == outcomes
    flagged = records["false_claims"].map(lambda v: bool(json.loads(v)) if v else False)
    assert int(flagged.sum()) == claims
    # the package's reading of the same column agrees
    assert int(passk_nb.stats.claimed_unperformed_action(passk_nb.load(DATA / folder)).sum()) == claims


def test_smollm2_totals_and_the_refusal_task():
    records = pd.concat(
        [read_parquet_folder(DATA / name) for name in ("smollm2", "smollm2-schema")], ignore_index=True
    )
    assert (len(records), int(records["passed"].sum())) == (280, 0)
    refusal = records[records["task"] == "cancel-shipped-refusal"]
    assert len(refusal) == 56
    assert int((refusal["outcome"] == "no_lookup").sum()) == 17
    looked_up = refusal["transcript"].map(lambda t: any(call == ("get_order", "O1007") for call in calls(t)))
    assert not looked_up.any()  # notebook 04: none of them looked the order up


def test_schema_runs_have_twelve_trials_per_task_and_prompt():
    # notebook 03's power statement rests on n = 12 per arm: a complete flip has p = 2 / C(24, 12)
    records = read_parquet_folder(DATA / "smollm2-schema")
    sizes = records.groupby(["prompt_name", "task"]).size()
    assert set(sizes) == {12} and set(records["prompt_name"]) == {"default", "strict"}
    table = passk_nb.flips(passk_nb.load(DATA / "smollm2-schema"), on="prompt_name", a="default", b="strict")
    assert table["min_p"].min() == pytest.approx(2 / math.comb(24, 12), rel=1e-9)
    assert not table["flip"].any()


def example_data_table() -> list[list[str]]:
    """The rows of the example-data page's table of configurations (docs/guide/example-data.md)."""
    page = (DATA.parent / "docs" / "guide" / "example-data.md").read_text()
    block = page.split("<!-- example-data-table -->\n")[1].split("<!-- /example-data-table -->")[0]
    lines = [line for line in block.strip().splitlines() if line.startswith("| ")][1:]  # no header
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]


def test_the_guide_lists_every_configuration_with_its_counts():
    # recomputed from the parquet parts with pandas alone; `make_example_data.py --table` writes it
    expected = []
    for folder in sorted(SMOLLM2):
        records = read_parquet_folder(DATA / folder)
        for (config, prompt), group in records.groupby(["config", "prompt_name"], sort=True):
            per_task = group.groupby("task").size()
            outcomes = Counter(group["outcome"])
            expected.append(
                [
                    folder,
                    prompt,
                    config,
                    f"{len(group)} ({per_task.size} tasks x {'/'.join(map(str, sorted(set(per_task))))})",
                    str(int(group["passed"].sum())),
                    ", ".join(f"{o} {outcomes[o]}" for o in sorted(outcomes)),
                ]
            )
    assert example_data_table() == expected


def fisher_p(a: int, b: int, n: int) -> float:
    """Two-sided Fisher's exact p for a/n vs b/n, from the hypergeometric with math.comb."""
    total, m = 2 * n, a + b
    pmf = [
        math.comb(n, x) * math.comb(n, m - x) / math.comb(total, m)
        for x in range(max(0, m - n), min(m, n) + 1)
    ]
    observed = math.comb(n, a) * math.comb(n, b) / math.comb(total, m)
    return sum(p for p in pmf if p <= observed * (1 + 1e-9))


def tool_calls(transcript: str) -> list[dict]:
    """The tool calls of one stored trial, in order: [{"tool": ..., "args": {...}}, ...]."""
    return [
        e["action"]
        for e in json.loads(transcript)
        if e.get("kind") == "reply" and "tool" in (e.get("action") or {})
    ]


def uses_any(calls: list[dict], values: set[str]) -> bool:
    """Does any call pass an argument value (compared as JSON) from ``values``?"""
    return any(json.dumps(v) in values for c in calls for v in (c.get("args") or {}).values())


def test_suite_grid_and_what_notebook_03_reads_from_it():
    records = read_parquet_folder(DATA / "smollm2-suite")
    records["setting"] = records["json_mode"] + ", T=" + records["temperature"].map("{:g}".format)
    # the whole grid: 3 prompts x 2 output constraints x 2 temperatures, 12 trials of 5 tasks each
    sizes = records.groupby(["setting", "prompt_name", "task"]).size()
    assert len(sizes) == 3 * 2 * 2 * 5 and set(sizes) == {12}
    # notebook 03: at 12 trials per prompt, a task must move by 5 of 12 to reach p <= 0.05 (the guide too)
    smallest = min(a - b for a in range(13) for b in range(a + 1) if fisher_p(a, b, 12) <= 0.05)
    assert smallest == 5 and "move by 5 of 12" in (DATA.parent / "docs/guide/example-data.md").read_text()
    # the few-shot prompt makes the model act: every greedy schema trial calls a tool, none under default
    calls = records["transcript"].map(tool_calls)
    greedy = records[records["setting"] == "schema, T=0"]
    called = calls[greedy.index].map(bool).groupby(greedy["prompt_name"]).sum().to_dict()
    assert called == {"default": 0, "fewshot": 60, "strict": 0}
    # ... and copies the worked example's values, which no other prompt's trial uses
    example = {json.dumps("O1990"), json.dumps("O1991"), json.dumps(45.0)}
    reuses = calls.map(lambda cs: uses_any(cs, example))
    by_prompt = reuses.groupby(records["prompt_name"]).sum()
    assert by_prompt["fewshot"] > 0 and by_prompt["default"] == by_prompt["strict"] == 0


def test_bank_grid_holds_whole_comparisons_and_what_notebook_03_reads_from_it():
    records = read_parquet_folder(DATA / "smollm2-bank")
    records["setting"] = records["json_mode"] + ", T=" + records["temperature"].map("{:g}".format)
    # every run is whole (12 trials of each of the ten bank tasks) and every setting holds all three
    # prompts: the generation runs settings outermost, so what is committed are whole comparisons
    sizes = records.groupby(["setting", "prompt_name", "task"]).size()
    assert set(sizes) == {12} and records["task"].nunique() == 10
    assert (records.groupby("setting")["prompt_name"].nunique() == 3).all()
    assert set(records["suite"]) == {"bank"}
    # notebook 03, section 7: with the suite's schema, how many trials call any tool, per prompt
    calls = records["transcript"].map(tool_calls)
    called = calls.map(bool).groupby([records["setting"], records["prompt_name"]]).sum().to_dict()
    assert {prompt: n for (setting, prompt), n in called.items() if setting == "schema, T=0"} == {
        "default": 36,
        "fewshot": 120,
        "strict": 12,
    }
    assert {prompt: n for (setting, prompt), n in called.items() if setting == "schema, T=0.7"} == {
        "default": 71,
        "fewshot": 113,
        "strict": 56,
    }
    # the whole grid: both JSON modes at both temperatures. Without the schema (plain JSON mode) at
    # T=0 only the worked example gets the model to call a tool, and greedy decoding makes that a
    # property of the task: on five of the ten tasks all 12 trials call one, on the other five none
    assert set(records["setting"]) == {"json, T=0", "json, T=0.7", "schema, T=0", "schema, T=0.7"}
    assert {prompt: n for (setting, prompt), n in called.items() if setting == "json, T=0"} == {
        "default": 0,
        "fewshot": 60,
        "strict": 0,
    }
    greedy = (records["setting"] == "json, T=0") & (records["prompt_name"] == "fewshot")
    per_task = calls[greedy].map(bool).groupby(records.loc[greedy, "task"]).sum()
    assert sorted(per_task) == [0] * 5 + [12] * 5
    assert {prompt: n for (setting, prompt), n in called.items() if setting == "json, T=0.7"} == {
        "default": 16,
        "fewshot": 65,
        "strict": 11,
    }
    # the grid's one pass: a refusal task, the account looked up and the transfer declined
    passed = records[records["passed"]]
    assert passed[["setting", "prompt_name", "task"]].values.tolist() == [
        ["json, T=0.7", "fewshot", "over-cap-to-another-refusal"]
    ]
    # the bank worked example's account ids (A990, A991, A995) appear in no task: only fewshot trials use them
    example = {json.dumps(v) for v in ("A990", "A991", "A995")}
    reuses = calls.map(lambda cs: uses_any(cs, example))
    by_prompt = reuses.groupby(records["prompt_name"]).sum()
    assert by_prompt["fewshot"] > 0 and by_prompt["default"] == by_prompt["strict"] == 0


def test_livecodebench_figures_the_guide_and_notebook_09_quote():
    chat = pd.read_parquet(LCB / "counts.parquet").query("n == 10")
    # pass^k per model, from the counts with math.comb alone
    hat = {
        k: {
            model: sum(math.comb(c, k) / math.comb(n, k) for n, c in zip(rows["n"], rows["c"], strict=True))
            / len(rows)
            for model, rows in chat.groupby("model")
        }
        for k in (1, 10)
    }
    order = {k: sorted(hat[k], key=hat[k].get, reverse=True) for k in hat}
    model = "Gemini-Flash-2.0-Thinking"
    assert (order[1].index(model) + 1, order[10].index(model) + 1) == (2, 5)
    assert (round(hat[1][model], 3), round(hat[10][model], 3)) == (0.510, 0.362)
    # the swaps, and which survive Holm's correction, through the paired comparison rank uses
    pairs = {k: passk_nb.rank(chat, k=k, pairs=True) for k in (1, 10)}
    both = pairs[1].merge(pairs[10], on=["a", "b"], suffixes=("_1", "_10"))
    swaps = both[both["diff_1"] * both["diff_10"] < 0]  # opposite signs; a tie at either k is no swap
    assert len(both) == 78 and len(swaps) == 11
    assert int(swaps["significant_10"].sum()) == 4 and int(swaps["significant_1"].sum()) == 2
    assert not (swaps["significant_1"] & swaps["significant_10"]).any()
    page = " ".join((DATA.parent / "docs" / "guide" / "example-data.md").read_text().split())
    assert (
        "Gemini-Flash-2.0-Thinking ranks 2nd of 13 at pass^1 (0.510) and 5th at pass^10 (0.362)**; of the "
        "11 pairs of models whose order flips between pass^1 and pass^10, 4 are significant at pass^10 after "
        "Holm's correction over the 78 pairs"
    ) in page


#: data/smollm2-starter, the pre-registered grid (scripts/make_example_data.py): per committed run,
#: (temperature, prompt) -> (trials, passes, trials that left the right state but never answered)
STARTER_RUNS = {(0.7, "contract"): (200, 0, 43), (0.7, "default"): (200, 0, 54)}
#: the pre-registered test's flips (temperature, task) with q < 0.05, between default and contract
STARTER_FLIPS: set[tuple[float, str]] = set()


def test_starter_grid_is_the_pre_registered_one_and_its_headline_numbers():
    records = read_parquet_folder(DATA / "smollm2-starter")
    assert set(records["suite"]) == {"starter"} and set(records["json_mode"]) == {"schema"}
    assert records["config"].str.contains("max_turns=3").all()
    # new seeds: trial i sends 1000 + i (the pilots sent 0-4), 20 trials per task in every run
    assert sorted(set(records["seed"] - records["trial"])) == [1000]
    sizes = records.groupby(["temperature", "prompt_name", "task"]).size()
    assert set(sizes) == {20}
    arms = {}
    for (temperature, prompt), group in records.groupby(["temperature", "prompt_name"]):
        assert group["task"].nunique() == 10, "a committed run holds every task"
        stuck = group["state_ok"] & (group["outcome"] == "max_turns")
        arms[(temperature, prompt)] = (len(group), int(group["passed"].sum()), int(stuck.sum()))
    assert arms == STARTER_RUNS
    # the pre-registered analysis: Fisher per task, Benjamini-Hochberg within each temperature
    both = [
        t
        for t in sorted(set(records["temperature"]))
        if records.loc[records["temperature"] == t, "prompt_name"].nunique() == 2
    ]
    flagged = set()
    for temperature in both:
        table = passk_nb.flips(
            passk_nb.load(DATA / "smollm2-starter").query("temperature == @temperature"),
            on="prompt_name",
            a="default",
            b="contract",
        )
        for row in table.itertuples():
            assert row.p_value == pytest.approx(fisher_p(row.successes_a, row.successes_b, 20), rel=1e-9)
        flagged |= {(temperature, task) for task in table.loc[table["flip"], "task"]}
    assert flagged == STARTER_FLIPS


#: data/smollm2-starter2, the pre-registered grid on the starter2 suite (a single action ends the
#: trial): per run, (temperature, prompt) -> (trials, passes)
STARTER2_RUNS = {
    (0.0, "act-first"): (200, 100),
    (0.0, "default"): (200, 60),
    (0.7, "act-first"): (200, 69),
    (0.7, "default"): (200, 63),
}
#: successes per task (of 20) at T=0.7, default and act-first
STARTER2_TASKS_07 = {
    "cancel-if-pending-lookup": (8, 7),
    "cancel-named": (7, 9),
    "cancel-other-order": (9, 14),
    "cancel-shipped-refusal": (0, 0),
    "refund-full-lookup": (0, 0),
    "refund-if-delivered-lookup": (0, 0),
    "refund-named": (15, 18),
    "refund-other-order": (15, 15),
    "refund-over-total-refusal": (0, 0),
    "refund-partial": (9, 6),
}
#: the pre-registered test's flips (temperature, task) with q < 0.05, between default and act-first:
#: two at T=0, none at T=0.7 (at T=0 every task gave one outcome in all 20 trials: one greedy decode)
STARTER2_FLIPS = {(0.0, "cancel-named"), (0.0, "cancel-other-order")}


def test_starter2_grid_is_the_pre_registered_one_and_its_headline_numbers():
    records = read_parquet_folder(DATA / "smollm2-starter2")
    assert set(records["suite"]) == {"starter2"} and set(records["json_mode"]) == {"schema"}
    assert records["config"].str.contains("max_turns=3").all()
    # new seeds: trial i sends 2000 + i (the pilots sent 0-4, the starter grid 1000-1019)
    assert sorted(set(records["seed"] - records["trial"])) == [2000]
    assert set(records.groupby(["temperature", "prompt_name", "task"]).size()) == {20}
    arms = {
        key: (len(group), int(group["passed"].sum()))
        for key, group in records.groupby(["temperature", "prompt_name"])
    }
    assert arms == STARTER2_RUNS
    warm = records[records["temperature"] == 0.7]
    per_task = warm.groupby(["task", "prompt_name"])["passed"].sum().unstack()
    assert {t: (int(r["default"]), int(r["act-first"])) for t, r in per_task.iterrows()} == STARTER2_TASKS_07
    # pass^k from the counts with math.comb alone: at T=0.7 it falls with k under both prompts
    for prompt in ("default", "act-first"):
        counts = [STARTER2_TASKS_07[t][prompt == "act-first"] for t in sorted(STARTER2_TASKS_07)]
        hats = [sum(math.comb(c, k) / math.comb(20, k) for c in counts) / len(counts) for k in (1, 5, 20)]
        assert hats[0] > hats[1] > hats[2]
        summary = passk_nb.summarize(
            passk_nb.load(DATA / "smollm2-starter2").query("temperature == 0.7 and prompt_name == @prompt"),
            k=5,
            n_boot=0,
        )
        assert summary["pass^k"].iloc[0] == pytest.approx(hats[1], rel=1e-9)
    # the pre-registered analysis: Fisher per task, Benjamini-Hochberg within each temperature
    flagged = set()
    for temperature in sorted(set(records["temperature"])):
        table = passk_nb.flips(
            passk_nb.load(DATA / "smollm2-starter2").query("temperature == @temperature"),
            on="prompt_name",
            a="default",
            b="act-first",
        )
        for row in table.itertuples():
            assert row.p_value == pytest.approx(fisher_p(row.successes_a, row.successes_b, 20), rel=1e-9)
        flagged |= {(temperature, task) for task in table.loc[table["flip"], "task"]}
    assert flagged == STARTER2_FLIPS
    # at T=0 the 20 trials of a task are one decode repeated: a single outcome in every cell
    greedy = records[records["temperature"] == 0.0]
    assert set(greedy.groupby(["prompt_name", "task"])["outcome"].nunique()) == {1}


#: data/qwen2.5-1.5b-orders (issue 46): trials and passes per (temperature, prompt) as committed
QWEN_RUNS = {
    (0.0, "default"): (100, 20),
    (0.0, "fewshot"): (100, 20),
    (0.0, "strict"): (100, 20),
    (0.7, "default"): (100, 13),
    (0.7, "fewshot"): (100, 18),
    (0.7, "strict"): (100, 14),
}
#: successes per task (of 20) in the whole cells, by (temperature, prompt)
QWEN_TASKS = {
    (0.0, "default", "address-change-pending"): 20,
    (0.0, "default", "cancel-pending-lookup"): 0,
    (0.0, "default", "cancel-shipped-refusal"): 0,
    (0.0, "default", "refund-damaged-shipped"): 0,
    (0.0, "default", "refund-delivered"): 0,
    (0.0, "fewshot", "address-change-pending"): 20,
    (0.0, "fewshot", "cancel-pending-lookup"): 0,
    (0.0, "fewshot", "cancel-shipped-refusal"): 0,
    (0.0, "fewshot", "refund-damaged-shipped"): 0,
    (0.0, "fewshot", "refund-delivered"): 0,
    (0.0, "strict", "address-change-pending"): 20,
    (0.0, "strict", "cancel-pending-lookup"): 0,
    (0.0, "strict", "cancel-shipped-refusal"): 0,
    (0.0, "strict", "refund-damaged-shipped"): 0,
    (0.0, "strict", "refund-delivered"): 0,
    (0.7, "default", "address-change-pending"): 13,
    (0.7, "default", "cancel-pending-lookup"): 0,
    (0.7, "default", "cancel-shipped-refusal"): 0,
    (0.7, "default", "refund-damaged-shipped"): 0,
    (0.7, "default", "refund-delivered"): 0,
    (0.7, "fewshot", "address-change-pending"): 12,
    (0.7, "fewshot", "cancel-pending-lookup"): 0,
    (0.7, "fewshot", "cancel-shipped-refusal"): 0,
    (0.7, "fewshot", "refund-damaged-shipped"): 2,
    (0.7, "fewshot", "refund-delivered"): 4,
    (0.7, "strict", "address-change-pending"): 7,
    (0.7, "strict", "cancel-pending-lookup"): 1,
    (0.7, "strict", "cancel-shipped-refusal"): 0,
    (0.7, "strict", "refund-damaged-shipped"): 3,
    (0.7, "strict", "refund-delivered"): 3,
}
#: refusal-task answers claiming the shipped order was cancelled, per prompt (whole cells)
QWEN_CANCEL_CLAIMS = {
    (0.0, "default"): 0,
    (0.0, "fewshot"): 0,
    (0.0, "strict"): 0,
    (0.7, "default"): 7,
    (0.7, "fewshot"): 0,
    (0.7, "strict"): 1,
}
#: (temperature, variant, task) that flip against default (Fisher per task, BH within temperature)
# none: at T=0.7 the smallest q was 0.11 (address-change-pending 13 -> 7 under strict); at T=0 every
# prompt passes address-change-pending 20 of 20 and nothing else
QWEN_FLIPS: set[tuple[float, str, str]] = set()


def test_qwen_grid_is_the_pre_registered_one_and_its_headline_numbers():
    folder = DATA / "qwen2.5-1.5b-orders"
    records = read_parquet_folder(folder)
    assert set(records["suite"]) == {"orders"} and set(records["json_mode"]) == {"off"}
    assert set(records["protocol"]) == {"json"} and set(records["model"]) == {"qwen2.5-coder-1.5b"}
    assert set(records["base_url_host"]) == {"127.0.0.1:18432"}
    # new seeds: trial i sends 3000 + i (the pilot sent 0-1, and wrote nothing here)
    assert sorted(set(records["seed"] - records["trial"])) == [3000]
    arms = {
        key: (len(group), int(group["passed"].sum()))
        for key, group in records.groupby(["temperature", "prompt_name"])
    }
    assert arms == QWEN_RUNS
    whole = records[records.groupby(["temperature", "prompt_name"])["task"].transform("size") == 100]
    per_task = whole.groupby(["temperature", "prompt_name", "task"])["passed"].sum()
    assert {key: int(v) for key, v in per_task.items()} == QWEN_TASKS
    # pass^k from the counts with math.comb alone falls with k in every whole cell
    for (temperature, prompt), _ in whole.groupby(["temperature", "prompt_name"]):
        counts = [QWEN_TASKS[(temperature, prompt, t)] for t in sorted(set(whole["task"]))]
        hats = [sum(math.comb(c, k) / math.comb(20, k) for c in counts) / len(counts) for k in (1, 2, 5)]
        assert hats[0] >= hats[1] >= hats[2]
        cell = passk_nb.load(folder).query("temperature == @temperature and prompt_name == @prompt")
        assert passk_nb.summarize(cell, k=2, n_boot=0)["pass^k"].iloc[0] == pytest.approx(hats[1], rel=1e-9)
    refusal = whole[whole["task"] == "cancel-shipped-refusal"]
    claims = refusal["false_claims"].map(
        lambda s: any(c["kind"] == "cancel" and "O1007" in c["ids"] for c in json.loads(s))
    )
    by_cell = claims.groupby([refusal["temperature"], refusal["prompt_name"]]).sum()
    assert {key: int(n) for key, n in by_cell.items()} == QWEN_CANCEL_CLAIMS
    assert not refusal["state_diff"].str.contains("O1007.status").any()  # never actually cancelled
    flagged = set()
    loaded = passk_nb.load(folder)
    loaded = loaded[loaded.groupby(["temperature", "prompt_name"])["task"].transform("size") == 100]
    for variant in sorted(set(whole["prompt_name"]) - {"default"}):
        table = passk_nb.flips(loaded, on="prompt_name", a="default", b=variant, by="temperature")
        for row in table.itertuples():
            assert row.p_value == pytest.approx(fisher_p(row.successes_a, row.successes_b, 20), rel=1e-9)
        flagged |= {(r.temperature, variant, r.task) for r in table[table["flip"]].itertuples()}
    assert flagged == QWEN_FLIPS


def test_the_readme_quotes_the_qwen_finding_as_the_records_give_it():
    df = passk_nb.load(DATA / "qwen2.5-1.5b-orders").query("temperature == 0.7 and prompt_name == 'default'")
    one = passk_nb.summarize(df, k=1).iloc[0]
    three = passk_nb.summarize(df, k=3, n_boot=0).iloc[0]
    quoted = (
        f"pass^1 is {one['pass^k']:.3f} (95 % for these tasks: "
        f"[{one['pass^k_fixed_lo']:.3f}, {one['pass^k_fixed_hi']:.3f}]) and pass^3 {three['pass^k']:.3f}"
    )
    readme = " ".join((DATA.parent / "README.md").read_text().split())
    assert quoted == "pass^1 is 0.130 (95 % for these tasks: [0.069, 0.191]) and pass^3 0.050"
    assert quoted in readme
    refusal = df[df["task"] == "cancel-shipped-refusal"]
    named = refusal["false_claims"].map(
        lambda text: any(c["kind"] == "cancel" and "O1007" in c["ids"] for c in json.loads(text))
    )
    claimed = f"{int(named.sum())} of its {len(refusal)} answers claimed the shipped order was cancelled"
    assert claimed == "7 of its 20 answers claimed the shipped order was cancelled" and claimed in readme


def test_the_card_page_quotes_the_qwen_harm_rates_as_the_regraded_records_give_them():
    """docs/methods/card.md: harmful failures per trial at T=0.7 after a regrade, per prompt."""
    df = passk_nb.load(DATA / "qwen2.5-1.5b-orders").query("temperature == 0.7")
    graded = passk_nb.regrade(df)
    assert not graded["regrade_changed"].any()
    rates = passk_nb.stats.safety(graded, k=2, by="prompt_name", n_boot=0).set_index("prompt_name")["harmful"]
    quoted = (
        f"harmful failures per trial {rates['default']:.2f} under the default prompt, "
        f"{rates['strict']:.2f} under `strict`, {rates['fewshot']:.2f} under `fewshot`"
    )
    page = " ".join((DATA.parent / "docs" / "methods" / "card.md").read_text().split())
    assert quoted in page


def test_the_notebook_table_quotes_the_closest_qwen_prompt_change():
    """README's line for notebook 03: no flip at T = 0.7, the closest q as the records give it."""
    df = passk_nb.load(DATA / "qwen2.5-1.5b-orders").query("temperature == 0.7")
    tables = [passk_nb.flips(df, on="prompt_name", a="default", b=v) for v in ("strict", "fewshot")]
    tested = pd.concat(tables)
    tested = tested[tested["tested"]]
    assert not tested["flip"].any()
    quoted = f"(none: the closest q {tested['q_value'].min():.2f})"
    assert quoted == "(none: the closest q 0.11)"
    line = next(x for x in (DATA.parent / "README.md").read_text().splitlines() if x.startswith("| 03-"))
    assert quoted in line


#: successes per task (of 8) of the Qwen bank run (data/qwen2.5-1.5b-bank/README.md)
QWEN_BANK_TASKS = {
    "daily-limit-refusal": 0,
    "duplicate-bill-refusal": 0,
    "freeze-lost-card": 6,
    "over-cap-to-another-refusal": 0,
    "pay-from-unnamed-account": 0,
    "pay-new-bill": 3,
    "same-name-disambiguation": 0,
    "transfer-own-accounts": 6,
    "transfer-to-another-customer": 2,
    "wrong-customer-refusal": 0,
}


def test_the_qwen_bank_run_is_the_pre_registered_one_and_its_readme_numbers_hold():
    folder = DATA / "qwen2.5-1.5b-bank"
    df = passk_nb.load(folder)
    assert set(df["suite"]) == {"bank"} and set(df["prompt_name"]) == {"default"}
    assert set(df["temperature"]) == {0.7} and set(df["model"]) == {"qwen2.5-coder-1.5b"}
    assert sorted(set(df["seed"] - df["trial"])) == [3000] and len(df) == 80
    assert {t: int(c) for t, c in df.groupby("task")["passed"].sum().items()} == QWEN_BANK_TASKS
    readme = " ".join((folder / "README.md").read_text().split())
    hats = {k: passk_nb.summarize(df, k=k, n_boot=0).iloc[0] for k in (1, 2, 5)}
    quoted = (
        f"pass^1 {hats[1]['pass^k']:.3f}, pass^2 {hats[2]['pass^k']:.3f}, pass^5 {hats[5]['pass^k']:.3f} "
        f"(pass@5 {hats[5]['pass@k']:.3f})"
    )
    assert quoted == "pass^1 0.212, pass^2 0.121, pass^5 0.021 (pass@5 0.388)" and quoted in readme
    refusals = df[df["task"].str.endswith("refusal")]["outcome"].value_counts().to_dict()
    assert refusals == {"no_lookup": 14, "unrequested_change": 10, "format_error": 8}


def test_a_regrade_drops_only_the_refusal_the_claim_finder_once_misread():
    """data/qwen2.5-1.5b-orders/README.md: the stored ``false_claims`` keep one request read as a
    claim ("wait for the delivery to be cancelled"); today's finder, through ``regrade``, drops it alone."""
    df = passk_nb.load(DATA / "qwen2.5-1.5b-orders")
    graded = passk_nb.regrade(df)
    changed = graded[graded["false_claims"] != df["false_claims"]]
    assert len(changed) == 1 and not graded["regrade_changed"].any()
    (stored,) = json.loads(df.loc[changed.index[0], "false_claims"])
    assert stored["text"] == "Please wait for the delivery to be cancelled." and stored["ids"] == []
    assert json.loads(changed["false_claims"].iloc[0]) == []
    readme = " ".join((DATA / "qwen2.5-1.5b-orders" / "README.md").read_text().split())
    assert "wait for the delivery to be cancelled" in readme and "`regrade` drops it" in readme


def test_rescoring_a_data_folder_keeps_its_readme_and_its_trials(tmp_path):
    """scripts/rescore_example_data.py rewrites a folder's runs and keeps the files beside them."""
    rescore = script("rescore_example_data")
    folder = tmp_path / "qwen2.5-1.5b-bank"
    shutil.copytree(DATA / "qwen2.5-1.5b-bank", folder)
    before = passk_nb.load(folder)
    assert rescore.main([str(folder)]) == 0
    assert (folder / "README.md").read_text() == (DATA / "qwen2.5-1.5b-bank" / "README.md").read_text()
    after = passk_nb.load(folder)
    assert len(after) == len(before) == 80
    assert after["passed"].sum() == before["passed"].sum()
