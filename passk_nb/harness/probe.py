"""Is the backend deterministic? :func:`probe` sends the same request again and again.

"4/4 then 0/4" can be the prompt, or the server. A probe sends identical requests at temperature
0 with a fixed seed, one at a time and concurrently, then the same seed and different seeds at
``seed_temperature``, and compares the replies: :func:`probe_summary` gives the share identical
to the most common reply, the distinct replies and where they differ; :func:`seed_verdict` says
whether the seed is honoured. Rows go under ``<out>/_probes/`` (out of :func:`passk_nb.load`'s way).

More: ``docs/guide/diagnose.md``.

>>> result = probe("scripted", repeats=3, concurrency=(1, 2), tasks=["refund-delivered"], progress=False)
>>> result.summary[["request", "phase", "concurrency", "n", "n_distinct"]]
                       request         phase  concurrency  n  n_distinct
0  first-turn/refund-delivered  temperature0            1  3           1
1  first-turn/refund-delivered  temperature0            2  3           1
2      prefix/refund-delivered  temperature0            1  3           1
3      prefix/refund-delivered  temperature0            2  3           1
4  first-turn/refund-delivered     same_seed            1  5           1
5  first-turn/refund-delivered   other_seeds            1  5           1
>>> result.seed_verdict.split(":")[0]  # the scripted backend ignores seeds: same reply whatever the seed
'cannot tell'
"""

from __future__ import annotations

import datetime as dt
import json
import os
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from passk_nb._version import __version__
from passk_nb.harness.preflight import check_backend
from passk_nb.harness.providers import BaseProvider, Message, Reply, make_provider
from passk_nb.harness.suites import get_suite
from passk_nb.harness.suites.base import Suite

#: Where probe records go inside a data folder (hidden from trial loads by the leading ``_``).
PROBES_DIR = "_probes"
#: The most requests per request and concurrency level (and per seed-check phase) a probe sends:
#: its plan is built up front, and a million replies already fill a notebook's memory.
MAX_REPEATS = 10_000
#: The highest temperature any backend here accepts (OpenAI's range is 0–2).
MAX_TEMPERATURE = 2.0
#: Columns of one probe record (one request).
COLUMNS: tuple[str, ...] = (
    "probe_id",
    "provider",
    "model",
    "base_url_host",
    "suite",
    "request",
    "phase",
    "concurrency",
    "repeat",
    "temperature",
    "seed",
    "reply",
    "error",
    "latency_s",
    "input_tokens",
    "output_tokens",
    "started_at",
    "harness_version",
)
_SCHEMA = pa.schema(
    [
        ("probe_id", pa.string()),
        ("provider", pa.string()),
        ("model", pa.string()),
        ("base_url_host", pa.string()),
        ("suite", pa.string()),
        ("request", pa.string()),
        ("phase", pa.string()),
        ("concurrency", pa.int64()),
        ("repeat", pa.int64()),
        ("temperature", pa.float64()),
        ("seed", pa.int64()),
        ("reply", pa.string()),
        ("error", pa.string()),
        ("latency_s", pa.float64()),
        ("input_tokens", pa.int64()),
        ("output_tokens", pa.int64()),
        ("started_at", pa.timestamp("us", tz="UTC")),
        ("harness_version", pa.string()),
    ]
)


@dataclass
class ProbeResult:
    """What :func:`probe` measured: every reply, the summary, and whether the seed is honoured."""

    replies: pd.DataFrame
    summary: pd.DataFrame
    seed_verdict: str
    path: Path | None = None


