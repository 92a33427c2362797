"""Trial records written as strings of marks, for tests of the analysis layer."""

import pandas as pd

from passk_nb.data.records import frame_from_records

OUTCOME_OF_MARK = {
    "1": "pass",
    "0": "wrong_state",
    "x": "format_error",
    "u": "unrequested_change",
    "i": "infra_error",
}


def records_from_marks(
    spec: dict[tuple[str, str, str], str], prompt_names: dict[str, str] | None = None
) -> pd.DataFrame:
    """{(model, prompt_hash, task): "1101"}: 1 pass, 0 wrong_state, x format_error, u unrequested_change,
    i infra_error; trial i is the i-th mark.

    >>> records_from_marks({("m", "p", "t"): "10i"})["outcome"].tolist()
    ['pass', 'wrong_state', 'infra_error']
    """
    names = prompt_names or {}
    return frame_from_records(
        {
            "run_id": f"{model}-{prompt}",
            "suite": "orders",
            "model": model,
            "provider": "test",
            "prompt_hash": prompt,
            "prompt_name": names.get(prompt, ""),
            "task": task,
            "trial": i,
            "passed": mark == "1",
            "outcome": OUTCOME_OF_MARK[mark],
        }
        for (model, prompt, task), marks in spec.items()
        for i, mark in enumerate(marks)
    )


def synthetic_trials(models: int, prompts: int, tasks: int, trials: int, seed: int = 0) -> pd.DataFrame:
    """models × prompts × tasks × trials rows (one run per model and prompt), sorted as runs write
    them; each (arm, task) passes with its own probability drawn from Beta(2, 1)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    arms = models * prompts
    p = rng.beta(2, 1, (arms, tasks))
    passed = (rng.random((arms, tasks, trials)) < p[:, :, None]).ravel()
    return pd.DataFrame(
        {
            "run_id": np.repeat([f"run-{a}" for a in range(arms)], tasks * trials),
            "model": np.repeat([f"model-{m}" for m in range(models)], prompts * tasks * trials),
            "prompt_hash": np.tile(np.repeat([f"{q:012x}" for q in range(prompts)], tasks * trials), models),
            "task": np.tile(np.repeat([f"task-{t:04d}" for t in range(tasks)], trials), arms),
            "trial": np.tile(np.arange(trials), arms * tasks),
            "passed": passed,
            "outcome": np.where(passed, "pass", "wrong_state"),
        }
    )


def minimal_rows(run_id: str, trials, outcome: str = "pass", task: str = "t") -> list[dict]:
    """The fewest fields a stored record needs, for tests of the store: one row per trial number."""
    return [
        {
            "run_id": run_id,
            "suite": "s",
            "task": task,
            "trial": i,
            "passed": outcome == "pass",
            "outcome": outcome,
        }
        for i in trials
    ]


def spy_parquet_reads(monkeypatch) -> list:
    """The ``columns`` of every ``pyarrow.parquet.ParquetFile.read`` from now on (None: every column),
    for tests that a reader leaves some columns (the transcripts) on disk."""
    import pyarrow.parquet as pq

    read: list = []
    original = pq.ParquetFile.read

    def spy(self, columns=None, **kwargs):
        read.append(columns)
        return original(self, columns=columns, **kwargs)

    monkeypatch.setattr(pq.ParquetFile, "read", spy)
    return read
