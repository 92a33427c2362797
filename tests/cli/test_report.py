"""`passk report` and `passk runs`: filters, grouping, every format parsing back, the HTML page."""

import io
import json
import shutil
import subprocess
import warnings
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import passk_nb
from passk_nb.cli.main import main
from passk_nb.data.ids import IDENTITY_COLUMNS
from passk_nb.data.records import frame_from_records
from tests.helpers.fake_servers import require
from tests.helpers.records import spy_parquet_reads

HOSTILE = "<script>alert('pwned')</script><img src=https://evil.example/x.png onerror=alert(1)>"
CHROMIUM = Path("/usr/bin/chromium")


def records() -> pd.DataFrame:
    """Two models x two prompts x three tasks x four trials, with claims, agent errors and hostile text."""
    rng = np.random.default_rng(7)
    rows = []
    for model, skill in (("big", 0.9), ("small", 0.4)):
        for prompt in ("default", "strict"):
            for task in ("t1", "t2", "t3"):
                for trial in range(4):
                    passed = bool(rng.random() < skill)
                    outcome = "pass" if passed else "wrong_state"
                    answer, claims = "Done as asked.", "[]"
                    if not passed and trial == 1:
                        answer = "Your order O1003 has been cancelled."  # claimed, not done
                        claims = json.dumps([{"kind": "cancel", "ids": ["O1003"], "text": answer}])
                    if not passed and trial == 2 and model == "small":
                        outcome, answer = "agent_error", None
                    if not passed and trial == 3:
                        answer = HOSTILE
                    transcript = json.dumps([{"kind": "reply", "role": "assistant", "content": HOSTILE}])
                    rows.append(
                        {
                            "run_id": f"{model}-{prompt}",
                            "suite": "orders",
                            "provider": "test",
                            "model": model,
                            "prompt_name": prompt,
                            "prompt_hash": f"{prompt}-hash"[:12],
                            "task": task,
                            "trial": trial,
                            "passed": passed,
                            "outcome": outcome,
                            "final_answer": answer,
                            "false_claims": claims,
                            "transcript": transcript,
                        }
                    )
    return frame_from_records(rows)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    path = tmp_path_factory.mktemp("report") / "records.parquet"
    records().to_parquet(path)
    return path


def passk(capsys, *argv) -> str:
    assert main([str(a) for a in argv]) == 0
    out, err = capsys.readouterr()
    assert "passk: error" not in err
    return out


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_csv_and_json_parse_back_to_summarize(folder, capsys, fmt, tmp_path):
    df = passk_nb.load(folder)
    expected = passk_nb.summarize(df, k=2, n_boot=300, seed=3)
    out_file = tmp_path / f"report.{fmt}"
    passk(capsys, "report", folder, "--format", fmt, "--n-boot", 300, "--seed", 3, "--out", out_file)
    if fmt == "csv":
        got = pd.read_csv(out_file).fillna({"suite_hash": ""})  # an unknown suite version: an empty cell
    else:
        doc = json.loads(out_file.read_text())
        assert (
            doc["k"] == 2
            and doc["ci"] == 0.95
            and doc["by"] == list(expected.columns[: list(expected.columns).index("k")])
        )
        got = pd.DataFrame(doc["rows"])
    numbers = [c for c in expected.columns if pd.api.types.is_numeric_dtype(expected[c])]
    assert len(got) == len(expected) == 4  # default: one row per model and prompt, never pooled
    for column in numbers:
        np.testing.assert_allclose(got[column].astype(float), expected[column].astype(float), rtol=1e-12)
    for column in expected.columns.difference(numbers):
        assert got[column].astype(str).tolist() == expected[column].astype(str).tolist()
    flags = passk_nb.stats.claimed_unperformed_action(df)
    by = ["model", "prompt_name"]
    claimed = df.assign(flag=flags).groupby(by)["flag"].sum().to_numpy()
    agent = df.assign(flag=df["outcome"] == "agent_error").groupby(by)["flag"].sum().to_numpy()
    assert got["n_claimed_unperformed"].tolist() == claimed.tolist() and claimed.sum() > 0
    assert got["n_agent_errors"].tolist() == agent.tolist() and agent.sum() > 0


