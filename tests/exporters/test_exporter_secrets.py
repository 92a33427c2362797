"""A key that made it into records in memory (written by something else than passk, or an older
version) reaches no exporter's output: OpenTelemetry spans and events, MLflow runs and their
artifacts, inspect_ai logs. The exporters cannot know the key: every credential shape is masked."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pandas as pd
import pytest

import passk_nb
from tests.helpers.fake_servers import require

KEY = "sk-passk-CANARY-7d41c9e0b2a84f6e"


@pytest.fixture
def records(tmp_path: Path) -> pd.DataFrame:
    """Two failed trials whose error, transcript and provider metadata hold the key."""
    df = passk_nb.run("scripted", trials=2, tasks=["refund-delivered"], out=tmp_path / "runs", progress=False)
    entries = json.loads(df.loc[0, "transcript"])
    entries.append({"kind": "reply", "role": "assistant", "text": f"the key is {KEY}", "latency_s": 0.1})
    for i in df.index:
        df.loc[i, ["passed", "outcome"]] = [False, "wrong_state"]
        df.loc[i, "error"] = f"HTTP 401: Authorization: Bearer {KEY}"
        df.loc[i, "transcript"] = json.dumps(entries)
        df.loc[i, "provider_meta"] = json.dumps({"batch_id": f"batch_{KEY}"})
    return df


def test_to_otel_masks_the_key(records: pd.DataFrame) -> None:
    require(importlib.util.find_spec("opentelemetry.sdk") is not None, "opentelemetry-sdk (passk-nb[otel])")
    from tests.exporters.test_to_otel import memory_providers

    tracer, logger, spans, logs = memory_providers()
    passk_nb.to_otel(records, tracer_provider=tracer, logger_provider=logger)
    emitted = [s.to_json() for s in spans.get_finished_spans()]
    emitted += [r.to_json() for r in logs.get_finished_logs()]
    text = "".join(emitted)
    assert "Authorization: Bearer [REDACTED]" in text  # the error was exported, masked
    assert KEY not in text


def test_log_mlflow_masks_the_key(records: pd.DataFrame, tmp_path: Path, monkeypatch) -> None:
    require(importlib.util.find_spec("mlflow") is not None, "mlflow (passk-nb[mlflow])")
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    store = tmp_path / "mlruns"
    passk_nb.log_mlflow(records, k=1, tracking_uri=f"file:{store}", n_boot=0)
    files = [f for f in store.rglob("*") if f.is_file()]
    assert any(f.name == "report.html" for f in files)  # the page of the failed trials' transcripts
    text = "".join(f.read_bytes().decode("utf-8", "replace") for f in files)
    assert "[REDACTED]" in text and KEY not in text


def test_to_inspect_masks_the_key(records: pd.DataFrame, tmp_path: Path) -> None:
    require(importlib.util.find_spec("inspect_ai") is not None, "inspect_ai (passk-nb[inspect])")
    from inspect_ai.log import read_eval_log

    [written] = passk_nb.to_inspect(records, tmp_path / "logs")
    text = read_eval_log(str(written)).model_dump_json()
    assert "[REDACTED]" in text and KEY not in text
