"""Build ``data/livecodebench/counts.parquet``, the LiveCodeBench counts table, from its source.

The source is LiveCodeBench's published per-problem code-generation results of 2025-01-15
(``data/livecodebench/source/``, CC BY-SA 4.0; ``SOURCE-README.md`` there gives the
repository, commit and blob). It publishes, per (problem, model), only the percentage of
samples that passed; the number of samples ``n`` is *inferred* (10 for the 13 chat models, 1
for the six reasoning models whose names say "(N=1)"), and ``c`` = percentage × n / 100. No
sample order, code or transcript exists, so the table is one order-free summary per problem.

The counts table has one row per (model, problem), in the columns every analysis of
passk-nb accepts as a counts table (``task``, ``n``, ``c`` plus keys):
``model``, ``task`` (LiveCodeBench's ``question_id``), ``platform``, ``difficulty``,
``contest_date`` (the problem's contest day), ``n``, ``c``.

    python scripts/make_livecodebench_data.py           # rewrites data/livecodebench/counts.parquet
    python scripts/make_livecodebench_data.py --check   # exit 1 if the bundled table differs

``tests/test_example_data.py`` rebuilds the table with :func:`build` and checks that it equals
the bundled file and reproduces every model's published pass@1.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

FOLDER = Path(__file__).resolve().parent.parent / "data" / "livecodebench"
SOURCE = FOLDER / "source" / "lcb_codegen_2025-01-15.csv.gz"
COUNTS = FOLDER / "counts.parquet"
COLUMNS = ["model", "task", "platform", "difficulty", "contest_date", "n", "c"]


def read_source(path: Path = SOURCE) -> pd.DataFrame:
    """The source file as published (one row per problem and model)."""
    return pd.read_csv(path, dtype={"question_id": str})


def build(source: pd.DataFrame) -> pd.DataFrame:
    """The counts table from the source rows; refuses a count that is not a whole number."""
    c = source["pass_at_1_pct"] * source["n_samples"] / 100
    bad = (c - c.round()).abs() > 1e-6
    if bad.any():
        row = source[bad].iloc[0]
        raise ValueError(
            f"{row['model']} on {row['question_id']}: {row['pass_at_1_pct']} % of {row['n_samples']} "
            "samples is not a whole number of successes; the inferred n is wrong for this model"
        )
    if not (source["n_correct"] == c.round()).all():
        raise ValueError("the source's n_correct column disagrees with pass_at_1_pct × n_samples / 100")
    table = pd.DataFrame(
        {
            "model": source["model"].astype(str),
            "task": source["question_id"].astype(str),
            "platform": source["platform"].astype(str),
            "difficulty": source["difficulty"].astype(str),
            "contest_date": pd.to_datetime(source["contest_date_ms"], unit="ms").dt.normalize(),
            "n": source["n_samples"].astype("int64"),
            "c": c.round().astype("int64"),
        }
    )
    return table.sort_values(["model", "task"], ignore_index=True)[COLUMNS]


def main(argv: list[str] | None = None) -> int:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--check", action="store_true", help="compare with the bundled table, write nothing")
    args = parser.parse_args(argv)
    table = build(read_source())
    if args.check:
        same = COUNTS.exists() and table.equals(pd.read_parquet(COUNTS))
        print("bundled table is up to date" if same else f"{COUNTS} differs from what the source gives")
        return 0 if same else 1
    table.to_parquet(COUNTS, index=False, compression="zstd")
    models, problems = table["model"].nunique(), table["task"].nunique()
    print(f"wrote {COUNTS}: {len(table)} rows, {models} models, {problems} problems")
    return 0


if __name__ == "__main__":
    sys.exit(main())
