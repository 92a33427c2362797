"""One counts layer under every analysis: counts tables as input, curve in one pass, vectorised flips."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from passk_nb.stats import _grouping
from passk_nb.stats.counts import counts
from passk_nb.stats.design import plan
from passk_nb.stats.forecast import forecast
from passk_nb.stats.noise import noise_floor
from passk_nb.stats.paired import compare, flips
from passk_nb.stats.rank import rank
from passk_nb.stats.summary import METRICS, curve, summarize


def suite(seed: int, *, tasks: int = 12, trials: int = 6, infra: float = 0.05) -> pd.DataFrame:
    """Trial records: 2 models × 2 prompts × ``tasks`` tasks × ``trials`` trials, some infra errors,
    one task with fewer trials (so some k cover only part of the tasks)."""
    rng = np.random.default_rng(seed)
    rows = []
    for model in ("m1", "m2"):
        for prompt in ("p1", "p2"):
            p = rng.beta(2, 1, tasks)
            for t in range(tasks):
                for i in range(trials if t else trials // 2):
                    roll = rng.random()
                    outcome = (
                        "infra_error" if roll < infra else ("pass" if rng.random() < p[t] else "wrong_state")
                    )
                    rows.append(
                        {
                            "run_id": f"{model}-{prompt}",
                            "model": model,
                            "prompt_hash": prompt,
                            "task": f"t{t:02d}",
                            "trial": i,
                            "passed": outcome == "pass",
                            "outcome": outcome,
                        }
                    )
    return pd.DataFrame(rows)


BY = ("model", "prompt_hash")


# ---- counts tables as input ---------------------------------------------------------------------


@pytest.mark.parametrize("infra", ["exclude", "fail"])
@pytest.mark.parametrize("by", [("model",), ("prompt_hash",), (), BY])
def test_counts_of_a_counts_table_equal_counts_of_the_trials(by: tuple[str, ...], infra: str) -> None:
    df = suite(0)
    table = counts(df, by=BY)  # counted once, with infra="exclude"
    pd.testing.assert_frame_equal(counts(table, by=by, infra=infra), counts(df, by=by, infra=infra))


def test_a_minimal_counts_table_from_elsewhere() -> None:
    table = pd.DataFrame({"task": ["b", "a", "a"], "n": [4, 2, 2], "c": [1, 2, 1]})
    got = counts(table, by=())
    assert got.to_dict("list") == {"task": ["a", "b"], "n": [4, 4], "c": [3, 1], "n_infra": [0, 0]}


@pytest.mark.parametrize(
    ("table", "message"),
    [
        (pd.DataFrame({"task": ["a"], "n": [2], "c": [3]}), "c .successes. exceeds n"),
        (pd.DataFrame({"task": ["a"], "n": [-1], "c": [0]}), "whole numbers ≥ 0"),
        (pd.DataFrame({"task": ["a"], "n": [2.5], "c": [0]}), "whole numbers ≥ 0"),
        (pd.DataFrame({"task": ["a"], "n": [np.nan], "c": [0]}), "without missing values"),
        (pd.DataFrame({"task": ["a"], "n": ["2"], "c": [0]}), "must hold whole numbers"),
        (pd.DataFrame({"n": [2], "c": [0]}), r"lacks columns \['task'\]"),
        (pd.DataFrame({"task": [], "n": [], "c": []}), "no rows"),
    ],
)
def test_bad_counts_tables_say_what_is_wrong(table: pd.DataFrame, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        counts(table, by=())


def test_counts_table_lacking_a_grouping_column_says_so() -> None:
    with pytest.raises(ValueError, match=r"lacks columns \['model'\].*passk_nb.counts"):
        counts(pd.DataFrame({"task": ["a"], "n": [2], "c": [1]}), by="model")


@pytest.mark.parametrize("infra", ["exclude", "fail"])
@pytest.mark.parametrize("method", ["korn-graubard", "t", "bootstrap"])
def test_summarize_and_curve_of_a_counts_table_equal_those_of_the_trials(method: str, infra: str) -> None:
    df = suite(1)
    table = counts(df)
    options = {"by": BY, "n_boot": 200, "method": method, "infra": infra}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pd.testing.assert_frame_equal(summarize(table, k=3, **options), summarize(df, k=3, **options))
        pd.testing.assert_frame_equal(curve(table, **options), curve(df, **options))


def test_every_analysis_accepts_a_counts_table() -> None:
    df = suite(2, infra=0.0)
    table = counts(df)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for run in (
            lambda d: compare(d, a="p1", b="p2", k=2, n_boot=100),
            lambda d: flips(d, a="p1", b="p2"),
            lambda d: rank(d, k=1, by=(), n_boot=100),
            lambda d: noise_floor(d, k=1, by=BY),
            lambda d: forecast(d, ks=(1, 8), by=BY, n_boot=50),
            lambda d: plan(d[d["model"] == "m1"], k=1, by=(), tasks=[10], trials=[4]),
        ):
            pd.testing.assert_frame_equal(run(table), run(df))


def test_summarize_counts_the_trials_once(monkeypatch) -> None:
    """The infra_error sensitivity columns come from the same counts (no second pass over the trials)."""
    calls = []
    count_trials = _grouping.count_trials

    def spy(*args, **kwargs):
        calls.append(args[1:])
        return count_trials(*args, **kwargs)

    monkeypatch.setattr(_grouping, "count_trials", spy)
    out = summarize(suite(3), k=2, by=BY, n_boot=0)
    assert out["pass^k_infra_fail"].notna().any()  # there were infra errors to bound
    assert calls == [(BY, "exclude")]


# ---- curve: every k in one pass ------------------------------------------------------------------


@pytest.mark.parametrize("method", ["korn-graubard", "t", "bootstrap"])
@pytest.mark.parametrize("by", [BY, ("model",), (*BY, "task")])
def test_curve_equals_summarize_at_every_k(method: str, by: tuple[str, ...]) -> None:
    """Values and intervals exactly (bootstrap: one draw of each group's tasks, shared by every k)."""
    df = suite(4)
    options = {"by": by, "n_boot": 300, "seed": 7, "method": method}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = curve(df, **options)
        ks = sorted(set(got["k"]))
        assert ks == list(range(1, 13 if by == ("model",) else 7))  # by model: two prompts pooled
        assert got["partial"].any()  # the short task drops out at k = 4..6
        for k in ks:
            expected = summarize(df, k=k, **options)
            for metric in METRICS:
                rows = got[(got["k"] == k) & (got["metric"] == metric)].reset_index(drop=True)
                np.testing.assert_array_equal(rows["value"], expected[metric])
                np.testing.assert_array_equal(rows["se_fixed"], expected[f"{metric}_se_fixed"])
                np.testing.assert_array_equal(rows["n_tasks_covered"], expected["n_tasks_covered"])
                assert rows["ci_method"].tolist() == expected["ci_method"].tolist()
                for end in ("lo", "hi"):
                    np.testing.assert_array_equal(rows[end], expected[f"{metric}_{end}"])


@pytest.mark.parametrize("infra", [0.0, 0.1])
def test_curve_draws_the_bootstrap_once_for_all_k(monkeypatch, infra: float) -> None:
    """Every k shares one resampling of the group's tasks (one interval call), not one per k, also
    when the larger k cover fewer tasks (infra errors leave some tasks with n < 10)."""
    from passk_nb.stats import summary as summary_module

    calls = []
    cell_bootstrap = summary_module.cell_bootstrap

    def spy(*args, **kwargs):
        calls.append(args[3].shape)  # the values: one column per k and metric
        return cell_bootstrap(*args, **kwargs)

    monkeypatch.setattr(summary_module, "cell_bootstrap", spy)
    df = suite(5, trials=10, infra=infra)
    df = df[df["task"] != "t00"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = curve(df, ks=range(1, 11), by=BY, n_boot=200, method="bootstrap")
    assert out["partial"].any() == (infra > 0)
    assert len(calls) == 1 and calls[0][1] == 10 * len(METRICS)  # one call, all k side by side


def test_the_bootstrap_of_cells_is_the_bootstrap_of_tasks() -> None:
    """cell_bootstrap (resampled per distinct (n, c)) equals the plain task bootstrap with the same
    draw: tasks in cell order, each resample's mean over the covered tasks it drew."""
    from passk_nb.stats.intervals import _draws, cell_bootstrap

    rng = np.random.default_rng(3)
    n_groups, n_boot, ci = 3, 400, 0.9
    rows = rng.random((6, 2))  # distinct per-task values (rows), 2 columns
    covered = np.array(
        [[True, True], [True, False], [True, True], [True, False], [True, True], [False, False]]
    )
    cell_group = np.array([0, 0, 0, 1, 1, 2, 2, 2])
    cell_row = np.array([0, 1, 5, 2, 3, 0, 3, 4])
    weight = np.array([3, 2, 1, 1, 4, 5, 1, 1])
    lo, hi = cell_bootstrap(
        cell_group, cell_row, weight, rows, n_groups, ci=ci, n_boot=n_boot, seed=11, covered=covered
    )
    for g in range(n_groups):
        task_rows = np.repeat(cell_row[cell_group == g], weight[cell_group == g])  # tasks in cell order
        values, cover = rows[task_rows], covered[task_rows].astype(float)
        (_, counts), *_ = list(_draws(task_rows.size, n_boot, 11))
        with np.errstate(invalid="ignore", divide="ignore"):
            means = (counts @ (values * cover)) / (counts @ cover)
        for j in range(2):
            if cover[:, j].sum() < 2:
                assert np.isnan(lo[g, j]) and np.isnan(hi[g, j])
                continue
            expected = np.nanquantile(means[:, j], [(1 - ci) / 2, (1 + ci) / 2])
            np.testing.assert_allclose([lo[g, j], hi[g, j]], expected, rtol=1e-12)
    assert np.isnan(lo[1, 1])  # group 1 has a single covered task in column 1


def test_bootstrap_curve_where_k_exceeds_every_n_of_a_group() -> None:
    """A group whose tasks all have fewer than k trials gets no interval at that k (NaN, "none"),
    quietly (no numpy warning about all-NaN resamples); the other group's interval is unchanged."""
    df = suite(8, infra=0.0)
    short = df[(df["model"] == "m2") & (df["trial"] < 1)]  # m2: 1 trial per prompt, 2 per task
    df = pd.concat([df[df["model"] == "m1"], short], ignore_index=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # partial curves
        warnings.simplefilter("error", RuntimeWarning)
        got = curve(df, ks=range(1, 5), by=("model",), n_boot=300, method="bootstrap")
        alone = curve(df[df["model"] == "m1"], ks=range(1, 5), by=("model",), n_boot=300, method="bootstrap")
    m2 = got[(got["model"] == "m2") & (got["k"] >= 3)]
    assert m2["lo"].isna().all() and m2["hi"].isna().all() and (m2["ci_method"] == "none").all()
    assert got[(got["model"] == "m2") & (got["k"] <= 2)]["lo"].notna().all()
    pd.testing.assert_frame_equal(got[got["model"] == "m1"].reset_index(drop=True), alone)


@pytest.mark.parametrize("order", ["sorted", "shuffled"])
def test_categorical_keys_give_the_tables_of_string_keys(order: str) -> None:
    """The categorical fast path (codes used as they are, no factorising) gives the same tables
    as string, object and arrow-string keys: unused categories left out, missing keys last, rows in
    the same order (categories in sorted order; otherwise in category order, same values)."""
    df = suite(6, infra=0.1).drop(columns="run_id")
    df.loc[df.index % 97 == 0, "model"] = None  # a few trials with no model: a group of their own
    if order == "shuffled":
        df = df.sample(frac=1, random_state=2)
    keys = ["model", "prompt_hash", "task", "outcome"]
    as_str = df.astype({col: "str" for col in keys})
    as_str["model"] = as_str["model"].where(df["model"].notna())
    as_object = df.astype({col: object for col in keys})
    as_object["model"] = as_object["model"].where(df["model"].notna(), None)
    categories = {col: sorted(set(df[col].dropna())) + ["zz-unused"] for col in keys}
    as_category = df.astype({col: pd.CategoricalDtype(categories[col]) for col in keys})
    reversed_categories = df.astype({col: pd.CategoricalDtype(categories[col][::-1]) for col in keys})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        runs = {
            "summarize": lambda d: summarize(d, k=2, by=BY, n_boot=0),
            "summarize, bootstrap": lambda d: summarize(d, k=2, by=BY, n_boot=200, method="bootstrap"),
            "curve": lambda d: curve(d, by=BY, n_boot=200),
            "counts": lambda d: counts(d, by=BY),
        }
        for name, run in runs.items():
            expected = run(as_str)
            assert expected["model"].isna().iloc[-1] if name != "curve" else expected["model"].isna().any()
            for frame in (as_object, as_category, reversed_categories):
                got = run(frame)
                got = got.astype({col: expected[col].dtype for col in [*BY, "task"] if col in got})
                if frame is reversed_categories:  # rows in category order: reversed within each key
                    order = {"counts": [*BY, "task"], "curve": [*BY, "metric", "k"]}.get(name, list(BY))
                    got = got.sort_values(order, na_position="last", kind="stable").reset_index(drop=True)
                # tasks in another order: sums over tasks may differ in the last bit
                exact = frame is not reversed_categories
                pd.testing.assert_frame_equal(got, expected, check_exact=exact, rtol=1e-12, obj=name)


# ---- flips: every task's exact test at once ------------------------------------------------------


def scipy_flips(df: pd.DataFrame, alpha: float = 0.05) -> pd.DataFrame:
    """The per-task scipy loop flips() replaced: p-value, min_p and Tarone's screen per task."""
    table = counts(df, by=BY)
    a = table[table["prompt_hash"] == "p1"]
    b = table[table["prompt_hash"] == "p2"]
    paired = a.merge(b, on=["model", "task"], suffixes=("_a", "_b"))
    paired = paired[(paired["n_a"] > 0) & (paired["n_b"] > 0)].sort_values(["model", "task"])

    def fisher(c_a: int, n_a: int, c_b: int, n_b: int) -> float:
        return float(sps.fisher_exact([[c_a, n_a - c_a], [c_b, n_b - c_b]], alternative="two-sided").pvalue)

    rows = []
    for c_a, n_a, c_b, n_b in paired[["c_a", "n_a", "c_b", "n_b"]].to_numpy():
        s = c_a + c_b
        reachable = min(fisher(x, n_a, s - x, n_b) for x in range(max(0, s - n_b), min(n_a, s) + 1))
        rows.append((fisher(c_a, n_a, c_b, n_b), fisher(n_a, n_a, 0, n_b), reachable <= alpha))
    return pd.DataFrame(rows, columns=["p_value", "min_p", "tested"])


@pytest.mark.parametrize("seed", range(4))
def test_flips_p_values_equal_the_scipy_loop(seed: int) -> None:
    rng = np.random.default_rng(seed)
    rows = []
    for t in range(60):
        p_a = rng.random()
        p_b = p_a if rng.random() < 0.7 else rng.random()
        for prompt, p, n in (("p1", p_a, rng.integers(1, 13)), ("p2", p_b, rng.integers(1, 13))):
            for i in range(n):
                passed = bool(rng.random() < p)
                rows.append(
                    {
                        "model": "m",
                        "prompt_hash": prompt,
                        "task": f"t{t:02d}",
                        "trial": i,
                        "run_id": prompt,
                        "passed": passed,
                        "outcome": "pass" if passed else "wrong_state",
                    }
                )
    df = pd.DataFrame(rows)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = flips(df, a="p1", b="p2", by=("model",))
    expected = scipy_flips(df)
    np.testing.assert_allclose(got["p_value"], expected["p_value"], rtol=1e-12, atol=0)
    np.testing.assert_allclose(got["min_p"], expected["min_p"], rtol=1e-12, atol=0)
    np.testing.assert_array_equal(got["tested"], expected["tested"])


@pytest.mark.parametrize("test", ["fisher", "boschloo"])
def test_tarones_bound_from_the_support_ends_equals_the_minimum_over_every_split(test: str) -> None:
    """Speed (#47 §3): Tarone's bound from the two ends of each margin's support, not every split."""
    from passk_nb.stats.exact import boschloo_exact_2x2, fisher_exact_2x2
    from passk_nb.stats.paired import exact_tests

    exact = fisher_exact_2x2 if test == "fisher" else boschloo_exact_2x2
    rng = np.random.default_rng(7)
    top = 40 if test == "fisher" else 9
    n_a, n_b = rng.integers(1, top, size=(2, 80))
    c_a, c_b = rng.binomial(n_a, 0.5), rng.binomial(n_b, rng.random(80))
    _, _, bound = exact_tests(test, np.column_stack([c_a, n_a, c_b, n_b]))
    every_split = [
        min(float(exact(x, a, s - x, b)) for x in range(max(0, s - b), min(a, s) + 1))
        for a, b, s in zip(n_a, n_b, c_a + c_b, strict=True)
    ]
    # Fisher's p of a table does not depend on the others in its call; Boschloo's sums a matrix
    # product whose rounding does (one ulp)
    np.testing.assert_allclose(bound, every_split, rtol=0 if test == "fisher" else 1e-14, atol=0)


def test_flips_tests_a_bounded_number_of_tables_per_task(monkeypatch: pytest.MonkeyPatch) -> None:
    """flips() at 10M rows did not finish (#47 §3): Tarone's bound tested every split of every
    margin, a number of tables that grows with the trials. Now at most four tables per task."""
    from passk_nb.stats import paired

    tables = []

    def counted(c_a, n_a, c_b, n_b):  # type: ignore[no-untyped-def]
        tables.append(np.size(c_a))
        return fisher_exact(c_a, n_a, c_b, n_b)

    fisher_exact = paired._EXACT["fisher"]
    monkeypatch.setitem(paired._EXACT, "fisher", counted)
    df = suite(3, tasks=20, trials=120, infra=0.0)
    out = flips(df, a="p1", b="p2")
    assert sum(tables) <= 4 * len(out)


def per_task_summary(table: pd.DataFrame, k: int, method: str, ci: float = 0.95) -> pd.DataFrame:
    """The population interval of each model at k the straightforward way: one array of per-task
    values over the covered tasks (n ≥ k) into the per-task korn_graubard / student_t (what
    summarize did before its spread came from weighted (group, n, c) cells)."""
    from passk_nb.stats.estimators import pass_at_k, pass_hat_k
    from passk_nb.stats.intervals import korn_graubard, plugin_task_variance, student_t

    covered = table[table["n"] >= k]
    models = sorted(table["model"].unique())
    gid = covered["model"].map({m: i for i, m in enumerate(models)}).to_numpy()
    n, c = covered["n"].to_numpy(), covered["c"].to_numpy()
    values = np.column_stack([pass_at_k(n, c, k), pass_hat_k(n, c, k)])
    floor = np.column_stack([plugin_task_variance(n, n - c, k), plugin_task_variance(n, c, k)])
    interval = korn_graubard if method == "korn-graubard" else student_t
    lo, hi = interval(gid, values, floor, len(models), ci=ci)
    sizes = np.bincount(gid, minlength=len(models))
    declined = (sizes >= 1) & (sizes < 5)
    lo[declined], hi[declined] = np.nan, np.nan
    lo, hi = np.clip(lo, 0.0, 1.0), np.clip(hi, 0.0, 1.0)
    return pd.DataFrame(
        {
            "model": models,
            "n_tasks_covered": sizes,
            **{f"{metric}_lo": lo[:, i] for i, metric in enumerate(METRICS)},
            **{f"{metric}_hi": hi[:, i] for i, metric in enumerate(METRICS)},
        }
    )


@pytest.mark.parametrize("method", ["korn-graubard", "t"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_cell_intervals_equal_the_per_task_intervals_at_every_k(method: str, seed: int) -> None:
    """summarize and curve take the spread of per-task values from weighted (group, n, c) cells; the
    intervals equal those of per-task arrays to 1e-12 at every k, once made monotone in k (the
    running max of pass@k's bounds, min of pass^k's, while the covered tasks stay the same), on
    tables with mixed coverage (tasks with n < k), groups declined at some k and groups with no
    covered task."""
    rng = np.random.default_rng(seed)
    rows = []
    for g, tasks in enumerate([40, 25, 9, 6, 3]):
        n = rng.integers(0, 13, tasks)
        n[: tasks // 3] = 12  # every group covered up to k = 12 by some tasks
        p = rng.beta(1.5, 1.0, tasks)
        rows.append(
            pd.DataFrame(
                {"model": f"m{g}", "task": [f"t{t}" for t in range(tasks)], "n": n, "c": rng.binomial(n, p)}
            )
        )
    table = pd.concat(rows, ignore_index=True)
    ks = list(range(1, 13))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = curve(table, ks=ks, by="model", method=method)
        running: dict[str, np.ndarray] = {}
        previous = None
        for k in ks:
            expected = per_task_summary(table, k, method)
            same = None if previous is None else expected["n_tasks_covered"].to_numpy() == previous
            previous = expected["n_tasks_covered"].to_numpy()
            for metric, keep in (("pass@k", np.fmax), ("pass^k", np.fmin)):
                for end in ("lo", "hi"):
                    column, bound = f"{metric}_{end}", expected[f"{metric}_{end}"].to_numpy()
                    if same is not None:
                        bound = np.where(same, keep(bound, running[column]), bound)
                    running[column] = bound
                    expected[column] = bound
            out = summarize(table, k=k, by="model", method=method)
            assert out["n_tasks_covered"].tolist() == expected["n_tasks_covered"].tolist()
            for metric in METRICS:
                rows_k = got[(got["k"] == k) & (got["metric"] == metric)]
                for end in ("lo", "hi"):
                    want = expected[f"{metric}_{end}"].to_numpy()
                    np.testing.assert_allclose(out[f"{metric}_{end}"].to_numpy(), want, rtol=0, atol=1e-12)
                    np.testing.assert_allclose(rows_k[end].to_numpy(), want, rtol=0, atol=1e-12)
    lo = got.loc[got["metric"] == "pass^k", "lo"]
    assert lo.notna().sum() > 20 and lo.isna().sum() > 5  # intervals given and declined both tested


def test_no_module_of_the_package_is_in_an_import_cycle() -> None:
    import grimp  # import-linter's graph builder

    graph = grimp.build_graph("passk_nb")
    modules = sorted(graph.modules)
    cycles = [
        (a, b)
        for i, a in enumerate(modules)
        for b in modules[i + 1 :]
        if graph.find_shortest_chain(a, b) and graph.find_shortest_chain(b, a)
    ]
    assert not cycles, f"modules that import each other: {cycles}"


def test_counts_of_a_folder_is_counts_of_its_records(tmp_path) -> None:
    from passk_nb.data.store import load, write_part

    rows = suite(5, tasks=4, trials=3).assign(suite="s")
    for run_id, part in rows.groupby("run_id"):
        write_part(part.to_dict("records"), tmp_path, str(run_id))
    pd.testing.assert_frame_equal(counts(tmp_path, by=BY), counts(load(tmp_path), by=BY))
    with pytest.raises(ValueError, match=r"engine must be one of \['auto', 'duckdb', 'pandas'\]"):
        counts(tmp_path, engine="spark")


def test_curve_evaluates_the_fixed_task_variance_once_per_k(monkeypatch: pytest.MonkeyPatch) -> None:
    """Speed (#47 §3): pass@k's cells (n, n − c) and pass^k's (n, c) at every k go through one call,
    so the cells they share are computed once and the Jeffreys intervals once for every k; the
    values stay those of each k's summarize."""
    from passk_nb.stats import summary

    calls = []
    original = summary.fixed_task_variances

    def counted(n, c, ks):  # type: ignore[no-untyped-def]
        calls.append(list(ks))
        return original(n, c, ks)

    monkeypatch.setattr(summary, "fixed_task_variances", counted)
    df = suite(4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = curve(df, ks=[1, 2, 3], by=BY)
        monkeypatch.setattr(summary, "fixed_task_variances", original)
        expected = summarize(df, k=2, by=BY)
    assert calls == [[1, 2, 3]]
    at_2 = got[(got["k"] == 2) & (got["metric"] == "pass^k")]["se_fixed"].to_numpy()
    np.testing.assert_array_equal(at_2, expected["pass^k_se_fixed"].to_numpy())
