"""Trial records summarised into MLflow runs: :func:`log_mlflow`.

Every number logged is a column :func:`passk_nb.summarize` returned; the figure and the page are
the view layer's own (:func:`passk_nb.view.plot_curve`, the ``passk report --format html`` page).
Written through MLflow's own client (``MlflowClient``), so any tracking URI MLflow accepts works.
Install the extra: ``pip install "passk-nb[mlflow]"`` (``mlflow-skinny``: the client and the
file store, no server).
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from passk_nb._version import __version__
from passk_nb.data.redact import mask_frame
from passk_nb.stats.params import CI, INFRA, N_BOOT, SEED, default_by
from passk_nb.stats.summary import summarize

_INSTALL = 'pip install "passk-nb[mlflow]"'
#: summarize's columns logged as metrics, under MLflow-safe names (MLflow keys take no @ or ^).
METRICS: tuple[str, ...] = (
    "pass@k",
    "pass^k",
    "pass@k_lo",
    "pass@k_hi",
    "pass^k_lo",
    "pass^k_hi",
    "pass@k_fixed_lo",
    "pass@k_fixed_hi",
    "pass^k_fixed_lo",
    "pass^k_fixed_hi",
    "pass@k_infra_fail",
    "pass^k_infra_fail",
    "n_tasks",
    "trials",
    "successes",
    "n_infra_excluded",
)


def metric_name(column: str) -> str:
    """The MLflow metric key of a :func:`passk_nb.summarize` column.

    >>> metric_name("pass^k_lo"), metric_name("pass@k")
    ('pass_hat_k_lo', 'pass_at_k')
    """
    return column.replace("pass@k", "pass_at_k").replace("pass^k", "pass_hat_k")


def log_mlflow(
    df: pd.DataFrame,
    *,
    k: int,
    tracking_uri: str | None = None,
    experiment: str = "passk-nb",
    by: str | Sequence[str] | None = None,
    ci: float = CI,
    n_boot: int = N_BOOT,
    seed: int = SEED,
    infra: str = INFRA,
    artifacts: bool = True,
) -> list[str]:
    """Log one MLflow run per configuration of ``df``; returns the MLflow run ids, one per row of
    ``summarize(df, k=k, by=by)`` in its order.

    Each run, in ``experiment`` (created when missing) at ``tracking_uri`` (default: MLflow's
    own, ``MLFLOW_TRACKING_URI``):

    - metrics: pass@k and pass^k at ``k`` and their interval bounds (new tasks, these tasks, and
      infra errors counted as failures) with the task, trial, success and excluded-infra counts,
      all columns of :func:`passk_nb.summarize` under MLflow-safe names (:func:`metric_name`:
      ``pass^k_lo`` is ``pass_hat_k_lo``); a bound summarize declined (NaN) is not logged;
    - params: the identity fields (suite, provider, model, prompt name and hash, config), ``k``,
      ``ci``, ``n_boot``, ``seed``, ``infra``, the interval method used, and the passk-nb run ids;
    - artifacts (``artifacts=True``): ``curve.png``, the pass@k / pass^k curve with its
      intervals, and ``report.html``, the self-contained page of ``passk report --format html``.

    MLflow ≥ 3.7 refuses a ``file:`` store unless ``MLFLOW_ALLOW_FILE_STORE=true`` is set (it
    wants a database); that is MLflow's rule, not changed here.

    >>> import pytest; _ = pytest.importorskip("mlflow")  # needs passk-nb[mlflow]
    >>> import os, tempfile, passk_nb
    >>> os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"
    >>> df = passk_nb.run("scripted", trials=2, out=tempfile.mkdtemp(), progress=False)
    >>> uri = "file:" + tempfile.mkdtemp()
    >>> [run_id] = log_mlflow(df, k=2, tracking_uri=uri, n_boot=0, artifacts=False)
    >>> from mlflow import MlflowClient
    >>> MlflowClient(uri).get_run(run_id).data.metrics["pass_hat_k"]
    1.0
    >>> del os.environ["MLFLOW_ALLOW_FILE_STORE"]
    """
    try:
        from mlflow import MlflowClient
        from mlflow.entities import Metric, Param
    except ImportError as err:
        raise ImportError(f"log_mlflow writes through MLflow, which is not installed: {_INSTALL}") from err
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"log_mlflow needs a DataFrame of trial records, got {type(df).__name__}")
    df = mask_frame(df)  # credentials out of what leaves: errors, transcripts, metadata
    columns = default_by(df, by)
    table = summarize(df, k=k, by=columns, ci=ci, n_boot=n_boot, seed=seed, infra=infra)
    client = MlflowClient(tracking_uri=tracking_uri)
    found = client.get_experiment_by_name(experiment)
    experiment_id = found.experiment_id if found is not None else client.create_experiment(experiment)
    run_ids = []
    for _, row in table.iterrows():
        identity = {c: row[c] for c in columns}
        mask = pd.Series(True, index=df.index)
        for column, value in identity.items():
            mask &= df[column].isna() if pd.isna(value) else df[column] == value
        group = df[mask]
        name = " / ".join(str(v) for v in identity.values() if isinstance(v, str) and v) or "all trials"
        run = client.create_run(experiment_id, run_name=name[:250], tags={"passk_nb.version": __version__})
        run_id = run.info.run_id
        try:
            stamp = _millis(group)
            metrics = [
                Metric(metric_name(col), float(row[col]), stamp, 0)
                for col in METRICS
                if col in row.index and row[col] is not None and not _nan(row[col])
            ]
            params = {**{c: "" if pd.isna(v) else str(v) for c, v in identity.items()}}
            params.update(k=str(k), ci=str(ci), n_boot=str(n_boot), seed=str(seed), infra=infra)
            if "ci_method" in row.index:
                params["ci_method"] = str(row["ci_method"])
            if "run_id" in group.columns:
                params["passk_run_ids"] = ",".join(sorted(map(str, group["run_id"].unique())))[:6000]
            client.log_batch(
                run_id, metrics=metrics, params=[Param(key, value[:6000]) for key, value in params.items()]
            )
            if artifacts:
                _log_figures(
                    client, run_id, group, k=k, by=columns, ci=ci, n_boot=n_boot, seed=seed, infra=infra
                )
        except BaseException:
            client.set_terminated(run_id, status="FAILED")
            raise
        client.set_terminated(run_id)
        run_ids.append(run_id)
    return run_ids


def _nan(value: Any) -> bool:
    try:
        return math.isnan(float(value))
    except (TypeError, ValueError):
        return True


def _millis(group: pd.DataFrame) -> int:
    """The metrics' timestamp: when the configuration's first trial started (else now)."""
    if "started_at" in group.columns and group["started_at"].notna().any():
        return int(pd.to_datetime(group["started_at"], utc=True).min().value // 1_000_000)
    return int(pd.Timestamp.now(tz="UTC").value // 1_000_000)


def _log_figures(client: Any, run_id: str, group: pd.DataFrame, **options: Any) -> None:
    import matplotlib.pyplot as plt

    from passk_nb.stats.summary import curve as curve_of
    from passk_nb.view.plots import figure_png, plot_curve
    from passk_nb.view.report_html import report_html

    with tempfile.TemporaryDirectory() as folder:
        curve = Path(folder) / "curve.png"
        statistic = {key: options[key] for key in ("by", "ci", "n_boot", "seed", "infra")}
        ax = plot_curve(curve_of(group, **statistic), at_k=options["k"])
        figure = ax.get_figure(root=True)
        assert figure is not None  # an Axes plot_curve drew is on a figure
        curve.write_bytes(figure_png(figure))
        plt.close(figure)
        page = Path(folder) / "report.html"
        page.write_text(report_html(group, **options), encoding="utf-8")
        client.log_artifact(run_id, os.fspath(curve))
        client.log_artifact(run_id, os.fspath(page))