def test_stdout_formats_parse_too(folder, capsys):
    csv = passk(capsys, "report", folder, "--format", "csv", "--n-boot", 0)
    assert len(pd.read_csv(io.StringIO(csv))) == 4
    doc = json.loads(passk(capsys, "report", folder, "--format", "json", "--n-boot", 0))
    assert len(doc["rows"]) == 4 and doc["rows"][0]["pass@k_lo"] is None  # NaN -> null


def test_table_labels_rows_with_only_the_fields_that_differ(folder, capsys):
    out = passk(capsys, "report", folder, "--n-boot", 0, "--where", "model=small")
    lines = out.splitlines()
    # what every row shares is said once: the fields, and the counts that are the same in each row
    shared = "suite: orders, provider/model: test/small, config: default"
    assert lines[0] == f"{shared}, infra excl.: 0, claimed not done: 2"
    header = [c.strip() for c in lines[1].split(" | ")]
    assert header[:2] == ["prompt", "pass@2"]  # the model is the same in every row shown
    rows = [line for line in lines[3:] if " | " in line]
    assert [r.split(" | ")[0].strip() for r in rows] == ["default (default-hash)", "strict (strict-hash)"]
    assert header[-1] == "agent errors" and "claimed not done" not in header  # 3 and 2: it stays


def test_sort_orders_the_rows_from_the_best(tmp_path, capsys):
    passes = {"a-weak": (1, 0, 0, 1, 0), "b-strong": (4, 4, 3, 4, 4), "c-middle": (4, 2, 2, 3, 1)}
    path = tmp_path / "records.parquet"
    frame_from_records(
        {"run_id": m, "suite": "s", "task": f"t{t}", "trial": i, "model": m, "passed": i < c,
         "outcome": "pass" if i < c else "wrong_state"}
        for m, cs in passes.items() for t, c in enumerate(cs) for i in range(4)
    ).to_parquet(path)  # fmt: skip
    plain = pd.read_csv(io.StringIO(passk(capsys, "report", path, "--format", "csv", "--n-boot", 0)))
    assert plain["model"].tolist() == ["a-weak", "b-strong", "c-middle"]  # by configuration
    for metric in ("pass^k", "pass@k"):
        csv = passk(capsys, "report", path, "--format", "csv", "--n-boot", 0, "--sort", metric)
        ranked = pd.read_csv(io.StringIO(csv))
        assert ranked["model"].tolist() == ["b-strong", "c-middle", "a-weak"]
        assert ranked[metric].is_monotonic_decreasing
    table = passk(capsys, "report", path, "--n-boot", 0, "--sort", "pass^k").splitlines()
    assert [line.split(" | ")[0].strip("/ ") for line in table[3:6]] == ["b-strong", "c-middle", "a-weak"]


def test_where_is_or_within_a_column_and_across_columns_and(folder, capsys):
    df = passk_nb.load(folder)
    argv = ["report", folder, "--format", "csv", "--n-boot", 0, "--by", "model"]
    one = pd.read_csv(
        io.StringIO(passk(capsys, *argv, "--where", "prompt_name=strict", "--where", "task=t1"))
    )
    kept = df[(df["prompt_name"] == "strict") & (df["task"] == "t1")]
    assert one["trials"].tolist() == kept.groupby("model").size().tolist() == [4, 4]
    both = pd.read_csv(io.StringIO(passk(capsys, *argv, "--where", "model=big", "--where", "model=small")))
    assert both["model"].tolist() == ["big", "small"] and both["trials"].sum() == len(df)


@pytest.mark.parametrize("column", ["run_id", *IDENTITY_COLUMNS, "task"])
def test_where_filters_on_the_run_every_identity_column_and_the_task(column, tmp_path, capsys):
    df = records()
    kept = df["model"] == "big"
    df[column] = df[column].astype(str).where(~kept, "kept-" + df[column].astype(str))
    path = tmp_path / "records.parquet"
    df.to_parquet(path)
    argv = ["report", path, "--format", "csv", "--n-boot", 0, "--by", "none"]
    where = [arg for value in sorted(set(df.loc[kept, column])) for arg in ("--where", f"{column}={value}")]
    out = pd.read_csv(io.StringIO(passk(capsys, *argv, *where)))
    assert out["trials"].tolist() == [int(kept.sum())]