def probe(
    provider: Any,
    model: str | None = None,
    *,
    suite: str | Suite = "orders",
    tasks: Sequence[str] | None = None,
    repeats: int = 20,
    concurrency: Iterable[int] = (1, 8),
    temperature: float = 0.0,
    seed: int = 0,
    seed_temperature: float = 0.8,
    seed_repeats: int = 5,
    out: str | os.PathLike[str] | None = None,
    progress: bool = True,
    **options: Any,
) -> ProbeResult:
    """Send identical requests to a backend and measure how often the replies agree.

    ``provider``, ``model`` and ``options`` (``base_url=``, ``max_tokens=``, ...) are as
    for :func:`passk_nb.run`. ``tasks`` defaults to every task of ``suite``. See the
    module docstring for what is sent; ``seed_repeats=0`` skips the seed check. With
    ``out``, the replies are also written as parquet under ``<out>/_probes/<probe_id>/``.
    """
    levels = sorted({int(c) for c in concurrency})
    if not levels or levels[0] < 1:
        raise ValueError(f"concurrency must be whole numbers ≥ 1, got {list(concurrency)}")
    if not 2 <= repeats <= MAX_REPEATS:
        raise ValueError(
            f"repeats must be from 2 (to compare replies) to {MAX_REPEATS:,} per request and level, "
            f"got {repeats}"
        )
    if not 0 <= seed_repeats <= MAX_REPEATS:
        raise ValueError(
            f"seed_repeats must be from 0 (no seed check) to {MAX_REPEATS:,}, got {seed_repeats}"
        )
    for name, value in (("temperature", temperature), ("seed_temperature", seed_temperature)):
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= MAX_TEMPERATURE:
            raise ValueError(f"{name} must be a number from 0 to {MAX_TEMPERATURE}, got {value!r}")
    if seed_repeats and seed_temperature <= 0:
        raise ValueError("seed_temperature must be > 0: at temperature 0 different seeds need not differ")
    the_suite = get_suite(suite)
    chosen = [the_suite.task(t) for t in tasks] if tasks is not None else list(the_suite.tasks)
    requests = probe_requests(the_suite, [t.id for t in chosen])
    backend = make_provider(provider, model, temperature=temperature, seed=seed, **options)
    check_backend(backend)
    described = backend.describe()
    probe_id = uuid.uuid4().hex[:12]
    identity = {
        "probe_id": probe_id,
        "provider": str(described["provider"]),
        "model": str(described["model"]),
        "base_url_host": described["base_url_host"],
        "suite": the_suite.name,
        "harness_version": __version__,
    }
    plan: list[tuple[str, list[Message], str, int, int, float, int]] = []
    for name, messages in requests.items():
        for level in levels:
            plan += [(name, messages, "temperature0", level, i, temperature, seed) for i in range(repeats)]
    first_name, first_messages = next(iter(requests.items()))
    for i in range(seed_repeats):
        plan.append((first_name, first_messages, "same_seed", 1, i, seed_temperature, seed))
    for i in range(seed_repeats):
        plan.append((first_name, first_messages, "other_seeds", 1, i, seed_temperature, seed + 1 + i))
    bar = _progress(len(plan), progress)
    rows: list[dict[str, Any]] = []
    try:
        for key in dict.fromkeys((name, phase, level) for name, _, phase, level, *_ in plan):
            batch = [p for p in plan if (p[0], p[2], p[3]) == key]
            with ThreadPoolExecutor(max_workers=key[2]) as pool:
                for row in pool.map(lambda p: _send(backend, *p), batch):
                    rows.append({**identity, **row})
                    if bar is not None:
                        bar.update(1)
    finally:
        if bar is not None:
            bar.close()
        if isinstance(provider, str):
            backend.close()
    replies = pd.DataFrame(rows, columns=list(COLUMNS))
    path = _write(replies, Path(out), probe_id) if out is not None else None
    return ProbeResult(replies, probe_summary(replies), seed_verdict(replies), path)


def probe_requests(suite: Suite, tasks: Sequence[str]) -> dict[str, list[Message]]:
    """The conversations a probe sends: the first turn of each task, then one multi-turn prefix.

    The prefix is the first task's first turn, its known-good first action and that
    action's tool result, exactly as a trial would show them.

    >>> requests = probe_requests(get_suite("orders"), ["refund-delivered"])
    >>> list(requests), [m["role"] for m in requests["prefix/refund-delivered"]]
    (['first-turn/refund-delivered', 'prefix/refund-delivered'], ['system', 'user', 'assistant', 'user'])
    """
    system = suite.prompts["default"]
    out: dict[str, list[Message]] = {}
    for task_id in tasks:
        task = suite.task(task_id)
        out[f"first-turn/{task.id}"] = [
            {"role": "system", "content": system},
            {"role": "user", "content": task.prompt},
        ]
    first = suite.task(tasks[0])
    step = next((s for s in first.script if "tool" in s), None)
    if step is not None:
        result = suite.make_env().try_call(step["tool"], step["args"])
        tool_text = json.dumps(result, ensure_ascii=False, default=str, allow_nan=True)
        out[f"prefix/{first.id}"] = [
            *out[f"first-turn/{first.id}"],
            {"role": "assistant", "content": json.dumps(step)},
            {"role": "user", "content": f"Tool result ({step['tool']}): {tool_text}"},
        ]
    return out


def _send(
    backend: BaseProvider,
    name: str,
    messages: list[Message],
    phase: str,
    level: int,
    repeat: int,
    temperature: float,
    seed: int,
) -> dict[str, Any]:
    client = backend.with_seed(seed)
    client.temperature = temperature
    started = dt.datetime.now(dt.UTC)
    t0 = time.perf_counter()
    text: str | None = None
    error: str | None = None
    tokens: tuple[int | None, int | None] = (None, None)
    try:
        raw = client.chat([dict(m) for m in messages])
        reply = raw if isinstance(raw, Reply) else Reply(str(raw))
        text, tokens = reply.text, (reply.input_tokens, reply.output_tokens)
    except Exception as exc:  # a failed request is data: the summary counts it
        error = f"{type(exc).__name__}: {exc}"
    return {
        "request": name,
        "phase": phase,
        "concurrency": level,
        "repeat": repeat,
        "temperature": temperature,
        "seed": seed,
        "reply": text,
        "error": error,
        "latency_s": round(time.perf_counter() - t0, 6),
        "input_tokens": tokens[0],
        "output_tokens": tokens[1],
        "started_at": started,
    }


