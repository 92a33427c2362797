"""log_mlflow: one MLflow run per configuration in a real local file store, read back by MLflow."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pandas as pd
import pytest

from tests.helpers.fake_servers import require
from tests.helpers.records import records_from_marks

HAVE_MLFLOW = importlib.util.find_spec("mlflow") is not None

#: Two prompts of one model over five tasks (the fewest for which summarize gives an interval).
MARKS = {
    **{("m", "p", f"t{i}"): marks for i, marks in enumerate(["1101", "1111", "0010", "1i11", "0000"])},
    **{("m", "q", f"t{i}"): marks for i, marks in enumerate(["1111", "1111", "1011", "1111", "0100"])},
}


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    require(HAVE_MLFLOW, "mlflow (pip install 'passk-nb[mlflow]')")
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow >= 3.7 wants the opt-in
    return "file:" + str(tmp_path / "mlruns")


def test_one_run_per_configuration_with_summarizes_numbers(store: str) -> None:
    from mlflow import MlflowClient

    from passk_nb import log_mlflow, summarize

    records = records_from_marks(MARKS, prompt_names={"p": "plain", "q": "strict"})
    run_ids = log_mlflow(records, k=2, tracking_uri=store, experiment="exp", n_boot=200, artifacts=False)
    assert len(run_ids) == 2
    client = MlflowClient(store)
    [experiment] = [e for e in client.search_experiments() if e.name == "exp"]
    assert {r.info.run_id for r in client.search_runs([experiment.experiment_id])} == set(run_ids)
    table = summarize(records, k=2, n_boot=200)
    for run_id, (_, row) in zip(run_ids, table.iterrows(), strict=True):
        run = client.get_run(run_id)
        assert run.info.status == "FINISHED"
        assert run.data.params["prompt_name"] == row["prompt_name"] and run.data.params["model"] == "m"
        assert run.data.params["k"] == "2" and run.data.params["ci_method"] == row["ci_method"]
        assert run.data.params["passk_run_ids"] == f"m-{row['prompt_hash']}"
        metrics = run.data.metrics
        for column, key in [
            ("pass@k", "pass_at_k"),
            ("pass^k", "pass_hat_k"),
            ("pass^k_lo", "pass_hat_k_lo"),
            ("pass^k_hi", "pass_hat_k_hi"),
            ("pass^k_fixed_lo", "pass_hat_k_fixed_lo"),
            ("n_infra_excluded", "n_infra_excluded"),
        ]:
            assert not math.isnan(row[column])
            assert metrics[key] == pytest.approx(float(row[column]), rel=1e-12), key


def test_the_curve_and_the_report_are_artifacts(store: str) -> None:
    from mlflow import MlflowClient

    from passk_nb import log_mlflow

    records = records_from_marks({k: v for k, v in MARKS.items() if k[1] == "p"})
    [run_id] = log_mlflow(records, k=2, tracking_uri=store, n_boot=50)
    client = MlflowClient(store)
    assert sorted(a.path for a in client.list_artifacts(run_id)) == ["curve.png", "report.html"]
    folder = Path(client.download_artifacts(run_id, ""))
    assert (folder / "curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = (folder / "report.html").read_text()
    assert page.startswith("<!DOCTYPE html>") or "<html" in page[:200]
    assert "pass^2" in page


def test_a_declined_interval_is_not_logged_as_a_number(store: str) -> None:
    from mlflow import MlflowClient

    from passk_nb import log_mlflow

    few = records_from_marks({("m", "p", "t0"): "1101", ("m", "p", "t1"): "0111"})
    [run_id] = log_mlflow(few, k=2, tracking_uri=store, n_boot=0, artifacts=False)  # no draws: no interval
    metrics = MlflowClient(store).get_run(run_id).data.metrics
    assert "pass_hat_k" in metrics and "pass_hat_k_lo" not in metrics


def test_a_second_call_adds_runs_to_the_same_experiment(store: str) -> None:
    from mlflow import MlflowClient

    from passk_nb import log_mlflow

    records = records_from_marks({k: v for k, v in MARKS.items() if k[1] == "p"})
    first = log_mlflow(records, k=1, tracking_uri=store, n_boot=0, artifacts=False)
    second = log_mlflow(records, k=2, tracking_uri=store, n_boot=0, artifacts=False)
    client = MlflowClient(store)
    experiment = client.get_experiment_by_name("passk-nb")
    runs = client.search_runs([experiment.experiment_id])
    assert {r.info.run_id for r in runs} == set(first + second)
    assert pd.Series([r.data.params["k"] for r in runs]).value_counts().to_dict() == {"1": 1, "2": 1}


def test_passk_export_to_mlflow(store: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from mlflow import MlflowClient

    from passk_nb.cli.main import main

    runs = str(tmp_path / "runs")
    assert (
        main(["run", "--provider", "scripted", "--trials", "2", "--out", runs, "--quiet", "--no-progress"])
        == 0
    )
    assert main(["export", runs, "--to", "mlflow", "--tracking-uri", store]) == 2
    assert "--k" in capsys.readouterr().err
    argv = ["export", runs, "--to", "mlflow", "--k", "2", "--tracking-uri", store, "--n-boot", "50"]
    assert main(argv) == 0
    assert "1 MLflow runs logged in experiment 'passk-nb'" in capsys.readouterr().out
    client = MlflowClient(store)
    [run] = client.search_runs([client.get_experiment_by_name("passk-nb").experiment_id])
    assert run.data.metrics["pass_hat_k"] == 1.0 and run.data.params["suite"] == "orders"