def test_by_chooses_the_rows_and_none_pools_all(folder, capsys):
    argv = ["report", folder, "--format", "csv", "--n-boot", 0]
    per_task = pd.read_csv(io.StringIO(passk(capsys, *argv, "--by", "model,task")))
    assert len(per_task) == 6 and set(per_task["ci_method"]) == {"none"}
    assert main(["report", str(folder), "--n-boot", "0", "--by", "model"]) == 0
    err = capsys.readouterr().err
    assert err.startswith("passk: warning: --by model pools trials whose prompt_name, prompt_hash differ")
    pooled = pd.read_csv(io.StringIO(passk(capsys, *argv, "--by", "none")))
    assert len(pooled) == 1 and pooled.loc[0, "trials"] == 48
    out = passk(capsys, "report", folder, "--n-boot", 0, "--by", "none")
    assert out.splitlines()[0] == "all trials pooled (--by none)"


def test_markdown_is_a_pipe_table(folder, capsys):
    out = passk(capsys, "report", folder, "--format", "markdown", "--n-boot", 0, "--quiet")
    table = [line for line in out.splitlines() if line.startswith("|")]
    assert table[1].startswith("|---|") and len(table) == 2 + 4
    assert all(line.count("|") == table[0].count("|") for line in table)


def test_default_k_is_two_or_the_trials_there_are(tmp_path, capsys):
    passk_nb.run("scripted", trials=1, out=tmp_path, progress=False)
    assert "pass@1 " in passk(capsys, "report", tmp_path, "--n-boot", 0)
    assert main(["run", "--trials", "1", "--out", str(tmp_path / "b"), "--no-progress", "--n-boot", "0"]) == 0
    assert "pass@1 " in capsys.readouterr().out


def test_a_group_of_only_infra_errors_says_so(tmp_path, capsys):
    df = records()
    df.loc[df["model"] == "small", ["outcome", "passed"]] = ["infra_error", False]
    path = tmp_path / "r.parquet"
    df.to_parquet(path)
    one = ["--where", "prompt_name=default", "--by", "model"]  # one configuration per model
    out = passk(capsys, "report", path, "--n-boot", 0, *one, "--format", "csv")
    assert main(["report", str(path), "--n-boot", "0", *one]) == 0
    err = capsys.readouterr().err
    assert err.startswith("passk: warning: every trial of model=small was an infrastructure error")
    assert "no task has" not in err and len(err.splitlines()) == 1
    report = pd.read_csv(io.StringIO(out))
    assert report["n_infra_excluded"].tolist() == [0, 12] and np.isnan(report.loc[1, "pass^k"])


def test_runs_lists_each_run(folder, tmp_path, capsys):
    passk_nb.run("scripted", trials=2, out=tmp_path, progress=False)
    passk_nb.run("scripted", trials=1, out=tmp_path, progress=False, prompt="strict")
    out = passk(capsys, "runs", tmp_path)
    lines = out.splitlines()
    header = [c.strip() for c in lines[0].split(" | ")]
    assert header == [
        "run",
        "provider/model",
        "prompt",
        "config",
        "suite",
        "trials done/expected",
        "infra errors",
        "started",
        "version",
    ]
    rows = [[c.strip() for c in line.split(" | ")] for line in lines[2:4]]
    assert sorted(r[5] for r in rows) == ["10/10", "5/5"]
    assert {r[2].split(" ")[0] for r in rows} == {"default", "strict"}
    assert lines[4].startswith("2 runs, 15 trials in ")