def probe_summary(replies: pd.DataFrame) -> pd.DataFrame:
    """Per request, phase and concurrency: how alike the replies are, and how fast they came.

    Columns: ``request``, ``phase``, ``concurrency``, ``n`` requests, ``n_errors``,
    ``n_distinct`` replies, ``share_identical`` (replies equal to the most common one, of
    those that came back), ``first_divergence`` (the first character position at which any
    reply differs from the most common one; NaN when all agree), ``latency_p50``,
    ``latency_p90``, ``latency_p99`` (seconds) and ``deterministic`` (one distinct reply,
    no errors). The temperature-0 rows come first; the seed-check rows follow.

    >>> replies = pd.DataFrame({"request": "r", "phase": "temperature0", "concurrency": 1,
    ...     "reply": ["abcd", "abcd", "abXd"], "error": None, "latency_s": [0.1, 0.2, 0.3]})
    >>> probe_summary(replies)[["n_distinct", "share_identical", "first_divergence"]].round(3)
       n_distinct  share_identical  first_divergence
    0           2            0.667               2.0
    """
    rows = []
    keys = ["request", "phase", "concurrency"]
    for key, part in replies.groupby(keys, sort=False):
        texts = [t for t in part["reply"] if isinstance(t, str)]
        counts = Counter(texts)
        modal, n_modal = counts.most_common(1)[0] if counts else (None, 0)
        splits = [_common_prefix(modal, t) for t in counts if t != modal] if modal is not None else []
        latency = part["latency_s"].to_numpy(dtype=float)
        p50, p90, p99 = np.percentile(latency, [50, 90, 99]) if len(latency) else (np.nan,) * 3
        n_errors = int(part["error"].notna().sum())
        rows.append(
            {
                **dict(zip(keys, key, strict=True)),
                "n": len(part),
                "n_errors": n_errors,
                "n_distinct": len(counts),
                "share_identical": n_modal / len(texts) if texts else np.nan,
                "first_divergence": float(min(splits)) if splits else np.nan,
                "latency_p50": float(p50),
                "latency_p90": float(p90),
                "latency_p99": float(p99),
                "deterministic": len(counts) == 1 and n_errors == 0,
            }
        )
    out = pd.DataFrame(rows)
    if out.empty:
        return out
    out["_seed_phase"] = out["phase"] != "temperature0"
    out = out.sort_values(["_seed_phase", "request", "concurrency"], kind="stable").drop(
        columns="_seed_phase"
    )
    return out.reset_index(drop=True)


def seed_verdict(replies: pd.DataFrame) -> str:
    """Whether the backend honours the seed, from the ``same_seed`` and ``other_seeds`` rows.

    >>> rows = lambda phase, texts: pd.DataFrame({"phase": phase, "reply": texts, "error": None})
    >>> seed_verdict(pd.concat([rows("same_seed", ["a", "a"]), rows("other_seeds", ["b", "c"])]))
    'honoured: the same seed gave the same reply, different seeds different replies'
    >>> seed_verdict(pd.concat([rows("same_seed", ["a", "b"]), rows("other_seeds", ["b", "c"])]))
    'not honoured: the same seed gave 2 different replies'
    """
    same = replies.loc[replies["phase"] == "same_seed", "reply"].dropna()
    other = replies.loc[replies["phase"] == "other_seeds", "reply"].dropna()
    if same.empty or other.empty:
        return "not checked"
    if same.nunique() > 1:
        return f"not honoured: the same seed gave {same.nunique()} different replies"
    if other.nunique() > 1 or set(other) != set(same):
        return "honoured: the same seed gave the same reply, different seeds different replies"
    return (
        "cannot tell: different seeds gave the same reply (the backend ignores temperature or seed, "
        "or the model is certain)"
    )


def _common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def _write(replies: pd.DataFrame, out: Path, probe_id: str) -> Path:
    folder = out / PROBES_DIR / probe_id
    folder.mkdir(parents=True, exist_ok=True)
    final = folder / "part-0.parquet"
    tmp = folder / ".part-0.parquet.tmp"
    table = pa.Table.from_pandas(
        replies.astype({"input_tokens": "Int64", "output_tokens": "Int64"}),
        schema=_SCHEMA,
        preserve_index=False,
    )
    pq.write_table(table, tmp, compression="zstd")
    os.replace(tmp, final)
    return final


def load_probes(folder: str | os.PathLike[str]) -> pd.DataFrame:
    """Every probe record written under ``folder`` (by :func:`probe` with ``out=folder``).

    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> _ = probe("scripted", repeats=2, concurrency=[1], tasks=["refund-delivered"], seed_repeats=0,
    ...           out=folder, progress=False)
    >>> len(load_probes(folder))
    4
    """
    files = sorted((Path(folder) / PROBES_DIR).glob("*/*.parquet"))
    if not files:
        raise FileNotFoundError(
            f"no probe records under {folder}; write some with probe(..., out={str(folder)!r})"
        )
    return pd.concat([pq.read_table(f).to_pandas() for f in files], ignore_index=True)


def _progress(total: int, enabled: bool) -> Any:
    if not enabled:
        return None
    from tqdm.auto import tqdm

    from passk_nb.harness.batch import progress_file

    return tqdm(total=total, desc="probe", unit="request", file=progress_file())