class _Collector(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.attrs, self.text = [], [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs.extend((tag, name, value or "") for name, value in attrs)

    def handle_data(self, data):
        self.text.append(data)


@pytest.fixture(scope="module")
def html_report(folder, tmp_path_factory):
    out = tmp_path_factory.mktemp("html") / "report.html"
    assert main(["report", str(folder), "--format", "html", "--out", str(out), "--n-boot", "200"]) == 0
    return out


def test_html_report_is_self_contained_and_escapes_hostile_text(html_report):
    page = html_report.read_text()
    parsed = _Collector()
    parsed.feed(page)
    links = [(t, n, v) for t, n, v in parsed.attrs if n in ("src", "href")]
    assert links and all(v.startswith("data:image/png;base64,") for _, _, v in links)
    assert not any(v.startswith(("http:", "https:", "//")) for _, _, v in parsed.attrs)
    assert "script" not in parsed.tags and "onerror" not in {n for _, n, _ in parsed.attrs}
    text = "".join(parsed.text)
    assert HOSTILE in text  # shown as text, exactly
    assert parsed.tags.count("img") == 4  # overview, curve, heatmap, outcomes
    assert parsed.tags.count("table") == 2 and "claimed not done" in text and "pass^2" in text
    assert "default (default-hash)" in text and "small" in text
    failed = int((~records()["passed"]).sum())
    assert page.count("<details><summary>") == min(25, failed) and failed > 0


def test_html_report_renders_in_a_headless_browser(html_report, tmp_path):
    require(CHROMIUM.exists(), "Debian's chromium (apt-get install chromium; .ci/run installs it)")
    shot = tmp_path / "shot.png"
    subprocess.run(
        [
            str(CHROMIUM),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={tmp_path / 'chromium-profile'}",
            "--window-size=1200,2400",
            f"--screenshot={shot}",
            html_report.as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    import matplotlib.image

    pixels = matplotlib.image.imread(shot)
    assert pixels.shape[0] >= 2000 and pixels.std() > 0.05  # something is drawn, not a blank page
    assert shutil.which(str(CHROMIUM))


def priced_records() -> pd.DataFrame:
    """Five tasks; big: every trial reported 1000 in / 100 out tokens except two; small: no token counts."""
    base = records()
    more = base[base["task"].isin(["t1", "t2"])].assign(
        task=lambda d: d["task"].map({"t1": "t4", "t2": "t5"})
    )
    df = pd.concat([base, more], ignore_index=True)
    big = df["model"] == "big"
    df["input_tokens"] = np.where(big, 1000.0, np.nan)
    df["output_tokens"] = np.where(big, 100.0, np.nan)
    unreported = df.index[big][:2]
    df.loc[unreported, ["input_tokens", "output_tokens"]] = np.nan
    return df


def test_prices_add_cost_columns_computed_from_the_tokens(tmp_path, capsys):
    df = priced_records()
    path = tmp_path / "priced.parquet"
    df.to_parquet(path)
    argv = ["report", path, "--by", "model", "--n-boot", "200", "--price-in", "3", "--price-out", "15"]
    report = pd.read_csv(io.StringIO(passk(capsys, *argv, "--format", "csv"))).set_index("model")
    per_trial = (1000 * 3 + 100 * 15) / 1e6
    assert report.loc["big", "cost_usd_per_trial"] == pytest.approx(per_trial)
    assert report.loc["big", "n_priced"] == 38 and report.loc["big", "n_without_tokens"] == 2
    assert report.loc["big", "cost_usd_total"] == pytest.approx(38 * per_trial)
    assert report.loc["big", "cost_usd_per_reliable_success"] == pytest.approx(
        2 * per_trial / report.loc["big", "pass^k"]
    )
    assert report.loc["big", "cost_usd_per_reliable_success_lo"] == pytest.approx(
        2 * per_trial / report.loc["big", "pass^k_hi"]
    )
    assert report.loc["small", "n_priced"] == 0 and np.isnan(report.loc["small", "cost_usd_per_trial"])
    assert report["price_in"].tolist() == [3.0, 3.0] and report["price_out"].tolist() == [15.0, 15.0]
    text = passk(capsys, *argv)
    big_line = next(line for line in text.splitlines() if line.startswith("big"))
    small_line = next(line for line in text.splitlines() if line.startswith("small"))
    assert f"{per_trial:.4g} (2 trials without token counts)" in big_line
    assert "no token counts" in small_line and "0.0" not in small_line.split("|")[-1]
    assert "cost/reliable success (USD)" in text and "never stored" in text


def test_without_prices_the_report_has_no_cost(folder, capsys):
    out = passk(capsys, "report", folder, "--n-boot", 0, "--format", "csv")
    assert "cost_usd" not in out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--price-in", "3"], "give both --price-in and --price-out"),
        (["--price-in", "-1", "--price-out", "2"], "a price is a finite number"),
        (["--price-in", "cheap", "--price-out", "2"], "is not a number"),
    ],
)
def test_bad_prices_exit_2_saying_what_to_give(folder, capsys, extra, message):
    assert main(["report", str(folder), "--n-boot", "0", *extra]) == 2
    assert message in capsys.readouterr().err


def test_prices_per_model_from_a_csv(tmp_path, capsys):
    df = priced_records()
    df.loc[df["model"] == "small", ["input_tokens", "output_tokens"]] = [2000.0, 50.0]
    path = tmp_path / "priced.parquet"
    df.to_parquet(path)
    prices = tmp_path / "prices.csv"
    prices.write_text("model,price_in,price_out\nbig,3,15\nsmall,0.5,1.5\n")
    argv = ["report", path, "--by", "model", "--n-boot", "0", "--prices", prices, "--format", "csv"]
    report = pd.read_csv(io.StringIO(passk(capsys, *argv))).set_index("model")
    assert report.loc["big", "cost_usd_per_trial"] == pytest.approx((1000 * 3 + 100 * 15) / 1e6)
    assert report.loc["small", "cost_usd_per_trial"] == pytest.approx((2000 * 0.5 + 50 * 1.5) / 1e6)
    assert report.loc["small", "n_priced"] == (df["model"] == "small").sum()
    assert report.loc["big", ["price_in", "price_out"]].tolist() == [3.0, 15.0]
    assert report.loc["small", ["price_in", "price_out"]].tolist() == [0.5, 1.5]
    # pooled over both models: the row's prices are not one price, so they are not shown
    pooled = pd.read_csv(io.StringIO(passk(capsys, *argv[:2], "--by", "none", *argv[4:])))
    assert np.isnan(pooled.loc[0, "price_in"]) and pooled.loc[0, "cost_usd_total"] == pytest.approx(
        report["cost_usd_total"].sum()
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("model,price_in,price_out\nbig,3,15\n", "no price for small"),
        ("model,price_in\nbig,3\n", "no column price_out"),
        ("model,price_in,price_out\nbig,3,15\nsmall,-1,2\n", "price_in of small is not a finite number"),
        ("model,price_in,price_out\nbig,3,15\nsmall,1,2\nbig,1,1\n", "big listed twice"),
        (None, "no such file"),
    ],
)
def test_bad_price_files_exit_2_saying_what_to_fix(tmp_path, capsys, text, message):
    path = tmp_path / "priced.parquet"
    priced_records().to_parquet(path)
    prices = tmp_path / "prices.csv"
    if text is not None:
        prices.write_text(text)
    assert main(["report", str(path), "--n-boot", "0", "--prices", str(prices)]) == 2
    assert message in capsys.readouterr().err


def test_prices_and_one_price_are_exclusive(tmp_path, capsys):
    path = tmp_path / "priced.parquet"
    priced_records().to_parquet(path)
    prices = tmp_path / "prices.csv"
    prices.write_text("model,price_in,price_out\nbig,3,15\nsmall,1,2\n")
    argv = [
        "report",
        str(path),
        "--n-boot",
        "0",
        "--prices",
        str(prices),
        "--price-in",
        "1",
        "--price-out",
        "1",
    ]
    assert main(argv) == 2
    assert "not both" in capsys.readouterr().err


def _waiver_suite(accepted):
    """A one-task suite whose check accepts the statuses in ``accepted``: loosening it is an edit."""
    from passk_nb.harness.suites.build import answer, call, make_suite, task

    def set_status(state, ticket_id: str, status: str) -> dict:
        """Set a ticket's status."""
        state["tickets"][ticket_id]["status"] = status
        return {"ticket": ticket_id, "status": status}

    return make_suite(
        "tickets",
        instructions="You close support tickets.",
        tools=[set_status],
        initial_state=lambda: {"tickets": {"T1": {"status": "open"}}},
        tasks=[
            task(
                "waive-fine",
                "Please close ticket T1.",
                script=[call("set_status", ticket_id="T1", status="closed"), answer("Closed T1.")],
                expect={"tickets.T1.status": lambda value, ok=tuple(accepted): value in ok},
            )
        ],
    )


def test_an_edited_suite_is_reported_by_version_never_pooled(tmp_path, capsys):
    """Run, loosen the check, run twice more into the same folder: the records carry each suite
    version, `passk runs` tells the runs apart, and the report shows the newest version alone (saying
    what it left out) or, with --all-versions, one row per version."""
    import random

    from passk_nb.harness.fingerprint import suite_fingerprint

    rng = random.Random(0)

    def agent(messages):
        if any(m["role"] == "assistant" for m in messages):
            return '{"answer": "Done."}'
        status = rng.choice(["closed", "done", "resolved"])
        return json.dumps({"tool": "set_status", "args": {"ticket_id": "T1", "status": status}})

    versions = [("closed",), ("closed", "done"), ("closed", "done", "resolved")]
    runs = []
    for i, accepted in enumerate(versions):
        suite = _waiver_suite(accepted)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "suite 'tickets' changed since the runs in ..."
            df = passk_nb.run(agent, suite=suite, trials=10, out=tmp_path, progress=False, version="v1")
        assert set(df["suite_hash"]) == {suite_fingerprint(suite)}, i
        runs.append(df)
    hashes = [df["suite_hash"].iloc[0] for df in runs]
    assert len(set(hashes)) == 3 and int(runs[-1]["passed"].sum()) == 10

    listed = passk(capsys, "runs", tmp_path)
    for h in hashes:
        assert f"tickets (version {h})" in listed

    out = passk(capsys, "report", tmp_path, "--k", "2", "--where", "task=waive-fine", "--n-boot", "0")
    assert f"suite: tickets (version {hashes[2]})" in out
    assert "10/10 pass" in out and "/30 pass" not in out
    older = ", ".join(f"{h} (10 trials)" for h in sorted(hashes[:2]))
    assert f"older versions left out: {older}" in out

    every = passk(
        capsys, "report", tmp_path, "--k", "2", "--all-versions", "--format", "csv", "--n-boot", "0"
    )
    table = pd.read_csv(io.StringIO(every))
    assert sorted(table["suite_hash"]) == sorted(hashes)
    passes = {h: int(df["passed"].sum()) for h, df in zip(hashes, runs, strict=True)}
    assert dict(zip(table["suite_hash"], table["successes"], strict=True)) == passes


def test_a_prompt_without_a_hash_reads_as_its_name_not_name_and_empty_brackets(tmp_path, capsys):
    rows = [
        {"run_id": "r", "suite": "s", "model": "m", "prompt_name": "default", "task": t, "trial": i,
         "passed": i == 0, "outcome": "pass" if i == 0 else "wrong_output"}
        for t in ("a", "b") for i in range(2)
    ]  # fmt: skip
    frame_from_records(rows).to_parquet(tmp_path / "records.parquet")
    listed = passk(capsys, "runs", tmp_path / "records.parquet")
    report = passk(capsys, "report", tmp_path / "records.parquet", "--n-boot", 0)
    assert "()" not in listed and "()" not in report
    assert " default " in listed.splitlines()[2] and "prompt: default," in report.splitlines()[0]


def test_the_card_prints_every_axis_and_writes_one_page(tmp_path, capsys):
    """`passk report --card`: the reliability card as a table (a row per axis and measure, how to
    measure what was not) and as one HTML page; its numbers are reliability_card()'s."""
    passk_nb.run("scripted", trials=3, out=tmp_path / "runs", progress=False)
    passk_nb.run("scripted", trials=3, out=tmp_path / "runs", progress=False, faults="timeout:refund_order")
    text = passk(capsys, "report", tmp_path / "runs", "--card", "--n-boot", "100")
    for expected in ("reliability card", "pass^2", "change under timeout:refund_order", "not measured: ask"):
        assert expected in text
    card = passk_nb.stats.reliability_card(tmp_path / "runs", k=2, n_boot=100)
    change = card.loc[card["measure"].str.contains("timeout"), "value"].iloc[0]
    assert f"{change:.3g} [" in text
    as_json = json.loads(
        passk(capsys, "report", tmp_path / "runs", "--card", "--format", "json", "--n-boot", "100")
    )
    assert [r["measure"] for r in as_json] == card["measure"].tolist()
    page = tmp_path / "card.html"
    passk(capsys, "report", tmp_path / "runs", "--card", "--format", "html", "--out", page, "--n-boot", "100")
    html_text = page.read_text()
    assert html_text.startswith("<!doctype html>") and "data:image/png;base64," in html_text
    assert html_text.count("<tr>") == len(card) + 1 and "not measured" in html_text


def test_report_and_compare_take_cluster(tmp_path, capsys):
    """`--cluster COLUMN` reaches summarize and compare: the JSON rows equal cluster= in Python."""
    rng = np.random.default_rng(4)
    rows = [
        {"run_id": f"r-{prompt}", "suite": "s", "task": f"t{t}", "trial": i, "model": "m",
         "prompt_name": prompt, "prompt_hash": prompt, "task_family": f"f{t // 3}", "passed": bool(ok),
         "outcome": "pass" if ok else "wrong_state"}
        for prompt in ("a", "b") for t in range(15) for i, ok in enumerate(rng.random(4) < 0.3 + t / 25)
    ]  # fmt: skip
    path = tmp_path / "records.parquet"
    frame_from_records(rows).to_parquet(path)
    df = passk_nb.load(path)
    doc = json.loads(passk(capsys, "report", path, "--format", "json", "--cluster", "task_family"))
    expected = passk_nb.summarize(df, k=2, cluster="task_family")
    np.testing.assert_allclose(pd.DataFrame(doc["rows"])["pass^k_lo"], expected["pass^k_lo"], rtol=1e-12)
    assert expected["n_clusters"].tolist() == [5, 5]
    out = json.loads(
        passk(capsys, "compare", path, "--on", "prompt_name", "--a", "a", "--b", "b", "--k", 2,
              "--only", "compare", "--format", "json", "--cluster", "task_family")
    )  # fmt: skip
    compared = passk_nb.compare(df, on="prompt_name", a="a", b="b", k=2, cluster="task_family")
    got = pd.DataFrame(out["compare"] if isinstance(out, dict) and "compare" in out else out)
    np.testing.assert_allclose(got["lo"].astype(float), compared["lo"], rtol=1e-12)


def test_two_cards_side_by_side_from_the_command_line(tmp_path, capsys):
    for prompt in ("default", "strict"):
        passk_nb.run("scripted", trials=3, out=tmp_path / "runs", progress=False, prompt=prompt)
    text = passk(capsys, "report", tmp_path / "runs", "--card", "--on", "prompt_name", "--a", "default",
                 "--b", "strict", "--n-boot", "100")  # fmt: skip
    assert "prompt_name: strict against default" in text and "strict − default" in text
    both = passk_nb.stats.card_comparison(
        tmp_path / "runs", on="prompt_name", a="default", b="strict", k=2, n_boot=100
    )
    row = both[both["measure"] == "pass^2"].iloc[0]
    assert f"[{row['lo']:.3g}, {row['hi']:.3g}]" in text
    assert (
        main(["report", str(tmp_path / "runs"), "--on", "prompt_name", "--a", "default", "--b", "strict"])
        != 0
    )
    assert "--on, --a and --b go together, with --card" in capsys.readouterr().err


def test_a_text_report_leaves_the_transcripts_on_disk_and_the_page_reads_them(folder, capsys, monkeypatch):
    """The transcripts are most of a folder's bytes and no text format shows one (1M trials with ~1 KB
    transcripts: 3 GB loaded, bench_parquet.py). The HTML page shows failed trials' transcripts."""
    read = spy_parquet_reads(monkeypatch)
    for form in ("table", "markdown", "json", "csv"):
        capsys.readouterr()
        read.clear()
        assert main(["report", str(folder), "--format", form, "--n-boot", "0"]) == 0
        assert read and all(columns is not None and "transcript" not in columns for columns in read)
    claimed = pd.read_csv(io.StringIO(capsys.readouterr().out))["n_claimed_unperformed"]
    assert claimed.sum() == (records()["false_claims"] != "[]").sum() > 0  # the claims are still read
    read.clear()
    assert main(["report", str(folder), "--format", "html", "--n-boot", "0", "--out", "/dev/null"]) == 0
    assert read and all(columns is None for columns in read)
